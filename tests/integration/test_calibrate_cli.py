"""``ragpulse calibrate`` end to end: labelled JSONL in, a report and a calibration file out,
which ``ragpulse eval``, ``configure()`` and the Prometheus rule renderer then use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.cases.ragtruth import ragtruth_dev

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CONTEXT = "The Larkspur L2 router costs $129 and was released in March 2024."
ROWS = [
    ("The Larkspur L2 router costs $129.", False),
    ("The Larkspur L2 router was released in March 2024.", False),
    ("The Larkspur L2 router costs $129 and was released in March 2024.", False),
    ("The Larkspur L2 router costs $199.", True),
    ("The Larkspur L2 router costs $129. It glows in the dark.", True),
    ("It was released in May 2021 by Acme.", True),
]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    return subprocess.run(
        [sys.executable, "-m", "ragpulse.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def labelled(tmp_path: Path) -> Path:
    path = tmp_path / "labelled.jsonl"
    lines = [
        {"id": str(i), "question": "Tell me about the L2 router.", "contexts": [CONTEXT],
         "answer": answer, "hallucinated": label}
        for i, (answer, label) in enumerate(ROWS)
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def test_calibrate_prints_the_figures_and_writes_a_calibration_file(
    labelled: Path, tmp_path: Path
) -> None:
    done = _run(
        "calibrate", str(labelled), "--output", "cal.json", "--bootstrap", "50", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "AUROC of 1 - faithfulness: 1.000" in done.stdout
    assert "reliability" in done.stdout
    calibration = json.loads((tmp_path / "cal.json").read_text())
    assert calibration["metric"] == "faithfulness"
    assert calibration["f1"] == 1.0
    assert 0.0 < calibration["threshold"] <= 1.0


def _summary_thresholds(stderr: str) -> dict[str, str]:
    """Metric -> the threshold its row of the ``ragpulse eval`` summary table shows."""
    rows = [line.split("│")[1:-1] for line in stderr.splitlines() if line.startswith("│")]
    return {cells[0].strip(): cells[4].strip() for cells in rows if len(cells) == 6}


def test_eval_takes_the_calibrated_threshold_for_the_calibrated_metric_only(
    labelled: Path, tmp_path: Path
) -> None:
    _run("calibrate", str(labelled), "--output", "cal.json", "--bootstrap", "0", cwd=tmp_path)
    threshold = json.loads((tmp_path / "cal.json").read_text())["threshold"]
    done = _run(
        "eval", str(labelled), "--output", "out.jsonl", "--calibration", "cal.json",
        "--threshold", "groundedness=0.6", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = _summary_thresholds(done.stderr)
    assert shown["faithfulness"] == f"{threshold:g}"
    assert shown["groundedness"] == "0.6"
    assert shown["correctness"] == "0.5"  # as its module declares


def test_a_threshold_given_on_the_command_line_wins_over_the_calibration(
    labelled: Path, tmp_path: Path
) -> None:
    _run("calibrate", str(labelled), "--output", "cal.json", "--bootstrap", "0", cwd=tmp_path)
    assert json.loads((tmp_path / "cal.json").read_text())["threshold"] != 0.5
    done = _run(
        "eval", str(labelled), "--output", "out.jsonl", "--calibration", "cal.json",
        "--threshold", "faithfulness=0.5", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _summary_thresholds(done.stderr)["faithfulness"] == "0.5"


def test_eval_refuses_a_file_that_is_not_a_calibration(labelled: Path, tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{}")
    done = _run("eval", str(labelled), "--calibration", "bad.json", cwd=tmp_path)
    assert done.returncode == 2
    assert "--calibration" in done.stderr


def test_calibrate_refuses_labels_of_one_class(tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(
        json.dumps({"contexts": [CONTEXT], "answer": "x", "hallucinated": False}) + "\n"
    )
    done = _run("calibrate", str(path), cwd=tmp_path)
    assert done.returncode == 2
    assert "both hallucinated and faithful" in done.stderr


CONFIGURED = """
import sys
import ragpulse

handle = ragpulse.configure(service_name="calibrated", calibration=sys.argv[1])

@ragpulse.rag(name="calibrated")
def ask(question):
    ragpulse.record_contexts(["The Larkspur L2 router costs $129 and was released in March 2024."])
    return "The Larkspur L2 router costs $129. It was released in March 2024 by Acme."

ask("Tell me about the L2 router.")
handle.force_flush()
handle.shutdown()
"""


def test_configure_labels_scores_by_the_calibrated_threshold(tmp_path: Path) -> None:
    calibration = {
        "metric": "faithfulness", "threshold": 0.4, "objective": "best_f1", "judge": "lexical",
        "records": 2, "hallucinated": 1, "auroc": 1.0, "auroc_interval": [1.0, 1.0],
        "precision": 1.0, "recall": 1.0, "f1": 1.0, "span_f1": None, "span_f1_interval": None,
        "reliability": [], "format": 1, "alert_bucket": 0.3,
    }  # fmt: skip
    (tmp_path / "cal.json").write_text(json.dumps(calibration))
    (tmp_path / "app.py").write_text(CONFIGURED)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    done = subprocess.run(
        [sys.executable, "app.py", "cal.json"], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    attributes = {
        a["key"]: next(iter(a["value"].values()))
        for line in (tmp_path / "ragpulse-traces.jsonl").read_text().splitlines()
        for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
        if span["name"] == "calibrated"
        for a in span["attributes"]
    }
    # Faithfulness 0.5 fails the default 0.7 threshold but passes the calibrated 0.4.
    assert attributes["ragpulse.eval.faithfulness.score"] == 0.5
    assert attributes["ragpulse.eval.faithfulness.label"] == "pass"
    # The alerts count the same label (ragpulse.evaluation.labels): they follow the calibration.
    counted = {
        (point_attributes["gen_ai.evaluation.score.label"], int(point["asInt"]))
        for line in (tmp_path / "ragpulse-metrics.jsonl").read_text().splitlines()
        for rm in json.loads(line)["resourceMetrics"]
        for sm in rm["scopeMetrics"]
        for metric in sm["metrics"]
        if metric["name"] == "ragpulse.evaluation.labels"
        for point in metric["sum"]["dataPoints"]
        if (point_attributes := {a["key"]: next(iter(a["value"].values()))
                                 for a in point["attributes"]})["gen_ai.evaluation.name"]
        == "faithfulness"
    }  # fmt: skip
    assert counted == {("pass", 1), ("fail", 0)}


def test_calibrate_runs_end_to_end_on_the_shipped_ragtruth_set(tmp_path: Path) -> None:
    done = _run(
        "calibrate", str(ragtruth_dev()), "--output", "cal.json", "--bootstrap", "50", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    calibration = json.loads((tmp_path / "cal.json").read_text())
    assert calibration["records"] == 576
    assert calibration["auroc"] > 0.7
    assert calibration["span_f1"] is not None


def test_calibrate_prints_the_agreement_of_the_judge_with_the_labels_at_its_threshold(
    labelled: Path, tmp_path: Path
) -> None:
    done = _run(
        "calibrate", str(labelled), "--output", "cal.json", "--bootstrap", "0", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    # F1 1.0 at the chosen threshold: the judge fails exactly the three hallucinated answers,
    # so all six pairs agree and kappa is (1 - 0.5) / (1 - 0.5) = 1.
    row = next(
        line.split() for line in done.stdout.splitlines() if line.startswith("faithfulness ")
    )
    assert row[:4] == ["faithfulness", "6", "1.000", "1.000"]
    assert row[-2:] == ["3", "3"]  # judge pass, people pass


GLOWS = """
import ragpulse

@ragpulse.metric("no_glow")
def no_glow(record):
    return 0.0 if "glow" in (record.answer or "") else 1.0
"""


def test_calibrate_fits_a_users_metric_from_a_metric_module(labelled: Path, tmp_path: Path) -> None:
    (tmp_path / "glow_metrics.py").write_text(GLOWS)
    done = _run(
        "calibrate",
        str(labelled),
        "--metric-module",
        "glow_metrics.py",
        "--metric",
        "no_glow",
        "--output",
        "cal.json",
        "--bootstrap",
        "50",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "metric no_glow" in done.stdout
    assert json.loads((tmp_path / "cal.json").read_text())["metric"] == "no_glow"


def test_calibrate_refuses_a_metric_no_module_defines(labelled: Path, tmp_path: Path) -> None:
    done = _run("calibrate", str(labelled), "--metric", "no_such_metric", cwd=tmp_path)
    assert done.returncode == 2
    assert "--metric-module" in done.stderr


def test_serve_refuses_a_metric_module_it_cannot_import(tmp_path: Path) -> None:
    done = _run("serve", "--metric-module", "absent_metrics.py", cwd=tmp_path)
    assert done.returncode == 2
    assert "absent_metrics.py" in done.stderr
