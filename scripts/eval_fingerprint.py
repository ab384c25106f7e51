"""Every decision of ``ragpulse eval`` on the labelled sets, as one sha256: proof a change kept behaviour.

Runs ``ragpulse eval`` with every built-in metric on each set as it is and on a variant whose
records carry a reference (the first context) and a rubric, drops the wall-clock fields, and
prints one digest per run and one over all of them. Run it before and after a change that must
not change behaviour; the digests must match.

    python scripts/eval_fingerprint.py [--data ../shared/data/ragtruth_dev.jsonl] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETS = [ROOT / "bench/data/begin_wow_dev.jsonl", ROOT / "bench/data/other_domains.jsonl"]
ALL_METRICS = (
    "faithfulness,groundedness,correctness,relevancy,completeness,citation,"
    "context_relevance,context_precision,context_recall,context_utilisation"
)
VOLATILE = {"duration_ms", "duration_s", "elapsed_ms"}


def _strip(value: object) -> object:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _variant(src: Path, dst: Path) -> None:
    with src.open() as inp, dst.open("w") as out:
        for line in inp:
            record = json.loads(line)
            contexts = record.get("context") or record.get("contexts") or []
            record["reference"] = contexts[0] if contexts else "no reference"
            record["rubric"] = ["the answer names a figure", "the answer is polite"]
            out.write(json.dumps(record) + "\n")


def _run(path: Path, keep: Path | None) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "ragpulse", "eval", "--metrics", ALL_METRICS, str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [json.dumps(_strip(json.loads(x)), sort_keys=True) for x in result.stdout.splitlines()]
    text = "\n".join(lines) + f"\nexit={result.returncode}\n"
    if keep is not None:
        (keep / (path.stem + ".out")).write_text(text)
    return hashlib.sha256(text.encode()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", action="append", type=Path, default=[])
    parser.add_argument("--keep", type=Path, help="also write each run's stripped output here")
    args = parser.parse_args()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    total = hashlib.sha256()
    with tempfile.TemporaryDirectory() as tmp:
        for src in [*SETS, *args.data]:
            variant = Path(tmp) / (src.stem + "_with_reference.jsonl")
            _variant(src, variant)
            for path in (src, variant):
                digest = _run(path, args.keep)
                total.update(digest.encode())
                print(f"{path.name:40} {digest}")
    print(f"RESULT all={total.hexdigest()}")


if __name__ == "__main__":
    main()
