"""What each judge's pass/fail labels do on answers real LLMs wrote, as measured.

Written by ``python scripts/derive_label_policy.py --data ragtruth_dev.jsonl --write``
(RAGTruth's development split: 576 human-labelled answers of GPT-4, GPT-3.5, Llama-2 and
Mistral); rerun it after a change to a judge and commit the result. ``_labels`` reads it.

Per judge kind and metric: ``threshold`` (``None``: no threshold keeps the promise, the
judge writes no label), ``false_fail`` and ``detection`` (the shares of correct and of
hallucinated answers labelled ``fail`` at that threshold, tuned on all of the set; for a
declined metric, at the metric's own threshold), ``cv_false_fail`` and ``cv_detection``
(the same, the threshold chosen on four folds by source and scored on the fifth).
"""

from __future__ import annotations

from typing import Any

EVIDENCE = "python scripts/derive_label_policy.py --data ragtruth_dev.jsonl"

MEASURED: dict[str, dict[str, dict[str, Any]]] = {
    "lexical": {
        "faithfulness": {
            "threshold": 0.74,
            "false_fail": 0.041,
            "detection": 0.319,
            "cv_false_fail": 0.041,
            "cv_detection": 0.319,
        },
        "groundedness": {
            "threshold": None,
            "false_fail": 0.837,
            "detection": 0.967,
            "cv_false_fail": None,
            "cv_detection": None,
        },
    }
}
