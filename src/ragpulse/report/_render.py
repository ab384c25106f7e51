"""Fills the page template with a report's data: one self-contained HTML file."""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from typing import Any

from ragpulse._version import __version__
from ragpulse.outputs.files import escape_unsafe


def _asset(name: str) -> str:
    return resources.files("ragpulse.report").joinpath(name).read_text(encoding="utf-8")


# A lone surrogate (a "\ud800" escape in a file read) is a str no UTF-8 page can hold.
_SURROGATE = re.compile("[\\ud800-\\udfff]")


def _json_script(value: Any) -> str:
    # Inside <script type="application/json"> only "</script" could end the element early;
    # escaping every "<" keeps the JSON valid and the element whole; escape_unsafe writes a
    # lone surrogate (which no UTF-8 page can hold) as its \u escape.
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return escape_unsafe(text).replace("<", "\\u003c")


def _html_text(text: str) -> str:
    return html.escape(_SURROGATE.sub("\ufffd", text))


def render_page(title: str, data: dict[str, Any], details: list[dict[str, Any]]) -> str:
    """The HTML page: template, style and script inlined, data embedded as JSON."""
    detail_scripts = "\n".join(
        f'<script type="application/json" id="rp-detail-{i}">{_json_script(d)}</script>'
        for i, d in enumerate(details)
    )
    # One pass over the template: a placeholder's value is never searched for another one.
    values = {
        "__TITLE__": _html_text(title),
        "__VERSION__": html.escape(__version__),
        "__CSS__": _asset("page.css"),
        "__JS__": _asset("page.js"),
        "__DATA__": _json_script(data),
        "__DETAILS__": detail_scripts,
    }
    template = _asset("page.html")
    out: list[str] = []
    cursor = 0
    while True:
        at = template.find("__", cursor)
        if at < 0:
            break
        end = template.find("__", at + 2)
        key = template[at : end + 2] if end >= 0 else ""
        if key in values:
            out.append(template[cursor:at])
            out.append(values[key])
            cursor = end + 2
        else:
            out.append(template[cursor : at + 2])
            cursor = at + 2
    out.append(template[cursor:])
    return "".join(out)
