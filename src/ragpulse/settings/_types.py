"""Keyword arguments checked against their annotations: a wrong type is a ``TypeError``.

``configure()`` runs at start-up, so a value of the wrong type there (``judge=42``, an
options object given to another group's keyword, ``ContentOptions(hash_key=12345)``) is
a programming error to report at once, naming the keyword, not a value to log and
replace. The annotations of ``configure()`` and of the option classes are the table: a
value must be an instance of one of the annotation's outer types (a ``Collection[str]``
must be a collection; its items are the setting's parser's business, as every value
from the environment is). ``bool`` is not taken where a number is asked for, and an
``int`` is taken where a ``float`` is.
"""

from __future__ import annotations

import collections.abc
import functools
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["check_arguments"]


@functools.cache
def _hints(owner: Callable[..., Any]) -> Mapping[str, Any]:
    return typing.get_type_hints(owner)


def _accepts(annotation: Any, value: object) -> bool:
    if annotation is Any or annotation is object:
        return True
    if annotation is None or annotation is type(None):
        return value is None
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return any(_accepts(member, value) for member in typing.get_args(annotation))
    if origin is not None:  # Collection[str], Mapping[str, float], Callable[..., Any]
        return isinstance(value, origin)
    if annotation in (int, float) and isinstance(value, bool):
        return False
    if annotation is float:
        return isinstance(value, int | float)
    if getattr(annotation, "_is_protocol", False):
        # A protocol (Judge) by its methods: the code around it reads its data members with
        # defaults (a judge without annotator_kind is a CODE judge).
        methods = [n for n, v in vars(annotation).items() if callable(v) and n[0] != "_"]
        has_them = all(callable(getattr(value, name, None)) for name in methods)
        return has_them and not isinstance(value, type)  # an instance, not its class
    if isinstance(annotation, type):
        return isinstance(value, annotation)
    return True  # a form this check does not read (a TypeVar): the parser decides


def _name(annotation: Any) -> str:
    if annotation is None or annotation is type(None):
        return "None"
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        names = [_name(member) for member in typing.get_args(annotation)]
        return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
    if origin is not None:
        if origin is collections.abc.Callable:
            return "a callable"
        return f"a {getattr(origin, '__name__', str(origin))}"
    return str(getattr(annotation, "__name__", annotation))


def check_arguments(owner: Callable[..., Any], where: str, given: Mapping[str, object]) -> None:
    """``TypeError("where(name=...): expected ..., got int")`` for the first value in
    ``given`` that its annotation on ``owner`` (a function or a dataclass) does not take."""
    hints = _hints(owner)
    for name, value in given.items():
        annotation = hints.get(name, Any)
        if not _accepts(annotation, value):
            raise TypeError(
                f"{where}({name}=...): expected {_name(annotation)}, got {type(value).__name__}"
            )
