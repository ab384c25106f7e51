"""Convert BEGIN's Wizard-of-Wikipedia dev split to the JSONL the judge benches read.

BEGIN (https://github.com/google/BEGIN-dataset, CC BY 4.0) holds dialogue responses that
people labelled as fully attributable to a knowledge snippet or not. Each row becomes one
record in the format of ``other_domains.jsonl``: the snippet is the one context, the
previous turn is the question, the response is the answer. BEGIN marks whole responses,
not spans, so a response that is not fully attributable carries one span over all of it.

Usage: python bench/data/convert_begin.py PATH/TO/wow/begin_dev_wow.tsv > begin_wow_dev.jsonl
"""

from __future__ import annotations

import csv
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SOURCE = "BEGIN wow/begin_dev_wow.tsv (google/BEGIN-dataset@6e65f0d, CC BY 4.0)"
LABELS = {"Fully attributable": False, "Not fully attributable": True}
SPAN_LABEL = "Not Fully Attributable"


def records(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8", newline="") as handle:
        rows = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        for number, row in enumerate(rows):
            label = row["begin_label"].strip()
            if label not in LABELS:
                continue  # "Generic": a response that states nothing to attribute
            answer = row["response"].strip()
            knowledge = row["knowledge"].strip()
            hallucinated = LABELS[label]
            spans = (
                [{"start": 0, "end": len(answer), "text": answer, "label_type": SPAN_LABEL}]
                if hallucinated
                else []
            )
            yield {
                "id": f"begin-wow-dev-{number}",
                "source_id": hashlib.sha1(knowledge.encode()).hexdigest()[:12],
                "task_type": "Dialogue",
                "domain": "dialogue_wikipedia",
                "source": SOURCE,
                "model": row["model_name"],
                "split": "dev",
                "quality": "good",
                "question": row["message"].strip(),
                "context": [knowledge],
                "answer": answer,
                "hallucinated": hallucinated,
                "spans": spans,
            }


def main() -> None:
    for record in records(Path(sys.argv[1])):
        sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
