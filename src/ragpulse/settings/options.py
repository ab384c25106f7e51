"""The option groups of ``configure()``: each a section of the settings table, as an object.

``configure(bounds=BoundsOptions(hold_timeout=10))`` sets ``hold_timeout`` as a keyword of
its own would: before its variable, ahead of the default. A field left ``None`` is not given;
a field of the wrong type (``ContentOptions(hash_key=12345)``) is a ``TypeError`` naming it.
Each field is a row of the table (``ragpulse.settings._table``), which says what it means and
its variable; the default is the ``Settings`` field of the same name. The classes are written
out by hand, not built from the table, so type checkers see their fields;
``tests/unit/test_settings_reference.py`` keeps fields, rows and defaults equal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, TypeAlias

from ragpulse.capture._content import Redactor
from ragpulse.settings._table import SOURCES
from ragpulse.settings._types import check_arguments

__all__ = [
    "BoundsOptions",
    "ContentOptions",
    "EvaluationOptions",
    "ExportOptions",
    "JudgeOptions",
    "Options",
    "SamplingOptions",
    "option_settings",
    "setting_of",
    "spelling",
]


class _Group:
    """What every options class shares: its fields' types are checked when it is made."""

    def __post_init__(self) -> None:
        given = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        check_arguments(type(self), type(self).__name__, given)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExportOptions(_Group):
    """How traces, metrics and log events leave the process, and how long exit may take."""

    group = "export"

    protocol: str | None = None
    headers: Mapping[str, str] | None = None
    timeout: float | None = None
    compression: str | None = None
    prometheus_host: str | None = None
    metric_export_interval: float | None = None
    buffer_bytes: int | None = None
    buffer_seconds: float | None = None
    max_batch_bytes: int | None = None
    handle_sigterm: bool | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class JudgeOptions(_Group):
    """The judge ``configure()`` builds, and how its work is run."""

    group = "judging"

    model: str | None = None
    label_map: str | None = None
    threads: int | None = None
    device: str | Collection[str] | None = None
    cascade_escalate: str | None = None
    cascade_band: tuple[float, float] | str | None = None
    correctness_mode: str | None = None
    concurrency: int | None = None
    evaluation_timeout: float | None = None
    nice: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class SamplingOptions(_Group):
    """Which requests are evaluated besides ``sample_rate``, and the caps on them."""

    group = "sampling"

    always_evaluate: Collection[str] | None = None
    max_evaluations_per_minute: float | None = None
    max_judge_tokens_per_hour: float | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class BoundsOptions(_Group):
    """What ragpulse may hold while it evaluates, and for how long."""

    group = "bounds"

    hold_timeout: float | None = None
    shutdown_timeout: float | None = None
    max_held_spans: int | None = None
    max_held_bytes: int | None = None
    max_queue_size: int | None = None
    max_queue_bytes: int | None = None
    max_input_chars: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ContentOptions(_Group):
    """What of the texts leaves the process: their size, their redaction, their hashes.

    ``redact`` is a function from text to text, run on every text before it is exported.
    """

    group = "content"

    redact: Redactor | None = None
    hash_key: str | None = dataclasses.field(default=None, repr=False)
    max_text_bytes: int | None = None
    max_documents_bytes: int | None = None
    max_span_bytes: int | None = None
    max_documents: int | None = None
    max_record_chars: int | None = None
    conventions: str | Collection[str] | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvaluationOptions(_Group):
    """How the metrics are computed: your own metrics, strictness, agents' tools."""

    group = "evaluation"

    metric_modules: str | Collection[str | Path] | None = None
    strict: bool | None = None
    inline_annotations: bool | None = None
    metric_attributes: str | Collection[str] | None = None
    metric_attributes_limit: int | None = None
    evidence_tools: str | Collection[str] | None = None
    action_tools: str | Collection[str] | None = None
    trust_history: bool | None = None


Options: TypeAlias = (
    ExportOptions
    | JudgeOptions
    | SamplingOptions
    | BoundsOptions
    | ContentOptions
    | EvaluationOptions
)

OPTION_CLASSES: tuple[type[Any], ...] = (
    ExportOptions,
    JudgeOptions,
    SamplingOptions,
    BoundsOptions,
    ContentOptions,
    EvaluationOptions,
)
"""One class per group of ``GROUPS``, in that order."""
OPTIONS_OF: Mapping[str, type[Any]] = {cls.group: cls for cls in OPTION_CLASSES}
"""The options class of each group, by the group's name."""

NOT_SETTINGS = frozenset({"redact"})
"""Option fields that are objects given to the parts, not rows of the table."""


def setting_of(group: str, option: str) -> str:
    """The setting that ``option`` of ``group`` sets (``("bounds", "hold_timeout")`` ->
    ``"hold_timeout"``; ``("export", "timeout")`` -> ``"export_timeout"``)."""
    for name, source in SOURCES.items():
        if source.place == group and (source.option or name) == option:
            return name
    raise KeyError(f"{group} has no option {option!r}")


def option_settings(*groups: Options | None) -> dict[str, object]:
    """The settings the given options objects set, by setting name; fields left ``None``
    and fields that are not settings (``redact``) are left out."""
    given: dict[str, object] = {}
    for options in groups:
        if options is None:
            continue
        if not isinstance(options, OPTION_CLASSES):
            raise TypeError(f"not an options object: {options!r}")
        for field in dataclasses.fields(options):
            value = getattr(options, field.name)
            if value is not None and field.name not in NOT_SETTINGS:
                given[setting_of(options.group, field.name)] = value
    return given


def spelling(name: str) -> str:
    """How code sets the setting ``name``: ``JudgeOptions(concurrency=...)``, or
    ``sample_rate=`` for a keyword of ``configure()`` itself."""
    source = SOURCES[name]
    cls = OPTIONS_OF.get(source.place or "")
    return f"{name}=" if cls is None else f"{cls.__name__}({source.option or name}=...)"


def _document(cls: type[Any]) -> None:
    """Append each field's meaning, from the table, to ``cls``'s docstring."""
    lines = [cls.__doc__ or "", "", "Fields (``None``: not given; the default is the table's):"]
    for field in dataclasses.fields(cls):
        if field.name in NOT_SETTINGS:
            continue
        name = setting_of(cls.group, field.name)
        source = SOURCES[name]
        variable = f" (``{source.env}``)" if source.env else ""
        lines.append(f"    {field.name}: {source.plain_help}{variable}")
    cls.__doc__ = "\n".join(lines)


for _cls in OPTION_CLASSES:
    _document(_cls)
