"""The BEGIN dialogue set the ablation bench reads: converted whole, its records hold together."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parents[2] / "bench" / "data" / "begin_wow_dev.jsonl"
FIELDS = frozenset(
    {"id", "source_id", "task_type", "domain", "source", "model", "split", "quality",
     "question", "context", "answer", "hallucinated", "spans"}
)  # fmt: skip
ROWS: list[dict[str, Any]] = [
    json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()
]


def test_every_labelled_row_of_the_wow_dev_split_is_one_record() -> None:
    # BEGIN's wow/begin_dev_wow.tsv: 180 fully attributable, 250 not.
    assert Counter(row["hallucinated"] for row in ROWS) == {False: 180, True: 250}
    assert len({row["id"] for row in ROWS}) == len(ROWS)


@pytest.mark.parametrize("row", ROWS, ids=lambda row: str(row["id"]))
def test_record_has_every_field_one_snippet_and_a_turn_answered(row: dict[str, Any]) -> None:
    assert set(row) == FIELDS
    assert len(row["context"]) == 1 and row["context"][0].strip()
    assert row["question"].strip() and row["answer"].strip()
    assert row["model"] in {"gpt2", "t5", "doha", "ctrl"}
    assert "CC BY 4.0" in row["source"]


@pytest.mark.parametrize("row", ROWS, ids=lambda row: str(row["id"]))
def test_a_response_not_attributable_is_one_span_over_all_of_it(row: dict[str, Any]) -> None:
    if not row["hallucinated"]:
        assert row["spans"] == []
        return
    (span,) = row["spans"]
    assert (span["start"], span["end"]) == (0, len(row["answer"]))
    assert span["text"] == row["answer"]


def test_responses_about_one_snippet_share_its_source_id() -> None:
    by_source: dict[str, set[str]] = {}
    for row in ROWS:
        by_source.setdefault(row["source_id"], set()).add(row["context"][0])
    assert all(len(snippets) == 1 for snippets in by_source.values())
