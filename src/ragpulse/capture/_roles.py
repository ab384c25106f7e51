"""Which tools fetch evidence and which act, as capture reads it: one rule, set by ``configure``.

The rule is the settings' tool policy (``evidence_tools`` and ``action_tools`` globs,
``ragpulse.adapters.ToolPolicy``): the same one the trace readers use, so a tool is
evidence or not whichever way its call was traced. Until ``configure`` sets it, every
tool is evidence. ``@ragpulse.tool(evidence=...)`` wins over it.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["EVERY_TOOL", "EvidenceRule", "get_tool_roles", "set_tool_roles"]


class EvidenceRule(Protocol):
    """Anything that says whether a tool's results are evidence, by the tool's name."""

    def is_evidence(self, name: str | None, /) -> bool: ...


class _EveryTool:
    """The default: every tool's result is evidence."""

    def is_evidence(self, name: str | None, /) -> bool:
        return True


EVERY_TOOL: EvidenceRule = _EveryTool()
_roles: EvidenceRule = EVERY_TOOL


def get_tool_roles() -> EvidenceRule:
    """The process-wide rule (set by ``configure`` from ``evidence_tools``/``action_tools``)."""
    return _roles


def set_tool_roles(roles: EvidenceRule) -> None:
    """Replace the process-wide rule (any object with ``is_evidence(name)``)."""
    global _roles
    _roles = roles
