"""Tolerant JSON extraction from a model's reply, for servers that ignore ``response_format``.

Models wrap JSON in ```json fences, put a sentence before or after it, or leave a
trailing comma. This module finds the JSON value in such text and decodes it with
``json.loads`` only: nothing a model writes is ever evaluated as code.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

__all__ = [
    "JSONExtractionError",
    "TruncatedJSONError",
    "extract_json",
    "parse_model",
    "strip_trailing_commas",
]

ModelT = TypeVar("ModelT", bound=BaseModel)

_FENCE = re.compile(r"```[ \t]*(?:json5?|JSON)?[ \t]*\r?\n?(.*?)```", re.DOTALL)
_OPENERS = {"{": "}", "[": "]"}


class JSONExtractionError(ValueError):
    """The text holds no decodable JSON object or array."""


class TruncatedJSONError(JSONExtractionError):
    """The text starts a JSON value that never closes: the reply was cut off."""


def strip_trailing_commas(text: str) -> str:
    """Remove commas directly before ``}`` or ``]``, leaving string contents untouched."""
    out: list[str] = []
    in_string = False
    escaped = False
    pending_comma: list[str] = []  # a comma and the whitespace after it, not yet emitted
    for char in text:
        if in_string:
            out.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if pending_comma:
            if char.isspace():
                pending_comma.append(char)
                continue
            if char not in "}]":
                out.extend(pending_comma)
            else:
                # Keep the whitespace, drop the comma.
                out.extend(pending_comma[1:])
            pending_comma = []
        if char == ",":
            pending_comma = [char]
        elif char == '"':
            in_string = True
            out.append(char)
        else:
            out.append(char)
    out.extend(pending_comma)
    return "".join(out)


def _balanced_end(text: str, start: int) -> int | None:
    """Index just past the JSON value opening at ``start``, or None if it never closes."""
    stack: list[str] = []
    in_string = False
    escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in _OPENERS:
            stack.append(_OPENERS[char])
        elif stack and char == stack[-1]:
            stack.pop()
            if not stack:
                return index + 1
    return None


def _loads(candidate: str) -> Any:
    try:
        return json.loads(candidate)
    except json.JSONDecodeError:
        return json.loads(strip_trailing_commas(candidate))


def extract_json(text: str) -> Any:
    """The first JSON object or array in ``text``.

    Tried in order: the whole text, each fenced code block, then each balanced
    ``{...}``/``[...]`` region. Raises ``TruncatedJSONError`` when a value opens
    but never closes, ``JSONExtractionError`` when there is nothing to decode.
    """
    stripped = text.strip()
    if not stripped:
        raise JSONExtractionError("empty reply")
    candidates = [stripped, *(block.strip() for block in _FENCE.findall(text))]
    for candidate in candidates:
        if candidate[:1] in _OPENERS:
            try:
                return _loads(candidate)
            except json.JSONDecodeError:
                pass
    truncated = False
    for start, char in enumerate(text):
        if char not in _OPENERS:
            continue
        end = _balanced_end(text, start)
        if end is None:
            # An opener that never closes: a cut reply if nothing later decodes.
            truncated = True
            break
        try:
            return _loads(text[start:end])
        except json.JSONDecodeError:
            continue
    if truncated:
        raise TruncatedJSONError("the JSON in the reply is cut off")
    raise JSONExtractionError("no JSON object in the reply")


def parse_model(text: str, model: type[ModelT], *, max_items: int | None = None) -> ModelT:
    """Validate ``text`` as ``model``: strict JSON first, tolerant extraction second.

    With ``max_items``, every list of the top-level object is cut to that many items
    before validation, so a reply listing a flood of items costs no more than the cap.
    Raises ``pydantic.ValidationError`` when JSON is found but does not fit the model,
    and ``JSONExtractionError`` (or ``TruncatedJSONError``) when no JSON is found.
    """
    if max_items is not None:
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = extract_json(text)
        if isinstance(data, dict):
            data = {k: v[:max_items] if isinstance(v, list) else v for k, v in data.items()}
        return model.model_validate(data)
    try:
        return model.model_validate_json(text)
    except ValidationError as strict_error:
        try:
            data = extract_json(text)
        except JSONExtractionError:
            if _is_json(text):
                # Valid JSON of the wrong shape: report the schema error, not "no JSON".
                raise strict_error from None
            raise
        return model.model_validate(data)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True
