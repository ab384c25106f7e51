"""The hand-written other-domain set that bench/ragtruth.py reads: its records hold together."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parents[2] / "bench" / "data" / "other_domains.jsonl"
FIELDS = frozenset(
    {
        "id",
        "source_id",
        "task_type",
        "domain",
        "source",
        "model",
        "split",
        "quality",
        "question",
        "context",
        "answer",
        "hallucinated",
        "spans",
    }
)
TASKS = frozenset({"QA", "Summary", "Data2txt"})
LABELS = frozenset(
    {"Evident Conflict", "Subtle Conflict", "Evident Baseless Info", "Subtle Baseless Info"}
)


def load() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]


ROWS = load()


def test_every_line_is_one_record_with_all_fields() -> None:
    assert len(ROWS) >= 80
    for row in ROWS:
        assert set(row) == FIELDS, row.get("id")


def test_ids_are_unique() -> None:
    ids = [row["id"] for row in ROWS]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("row", ROWS, ids=lambda row: str(row["id"]))
def test_record_follows_the_ragtruth_schema(row: dict[str, Any]) -> None:
    assert row["task_type"] in TASKS
    assert (row["question"] is None) == (row["task_type"] != "QA")
    assert isinstance(row["question"], str | None)
    assert row["context"]
    assert all(isinstance(c, str) and c.strip() for c in row["context"])
    assert isinstance(row["answer"], str) and row["answer"].strip()
    assert isinstance(row["domain"], str) and row["domain"]
    assert (row["source"], row["model"], row["split"], row["quality"]) == (
        "hand-written",
        None,
        "test",
        "good",
    )


@pytest.mark.parametrize("row", ROWS, ids=lambda row: str(row["id"]))
def test_spans_mark_text_of_the_answer(row: dict[str, Any]) -> None:
    assert row["hallucinated"] is bool(row["spans"])
    for span in row["spans"]:
        assert 0 <= span["start"] < span["end"] <= len(row["answer"])
        assert row["answer"][span["start"] : span["end"]] == span["text"]
        assert span["label_type"] in LABELS


def test_answers_sharing_a_source_share_its_context_and_task() -> None:
    by_source: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in ROWS:
        by_source[row["source_id"]].append(row)
    for rows in by_source.values():
        assert len({json.dumps(r["context"]) for r in rows}) == 1
        assert len({(r["task_type"], r["domain"]) for r in rows}) == 1


def test_every_domain_has_clean_and_hallucinated_answers() -> None:
    seen: dict[str, set[bool]] = defaultdict(set)
    for row in ROWS:
        seen[row["domain"]].add(row["hallucinated"])
    assert len(seen) >= 6
    assert all(labels == {True, False} for labels in seen.values()), seen


def test_about_half_are_hallucinated() -> None:
    share = sum(row["hallucinated"] for row in ROWS) / len(ROWS)
    assert 0.4 <= share <= 0.6
