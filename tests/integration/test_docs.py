"""The README's code blocks and the examples run as written, so the docs cannot rot."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def run_python(code_or_path: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})}
    full_env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    argv = (
        [sys.executable, str(code_or_path)]
        if isinstance(code_or_path, Path)
        else [
            sys.executable,
            "-c",
            code_or_path,
        ]
    )
    done = subprocess.run(argv, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def scored_units(traces: Path) -> list[dict[str, object]]:
    units = []
    for line in traces.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    attrs = {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}
                    if "ragpulse.eval.status" in attrs:
                        units.append(attrs)
    return units


def test_readme_has_python_blocks_to_run() -> None:
    assert len(PYTHON_BLOCKS) >= 5


@pytest.mark.parametrize("index", range(len(PYTHON_BLOCKS)))
def test_readme_python_block_runs(index: int, tmp_path: Path) -> None:
    run_python(PYTHON_BLOCKS[index], tmp_path, {"OPENAI_API_KEY": "unused-by-construction"})


def test_readme_quickstart_puts_scores_on_the_span(tmp_path: Path) -> None:
    quickstart = next(b for b in PYTHON_BLOCKS if "@ragpulse.rag" in b)
    run_python(quickstart, tmp_path)
    (unit,) = scored_units(tmp_path / "ragpulse-traces.jsonl")
    assert unit["ragpulse.eval.groundedness.score"] == 1.0
    assert unit["ragpulse.eval.correctness.score"] is not None


def test_readme_eval_command_runs_as_a_quality_gate(tmp_path: Path) -> None:
    command = re.search(r"^ragpulse eval .*$", README, flags=re.M)
    assert command is not None
    rows = [
        {
            "id": "a",
            "question": "q",
            "contexts": ["The sky is blue."],
            "answer": "The sky is blue.",
        },
        {"id": "b", "question": "q", "contexts": ["The sky is blue."], "answer": "Grass is red."},
    ]
    (tmp_path / "answers.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    argv = command.group(0).split()[1:]
    done = subprocess.run(
        [sys.executable, "-m", "ragpulse.cli", *argv],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1  # mean groundedness 0.5 is under the 0.8 gate
    scores = [json.loads(line) for line in (tmp_path / "scores.jsonl").read_text().splitlines()]
    assert [s["scores"]["groundedness"] for s in scores] == [1.0, 0.0]


def test_quickstart_example_scores_a_grounded_answer(tmp_path: Path) -> None:
    out = run_python(ROOT / "examples" / "quickstart.py", tmp_path)
    assert "14 days" in out
    (unit,) = scored_units(tmp_path / "ragpulse-traces.jsonl")
    assert unit["ragpulse.eval.groundedness.score"] == 1.0
    assert unit["ragpulse.eval.faithfulness.score"] == 1.0


def test_existing_otel_example_exports_the_scored_span_through_the_apps_exporter(
    tmp_path: Path,
) -> None:
    out = run_python(ROOT / "examples" / "existing_otel.py", tmp_path)
    spans = [json.loads(chunk) for chunk in re.findall(r"^\{\n.*?^\}$", out, flags=re.S | re.M)]
    names = [s["name"] for s in spans]
    assert sorted(names) == ["business-logic", "handle", "retrieval search"]
    handle = next(s for s in spans if s["name"] == "handle")
    assert handle["attributes"]["ragpulse.eval.groundedness.score"] == 1.0


def sh_block(marker: str) -> str:
    blocks = re.findall(r"```sh\n(.*?)```", README, flags=re.S)
    return next(b for b in blocks if marker in b)


def test_readme_otlp_exports_are_what_configure_reads(tmp_path: Path) -> None:
    script = sh_block("export OTEL_EXPORTER_OTLP_ENDPOINT") + textwrap_app()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(ROOT / "src")
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    endpoint, service, exporter = done.stdout.split()
    assert endpoint == "http://localhost:4318"
    assert service == "support-bot"
    assert exporter == "OTLPSpanExporter"


def textwrap_app() -> str:
    # Inspect what configure() built from the exported variables, without exporting anything.
    return (
        f"{sys.executable} - <<'PY'\n"
        "import os, ragpulse\n"
        "h = ragpulse.configure(evaluate=False)\n"
        "processor = h.tracer_provider._active_span_processor._span_processors[0]\n"
        "exporter = processor.span_exporter.exporter  # the OTLP exporter inside the retrying one\n"
        "print(h.endpoint, h.tracer_provider.resource.attributes['service.name'],\n"
        "      type(exporter).__name__, flush=True)\n"
        "os._exit(0)\n"
        "PY\n"
    )


def test_readme_install_lines_name_extras_that_exist() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    block = sh_block("pip install .")
    named = re.findall(r"\.\[(\w+)\]", block) + re.findall(r"whl\[(\w+)\]", block)
    assert named and all(name in extras for name in named)


def test_readme_never_tells_users_to_install_an_unpublished_package() -> None:
    assert not re.search(r"pip install '?ragpulse\b", README)


def test_readme_quickstart_is_the_example_file_and_prints_the_scores(tmp_path: Path) -> None:
    example = ROOT / "examples" / "quickstart.py"
    assert example.read_text(encoding="utf-8") in PYTHON_BLOCKS
    out = run_python(example, tmp_path)
    assert "ok {'faithfulness': 1.0, 'groundedness': 1.0, 'correctness': 1.0}" in out


def test_readme_make_targets_exist() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for target in re.findall(r"^make (\w+)", sh_block("make demo"), flags=re.M):
        assert re.search(rf"^{target}:", makefile, flags=re.M), target


def test_ci_and_scripts_never_stop_processes_by_name() -> None:
    # On a shared machine a name matches other people's servers: stop only the PIDs we started.
    scripts = [ROOT / ".ci" / "run", ROOT / "Makefile", *sorted((ROOT / "scripts").glob("*"))]
    scripts += sorted((ROOT / "collector-config").rglob("*.sh"))
    for script in scripts:
        text = script.read_text(encoding="utf-8")
        assert not re.search(r"\b(pkill|killall)\b", text), script


def test_make_test_ends_with_the_reasons_for_skipped_tests() -> None:
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), flags=re.M)
    assert recipe is not None and "-rs" in recipe.group(1).split()
