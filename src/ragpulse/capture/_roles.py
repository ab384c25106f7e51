"""Which tools fetch evidence and which act: the ``evidence_tools`` and ``action_tools`` globs.

A tool's result is evidence for the answer (a search, a lookup, a web fetch) unless
the tool acts (a calculator, a booking): by default every tool is evidence. A name
that matches an ``action_tools`` glob acts, whatever ``evidence_tools`` says; else a
name that matches an ``evidence_tools`` glob is evidence; else it acts. Globs are
``fnmatch`` patterns matched case-sensitively (``search_*``, ``*.lookup``).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["EvidenceRule", "ToolRoles", "get_tool_roles", "set_tool_roles"]


class EvidenceRule(Protocol):
    """Anything that says whether a tool's results are evidence, by the tool's name."""

    def is_evidence(self, tool: str) -> bool: ...


DEFAULT_EVIDENCE_TOOLS: tuple[str, ...] = ("*",)
DEFAULT_ACTION_TOOLS: tuple[str, ...] = ()


def _pattern(globs: Iterable[str]) -> re.Pattern[str] | None:
    parts = [fnmatch.translate(glob) for glob in globs if glob]
    return re.compile("|".join(parts)) if parts else None


@dataclass(frozen=True)
class ToolRoles:
    """The globs that say which tools' results are evidence."""

    evidence: tuple[str, ...] = DEFAULT_EVIDENCE_TOOLS
    action: tuple[str, ...] = DEFAULT_ACTION_TOOLS

    def __post_init__(self) -> None:
        for name in ("evidence", "action"):
            value = getattr(self, name)
            globs = (value,) if isinstance(value, str) else tuple(value)
            if not all(isinstance(glob, str) for glob in globs):
                raise ValueError(f"{name} tools must be glob strings, got {value!r}")
            object.__setattr__(self, name, globs)

    @functools.cached_property
    def _evidence(self) -> re.Pattern[str] | None:
        return _pattern(self.evidence)

    @functools.cached_property
    def _action(self) -> re.Pattern[str] | None:
        return _pattern(self.action)

    def is_evidence(self, tool: str) -> bool:
        """Whether ``tool``'s result is evidence (not an acting tool's)."""
        action = self._action
        if action is not None and action.fullmatch(tool):
            return False
        evidence = self._evidence
        return evidence is not None and evidence.fullmatch(tool) is not None


_roles: EvidenceRule = ToolRoles()


def get_tool_roles() -> EvidenceRule:
    """The process-wide tool roles (set by ``configure``)."""
    return _roles


def set_tool_roles(roles: EvidenceRule) -> None:
    """Replace the process-wide tool roles (any rule with ``is_evidence(name)``)."""
    global _roles
    _roles = roles
