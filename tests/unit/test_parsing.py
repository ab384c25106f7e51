"""Tolerant JSON extraction: what a model writes around its JSON does not lose the verdicts."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from ragpulse.judges.llm._prompts import ClaimJudgement
from ragpulse.prompting.parsing import (
    JSONExtractionError,
    TruncatedJSONError,
    extract_json,
    parse_model,
    strip_trailing_commas,
)

VERDICTS = '{"claims": [{"claim": "It is tall.", "verdict": "SUPPORTED"}]}'


def test_plain_json_is_decoded() -> None:
    assert extract_json(VERDICTS) == {"claims": [{"claim": "It is tall.", "verdict": "SUPPORTED"}]}


def test_fenced_json_block_is_decoded() -> None:
    text = f"Here you go:\n```json\n{VERDICTS}\n```\nAnything else?"
    assert extract_json(text)["claims"][0]["verdict"] == "SUPPORTED"


def test_fence_without_language_is_decoded() -> None:
    assert extract_json(f"```\n{VERDICTS}\n```")["claims"][0]["claim"] == "It is tall."


def test_prose_before_and_after_the_json_is_ignored() -> None:
    text = f"After careful reading, {VERDICTS} is my verdict. Thanks!"
    assert extract_json(text)["claims"][0]["claim"] == "It is tall."


def test_braces_in_prose_before_the_json_are_skipped() -> None:
    text = f"The set {{a, b}} is irrelevant; {VERDICTS}"
    assert "claims" in extract_json(text)


def test_trailing_commas_are_removed() -> None:
    assert extract_json('{"a": [1, 2,], "b": {"c": 3,},}') == {"a": [1, 2], "b": {"c": 3}}


def test_commas_and_brackets_inside_strings_are_kept() -> None:
    assert strip_trailing_commas('{"quote": "a, ]", "x": 1,}') == '{"quote": "a, ]", "x": 1}'


def test_escaped_quotes_inside_strings_do_not_end_them() -> None:
    text = 'Result: {"quote": "he said \\"yes,}\\" loudly", "n": 2,} done'
    assert extract_json(text) == {"quote": 'he said "yes,}" loudly', "n": 2}


def test_json_that_never_closes_is_truncated() -> None:
    with pytest.raises(TruncatedJSONError):
        extract_json('{"claims": [{"claim": "It is tall.", "verdict": "SUPP')


def test_text_without_json_is_an_extraction_error() -> None:
    with pytest.raises(JSONExtractionError) as raised:
        extract_json("Every claim looks fine to me.")
    assert not isinstance(raised.value, TruncatedJSONError)


def test_empty_reply_is_an_extraction_error() -> None:
    with pytest.raises(JSONExtractionError):
        extract_json("   ")


def test_code_in_the_reply_is_never_evaluated() -> None:
    # A Python literal (single quotes, True) is not JSON, and nothing runs it.
    with pytest.raises(JSONExtractionError):
        extract_json("{'claims': __import__('os').getcwd(), 'ok': True}")


def test_parse_model_accepts_wrapped_json() -> None:
    parsed = parse_model(f"```json\n{VERDICTS}\n```", ClaimJudgement)
    assert parsed.claims[0].claim == "It is tall."


def test_parse_model_reports_valid_json_of_the_wrong_shape_as_validation_error() -> None:
    with pytest.raises(ValidationError):
        parse_model('{"verdicts": []}', ClaimJudgement)


def test_parse_model_reports_wrapped_json_of_the_wrong_shape_as_validation_error() -> None:
    with pytest.raises(ValidationError):
        parse_model('Here: {"verdicts": []}', ClaimJudgement)


def test_parse_model_reports_a_cut_reply_as_truncated() -> None:
    with pytest.raises(TruncatedJSONError):
        parse_model(VERDICTS[:30], ClaimJudgement)


def test_max_items_cuts_every_list_before_validation() -> None:
    from pydantic import BaseModel

    class Listing(BaseModel):
        items: list[int]
        name: str

    flood = json.dumps({"items": list(range(100_000)), "name": "x"})
    parsed = parse_model(flood, Listing, max_items=5)
    assert parsed.items == [0, 1, 2, 3, 4]
    assert parsed.name == "x"
