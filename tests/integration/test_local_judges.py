"""The local model judges and the cascade wherever a judge is chosen: the commands,
``configure()`` and ``RAGPULSE_JUDGE``, each run as its own process on tiny ONNX models
built here (``tests/models/tiny_onnx.py``)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.models.tiny_onnx import write_binary_model, write_nli_model, write_token_model

from ragpulse.judges.local.nli import NLIJudge
from ragpulse.judges.local.token_classifier import TokenJudge
from ragpulse.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CONTEXT = "The Larkspur router costs ninety euros. It was released in March."
ROWS = [
    ("The Larkspur router costs ninety euros.", False),
    ("It was released in March.", False),
    ("The Larkspur router costs ninety euros. It was released in March.", False),
    ("The Larkspur router costs twenty euros.", True),
    ("It glows in the dark.", True),
    ("The Larkspur router was released in May.", True),
]
QUESTION = "Tell me about the router."
TEXTS = [CONTEXT, QUESTION, *(answer for answer, _ in ROWS)]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    return {
        "nli": write_nli_model(root / "nli", TEXTS, max_length=48),
        "tokens": write_token_model(root / "tokens", TEXTS, max_length=48),
        "binary": write_binary_model(root / "binary", TEXTS, max_length=48),
    }


@pytest.fixture
def labelled(tmp_path: Path) -> Path:
    path = tmp_path / "labelled.jsonl"
    lines = [
        {"id": str(i), "question": QUESTION, "contexts": [CONTEXT], "answer": answer,
         "hallucinated": label}
        for i, (answer, label) in enumerate(ROWS)
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def ragpulse(
    *args: str | Path, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "ragpulse.cli", *map(str, args)],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def results(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("kind", ["nli", "tokens"])
def test_eval_judges_records_with_a_local_model(
    kind: str, models: dict[str, Path], labelled: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    done = ragpulse(
        "eval", labelled, "--judge", kind, "--model", models[kind], "--output", out, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    rows = results(out)
    assert {r["judge"] for r in rows} == {kind}
    faithfulness = [r["scores"]["faithfulness"] for r in rows]  # type: ignore[index]
    assert faithfulness[:3] == [1.0, 1.0, 1.0]
    assert all(score < 1.0 for score in faithfulness[3:])


def test_eval_asked_for_cuda_without_onnxruntime_gpu_says_so_and_judges_on_the_cpu(
    models: dict[str, Path], labelled: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    done = ragpulse(
        "eval", labelled, "--judge", "nli", "--model", models["nli"], "--device", "cuda",
        "--output", out, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [note] = [line for line in done.stderr.splitlines() if "CUDAExecutionProvider" in line]
    assert note.startswith("ragpulse eval: --device cuda:") and "onnxruntime-gpu" in note
    assert "CPUExecutionProvider" in note
    faithfulness = [r["scores"]["faithfulness"] for r in results(out)]  # type: ignore[index]
    assert faithfulness[:3] == [1.0, 1.0, 1.0]


def test_demo_asked_for_cuda_without_onnxruntime_gpu_says_so_and_judges_on_the_cpu(
    tmp_path: Path,
) -> None:
    done = ragpulse(
        "demo", "--judge", "nli", "--model", "tiny", "--device", "cuda", "--requests", "2",
        "--no-table", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = " ".join((done.stdout + done.stderr).split())
    assert "ragpulse demo: --device cuda:" in said
    assert "CUDAExecutionProvider" in said and "onnxruntime-gpu" in said


def test_eval_runs_a_binary_model_with_a_label_map(
    models: dict[str, Path], labelled: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    done = ragpulse(
        "eval", labelled, "--judge", "nli", "--model", models["binary"],
        "--label-map", "1=supported", "--output", out, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [r["scores"]["faithfulness"] for r in results(out)][:3] == [1.0, 1.0, 1.0]  # type: ignore[index]


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("missing-dir", "missing-dir: does not exist"),
        ("binary", "cannot map the labels ['LABEL_0', 'LABEL_1']"),
    ],
)
def test_eval_exits_2_with_one_line_naming_what_is_wrong(
    models: dict[str, Path], labelled: Path, tmp_path: Path, model: str, says: str
) -> None:
    directory = models.get(model, tmp_path / model)
    done = ragpulse("eval", labelled, "--judge", "nli", "--model", directory, cwd=tmp_path)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert says in line and "--judge nli" in line


def test_eval_without_a_model_directory_says_how_to_export_one(
    labelled: Path, tmp_path: Path
) -> None:
    done = ragpulse("eval", labelled, "--judge", "tokens", cwd=tmp_path)
    assert done.returncode == 2
    assert "optimum-cli export onnx" in done.stderr and "token-classification" in done.stderr


def test_calibrate_measures_a_local_judge_on_the_users_labels(
    models: dict[str, Path], labelled: Path, tmp_path: Path
) -> None:
    done = ragpulse(
        "calibrate", labelled, "--judge", "nli", "--model", models["nli"], "--bootstrap", "20",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "judge nli" in done.stdout
    assert "AUROC of 1 - faithfulness: 1.000" in done.stdout


def test_eval_cascade_escalates_the_unsure_to_a_local_model(
    models: dict[str, Path], labelled: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    done = ragpulse(
        "eval", labelled, "--judge", "cascade", "--escalate", "nli", "--model", models["nli"],
        "--output", out, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    judges = {r["judge"] for r in results(out)}
    # The flagged answers at least reach the NLI model.
    assert "nli" in judges
    assert judges <= {"nli", "lexical"}


def test_demo_exits_2_when_its_local_model_cannot_be_used(tmp_path: Path) -> None:
    done = ragpulse("demo", "--judge", "nli", "--model", tmp_path / "none", cwd=tmp_path)
    assert done.returncode == 2
    assert "does not exist" in done.stdout + done.stderr


@pytest.mark.parametrize("kind", ["nli", "tokens"])
def test_demo_with_the_tiny_model_shows_the_whole_path_of_a_model_judge(
    kind: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    done = ragpulse(
        "demo", "--judge", kind, "--model", "tiny", "--requests", "6", "--no-table",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the judge runs the test suite's tiny ONNX model" in " ".join(done.stdout.split())
    spans = [
        span["attributes"]
        for line in (tmp_path / "ragpulse-traces.jsonl").read_text().splitlines()
        for scope in json.loads(line)["resourceSpans"][0]["scopeSpans"]
        for span in scope["spans"]
    ]
    unit = [
        {a["key"]: next(iter(a["value"].values())) for a in attributes}
        for attributes in spans
        if any(a["key"] == "ragpulse.eval.judge" for a in attributes)
    ]
    assert len(unit) == 6
    assert {u["ragpulse.eval.judge"] for u in unit} == {kind}
    assert {u["ragpulse.eval.judge.model"] for u in unit} == {"ragpulse/tiny-word-overlap"}
    assert all(u["ragpulse.eval.status"] == "ok" for u in unit)
    claims = [c for u in unit for c in json.loads(u["ragpulse.eval.claims"])]
    assert any(c["verdict"] == "SUPPORTED" and c["start"] is not None for c in claims)
    assert (tmp_path / "ragpulse-report.html").stat().st_size > 0


def test_serve_builds_the_local_judge_its_options_name(models: dict[str, Path]) -> None:
    from ragpulse.cli.serve import ServeUsageError, add_parser, build_judge

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["serve", "--judge", "tokens", "--model", str(models["tokens"])])
    assert isinstance(build_judge(args, Settings()), TokenJudge)
    args = parser.parse_args(["serve", "--judge", "nli", "--model", str(models["binary"])])
    with pytest.raises(ServeUsageError, match="LABEL_0"):
        build_judge(args, Settings())
    args = parser.parse_args(
        ["serve", "--judge", "nli", "--model", str(models["binary"]), "--label-map", "1=supported"]
    )
    assert isinstance(build_judge(args, Settings()), NLIJudge)


CONFIGURED_APP = """
import json, sys
import ragpulse

results = []
keywords, context, question = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
# A group given as a JSON object ({"judging": {...}}) becomes its options object.
if "judging" in keywords:
    keywords["judging"] = ragpulse.JudgeOptions(**keywords["judging"])
handle = ragpulse.configure(
    output_file="traces.jsonl",
    on_evaluation=lambda record, evaluation: results.append((record.answer, evaluation)),
    **keywords,
)

@ragpulse.rag(name="router-bot")
def ask(question, answer):
    ragpulse.record_contexts([context])
    return answer

ask(question, "The Larkspur router costs ninety euros.")
ask(question, "The Larkspur router costs twenty euros.")
handle.force_flush(60.0)
# Evaluations finish in any order: sorted by answer, "ninety" before "twenty".
print(json.dumps([[e.judge, e.status.value, e.error_type, e.score("faithfulness")]
                  for _, e in sorted(results, key=lambda pair: pair[0])]))
handle.shutdown()
"""


def configured(keywords: dict[str, object], env: dict[str, str], cwd: Path) -> list[list[object]]:
    full_env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", **env}
    for key in ("OTEL_EXPORTER_OTLP_ENDPOINT", "RAGPULSE_JUDGE", "RAGPULSE_JUDGE_MODEL"):
        if key not in env:
            full_env.pop(key, None)
    done = subprocess.run(
        [sys.executable, "-c", CONFIGURED_APP, json.dumps(keywords), CONTEXT, QUESTION],
        cwd=cwd, env=full_env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout.splitlines()[-1]))


def test_configure_judges_with_the_local_model_it_names(
    models: dict[str, Path], tmp_path: Path
) -> None:
    got = configured({"judge": "nli", "judging": {"model": str(models["nli"])}}, {}, tmp_path)
    assert got == [["nli", "ok", None, 1.0], ["nli", "ok", None, 0.0]]


def test_the_judge_variables_choose_the_local_model(
    models: dict[str, Path], tmp_path: Path
) -> None:
    env = {"RAGPULSE_JUDGE": "tokens", "RAGPULSE_JUDGE_MODEL": str(models["tokens"])}
    got = configured({}, env, tmp_path)
    assert [row[0] for row in got] == ["tokens", "tokens"]
    assert [row[3] for row in got] == [1.0, 0.0]


def test_configure_with_an_unusable_model_records_judge_unavailable_and_the_app_runs(
    tmp_path: Path,
) -> None:
    got = configured({"judge": "nli", "judging": {"model": str(tmp_path / "gone")}}, {}, tmp_path)
    assert [(row[1], row[2]) for row in got] == [("error", "judge_unavailable")] * 2


WITHOUT_LOCAL_EXTRA = """
import sys

class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"onnxruntime", "tokenizers"}:
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, Missing())
from ragpulse.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_without_the_local_extra_eval_says_what_to_install(
    models: dict[str, Path], labelled: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_LOCAL_EXTRA, "eval", str(labelled), "--judge", "nli",
         "--model", str(models["nli"])],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "pip install 'ragpulse[local]'" in done.stderr
