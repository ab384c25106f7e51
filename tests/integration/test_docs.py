"""The code blocks of the README and the docs/ pages, and the examples, run as written.

A Python block of a docs/ page that cannot run here is marked by the line
``<!-- not-run: <reason> -->`` right above its fence; every other one runs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_RUN = re.compile(r"<!-- not-run: (.*?) -->\n```python\n", flags=re.S)
# Pages linked from the README whose content is written alongside other work; until they
# exist, a link to them is allowed to dangle. Keep this list short and remove names as they land.
PAGES_BEING_WRITTEN: set[str] = set()


def page_blocks() -> list[tuple[str, str]]:
    """Every runnable Python block of the README and the docs/ pages, named page#index."""
    blocks = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        skipped = {m.end() for m in NOT_RUN.finditer(text)}
        found = re.finditer(r"```python\n(.*?)```", text, flags=re.S)
        runnable = [m.group(1) for m in found if m.start(1) not in skipped]
        name = str(page.relative_to(ROOT))
        blocks += [(f"{name}#{i}", code) for i, code in enumerate(runnable, start=1)]
    return blocks


PAGE_BLOCKS = page_blocks()


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


def test_readme_opens_with_the_two_commands_and_stays_a_front_page() -> None:
    first_block = re.search(r"```sh\n(.*?)```", README, flags=re.S)
    assert first_block is not None
    assert [line.split()[:2] for line in first_block.group(1).splitlines()] == [
        ["make", "demo"],
        ["make", "test"],
    ]
    assert len(README.splitlines()) <= 270  # ~250 lines; the reference lives in docs/


def test_readme_and_docs_have_python_blocks_to_run() -> None:
    assert PYTHON_BLOCKS
    assert len(PAGE_BLOCKS) >= 10


def test_a_block_marked_not_run_says_why() -> None:
    for page in PAGES:
        for reason in NOT_RUN.findall(page.read_text(encoding="utf-8")):
            assert len(reason.split()) >= 3, (page, reason)


@pytest.mark.parametrize(("name", "code"), PAGE_BLOCKS, ids=[name for name, _ in PAGE_BLOCKS])
def test_a_python_block_of_the_docs_runs(name: str, code: str, tmp_path: Path) -> None:
    run_python(code, tmp_path, {"OPENAI_API_KEY": "unused-by-construction"})


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
    script = sh_block("export OTEL_SERVICE_NAME") + textwrap_app()
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


def project_pages(folder: Path) -> list[Path]:
    """The Markdown pages of ``folder``, not those of packages installed in it (the Node.js
    example's ``node_modules``, which a test installs while others are being collected)."""
    return sorted(p for p in folder.rglob("*.md") if "node_modules" not in p.parts)


INSTALL_PAGES = [
    *PAGES,
    *project_pages(ROOT / "examples"),
    *project_pages(ROOT / "collector-config"),
]


@pytest.mark.parametrize("page", INSTALL_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_tells_users_to_install_an_unpublished_package(page: Path) -> None:
    # ragpulse is not on PyPI: every install line names a checkout (".[extra]") or a wheel.
    assert not re.search(r"""pip install ['"]?ragpulse\b""", page.read_text(encoding="utf-8"))


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


# --- links between the pages -----------------------------------------------------------------

LINKED_PAGES = [*PAGES, *project_pages(ROOT / "examples")]
LINKED_PAGES = [p for p in LINKED_PAGES if "node_modules" not in p.parts]


def without_code(markdown: str) -> str:
    return re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces as '-'."""
    headings = re.findall(r"^#{1,6} (.+)$", without_code(page.read_text(encoding="utf-8")), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def local_links(page: Path) -> list[str]:
    targets = re.findall(r"\]\(([^)\s]+)\)", without_code(page.read_text(encoding="utf-8")))
    return [t for t in targets if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("page", LINKED_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_local_link_of_a_page_resolves(page: Path) -> None:
    for target in local_links(page):
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        name = str(linked.relative_to(ROOT)) if linked.is_relative_to(ROOT) else str(linked)
        if name in PAGES_BEING_WRITTEN and not linked.exists():
            continue
        assert linked.exists(), f"{page.relative_to(ROOT)}: {target}"
        if anchor and linked.suffix == ".md":
            assert anchor in anchors(linked), f"{page.relative_to(ROOT)}: {target}"


def test_the_pages_allowed_to_dangle_are_only_linked_from_the_readme_and_judges() -> None:
    for page in LINKED_PAGES:
        if page.name in {"README.md", "judges.md"} and page.parent in {ROOT, ROOT / "docs"}:
            continue
        for target in local_links(page):
            linked = (page.parent / target.partition("#")[0]).resolve()
            assert str(linked.relative_to(ROOT)) not in PAGES_BEING_WRITTEN or linked.exists()


# --- commands the pages give -----------------------------------------------------------------


def commands(marker: str) -> list[tuple[str, dict[str, str]]]:
    """Each command of the pages' sh blocks that runs ``marker`` (continuations joined, comments
    cut), with the environment it gets: the block's earlier ``export``s and its own ``VAR=``s."""
    found = []
    for page in PAGES:
        for block in re.findall(r"```sh\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S):
            exported: dict[str, str] = {}
            for line in block.replace("\\\n", " ").splitlines():
                words = shlex.split(line.split("#")[0])
                if words[:1] == ["export"]:
                    exported.update(w.split("=", 1) for w in words[1:] if "=" in w)
                elif marker in " ".join(words):
                    start = words.index(marker.split()[0])
                    own = dict(w.split("=", 1) for w in words[:start] if "=" in w)
                    found.append((" ".join(words[start:]), {**exported, **own}))
    return found


def serve_parser() -> argparse.ArgumentParser:
    from ragpulse.cli.serve import add_parser

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    return parser


def test_documented_serve_commands_never_export_to_their_own_receiver() -> None:
    documented = commands("ragpulse serve")
    assert documented
    for command, env in documented:
        args = serve_parser().parse_args(shlex.split(command)[1:])
        endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        if endpoint is None:
            continue
        exports_to = urlsplit(endpoint).netloc.replace("localhost", "127.0.0.1")
        assert exports_to not in {args.http, args.grpc}, command


def test_the_documented_calibrate_command_runs_on_the_shipped_sample(tmp_path: Path) -> None:
    # The command on the labelled sample (others read files a running app wrote).
    (documented,) = set(re.findall(r"^ragpulse calibrate (examples/.*)$", README, flags=re.M))
    argv = shlex.split(documented)
    sample = ROOT / argv[0]
    assert sample.is_relative_to(ROOT / "examples")  # shipped in the repository
    (tmp_path / argv[0]).parent.mkdir(parents=True)
    shutil.copy(sample, tmp_path / argv[0])
    done = subprocess.run(
        [sys.executable, "-m", "ragpulse.cli", "calibrate", *argv],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    calibration = json.loads((tmp_path / "calibration.json").read_text())
    assert calibration["metric"] == "faithfulness" and 0.0 <= calibration["threshold"] <= 1.0
    judges = (ROOT / "docs" / "judges.md").read_text(encoding="utf-8")
    assert f"$ ragpulse calibrate {documented}\n{done.stdout.splitlines()[0]}\n" in judges


def test_the_shipped_sample_is_labelled_in_calibrates_format() -> None:
    from ragpulse.offline.calibrate import read_labelled

    records = read_labelled(ROOT / "examples" / "data" / "labelled_sample.jsonl")
    hallucinated = sum(r.hallucinated for r in records)
    assert 30 <= len(records) <= 60 and 0 < hallucinated < len(records)
    assert all(r.has_spans for r in records)
