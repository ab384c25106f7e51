"""A keyword of the wrong type is a ``TypeError`` naming it, at ``configure()`` or when an
options object is made; a value of the right type that cannot be used stays a warning."""

from __future__ import annotations

import dataclasses
import inspect
import logging

import pytest

import ragpulse
from ragpulse.settings import Settings
from ragpulse.settings.options import OPTION_CLASSES, BoundsOptions, ContentOptions

CONFIGURE_KEYWORDS = sorted(inspect.signature(ragpulse.configure).parameters)
OPTION_FIELDS = [(cls, f.name) for cls in OPTION_CLASSES for f in dataclasses.fields(cls)]


def test_a_judge_that_is_not_a_judge_is_a_type_error_naming_the_keyword() -> None:
    expected = r"^configure\(judge=\.\.\.\): expected Judge, str or None, got int$"
    with pytest.raises(TypeError, match=expected):
        ragpulse.configure(judge=42)  # type: ignore[arg-type]


def test_an_options_object_given_to_another_group_is_a_type_error() -> None:
    with pytest.raises(
        TypeError, match=r"configure\(bounds=\.\.\.\): expected BoundsOptions or None, got Content"
    ):
        ragpulse.configure(bounds=ContentOptions())  # type: ignore[arg-type]


def test_a_hash_key_that_is_a_number_is_a_type_error_not_a_guessable_key() -> None:
    with pytest.raises(TypeError, match=r"ContentOptions\(hash_key=\.\.\.\): expected str"):
        ContentOptions(hash_key=12345)  # type: ignore[arg-type]


@pytest.mark.parametrize("keyword", CONFIGURE_KEYWORDS)
def test_every_configure_keyword_of_the_wrong_type_is_a_type_error_naming_it(
    keyword: str,
) -> None:
    with pytest.raises(TypeError, match=rf"^configure\({keyword}=\.\.\.\): expected "):
        ragpulse.configure(**{keyword: object()})


@pytest.mark.parametrize(("cls", "name"), OPTION_FIELDS, ids=lambda x: getattr(x, "__name__", x))
def test_every_option_field_of_the_wrong_type_is_a_type_error_naming_it(
    cls: type, name: str
) -> None:
    with pytest.raises(TypeError, match=rf"^{cls.__name__}\({name}=\.\.\.\): expected "):
        cls(**{name: object()})


@pytest.mark.parametrize(
    ("cls", "name", "value"),
    [
        (BoundsOptions, "max_held_spans", True),  # a bool is not a count
        (BoundsOptions, "hold_timeout", "30"),  # text is the environment's, not code's
        (BoundsOptions, "max_queue_size", 2.5),
    ],
)
def test_numbers_of_the_wrong_kind_are_type_errors(cls: type, name: str, value: object) -> None:
    with pytest.raises(TypeError, match=rf"{cls.__name__}\({name}=\.\.\.\)"):
        cls(**{name: value})


def test_an_int_is_taken_where_a_float_is_asked_for() -> None:
    assert BoundsOptions(hold_timeout=30).hold_timeout == 30


def test_a_short_hash_key_is_one_warning_and_no_hash_not_a_type_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="ragpulse.settings"):
        settings = Settings.load({"hash_key": "12345"}, environ={})
    assert settings.hash_key is None
    assert settings.rejected == {"hash_key": "'<hidden>'"}
    assert "12345" not in caplog.text  # a rejected secret is never shown
    assert "shorter than 16 bytes" in caplog.text
    long_enough = Settings.load({"hash_key": "a per-deployment secret"}, environ={})
    assert long_enough.hash_key == "a per-deployment secret"


def test_the_same_short_key_from_the_environment_is_refused_the_same_way() -> None:
    settings = Settings.load(environ={"RAGPULSE_HASH_KEY": "k3y"})
    assert settings.hash_key is None
    assert "RAGPULSE_HASH_KEY" in settings.rejected


def test_a_judge_is_recognised_by_its_evaluate_method_alone() -> None:
    # The code around a judge reads its other members with defaults (no annotator_kind: CODE).
    from ragpulse.settings._types import check_arguments

    class Minimal:
        name = "minimal"

        async def evaluate(self, record: object, metrics: object) -> object:
            return None

    check_arguments(ragpulse.configure, "configure", {"judge": Minimal()})
    with pytest.raises(TypeError, match="judge="):
        check_arguments(ragpulse.configure, "configure", {"judge": Minimal})  # the class
