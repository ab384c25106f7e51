"""Runs the demo: requests through the support bot, live evaluation, then a table and a summary.

Evaluations arrive through ``configure(on_evaluation=...)`` on ragpulse's worker
thread, exactly as in an application; the demo matches each one to its request
by the ``@rag`` span id and compares it with the injected fault's ground truth.

Each kind of fault has the signal meant to catch it (``DETECTORS``): claims
(groundedness below its threshold, or a claim ``NOT_FOUND`` or ``CONTRADICTED``)
for a changed number, a foreign date or an added sentence; relevancy below its
threshold for an off-question answer; completeness for an omitted required part;
citation for a wrong citation; an abstention the passages could have answered
for an unwarranted abstention. A request is *flagged* when any of them fires. A
flagged request with an injected fault is *caught*, an unflagged one *missed*; a
flagged clean request is a *false alarm*. Per kind, the summary counts how many
of its faults its signal caught and on how many clean answers it fired. Each metric
is read against its own threshold (``DemoOptions.thresholds``: the one its module
declares unless ``--threshold METRIC=VALUE`` moves it), as the span's label is.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import random
import shutil
import tempfile
import threading
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import ragpulse
from ragpulse import semconv
from ragpulse.config import Handle
from ragpulse.demo import DEFAULT_MODEL, TINY_MODEL
from ragpulse.demo.app import APP_NAME, Reply, SupportBot
from ragpulse.demo.corpus import DOCUMENTS
from ragpulse.demo.generator import (
    AGENT_FAULTS,
    RETRIEVAL_FAULTS,
    AnswerGenerator,
    ExtractiveGenerator,
    FaultKind,
    OpenAIChatGenerator,
    plan_faults,
)
from ragpulse.demo.questions import QUESTIONS
from ragpulse.demo.retriever import Bm25Retriever
from ragpulse.evaluation.diagnosis import GENERATION_DRIFT, OK, RETRIEVAL_MISS, TOOL_FAILURE
from ragpulse.evaluation.types import (
    CITATION,
    COMPLETENESS,
    FAITHFULNESS,
    GROUNDEDNESS,
    RELEVANCY,
    EvalStatus,
    Evaluation,
    RagRecord,
    Verdict,
)
from ragpulse.judges._labels import declined, label_thresholds
from ragpulse.judges.base import Judge
from ragpulse.judging._factory import JudgeUnavailable, build_judge, judge_notes
from ragpulse.metrics import METRICS
from ragpulse.metrics.correctness import DEFAULT_CORRECTNESS_MODE
from ragpulse.outputs.files import read_lines

_EXTRA_OF = {
    "rank_bm25": "demo",
    "openai": "openai",
    "prometheus_client": "prometheus",
    "onnx": "local",
    "onnxruntime": "local",
    "tokenizers": "local",
}
"""The extra that installs a module the demo may miss."""
SERVICE_NAME = "larkspur-support-bot"
_FLAGGING_VERDICTS = (Verdict.NOT_FOUND, Verdict.CONTRADICTED)


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """What ``ragpulse demo`` was asked to do."""

    requests: int = 60
    seed: int = 7
    concurrency: int = 4
    drift: float = 0.3
    judge: Literal["lexical", "openai", "nli", "tokens", "cascade"] = "lexical"
    correctness_mode: str = DEFAULT_CORRECTNESS_MODE
    model: str | None = None
    base_url: str | None = None
    thresholds: Mapping[str, float] = field(default_factory=lambda: label_thresholds("lexical"))
    """Each metric's pass/fail threshold (by default the offline judge's); a metric absent
    here has none (no label, no flag)."""
    prometheus_port: int | None = None
    output_file: str | None = None
    show_table: bool = True
    flush_timeout: float = 60.0
    judge_options: Mapping[str, Any] = field(default_factory=dict)
    """``--label-map``, ``--judge-threads``, ``--escalate``, ``--cascade-band``."""


@dataclass(slots=True)
class Outcome:
    """One request: what the app did and what the evaluator said."""

    request_id: int
    question: str
    reply: Reply | None = None
    error: str | None = None
    """Set when the app itself failed (e.g. the chat model was unreachable)."""
    evaluation: Evaluation | None = None

    @property
    def injected(self) -> bool:
        return self.reply is not None and self.reply.fault is not None

    def flagged(self, thresholds: Mapping[str, float]) -> bool:
        """Any detector fires (see ``DETECTORS``)."""
        return bool(self.signals(thresholds))

    def signals(self, thresholds: Mapping[str, float]) -> set[str]:
        """The detectors that fire on this request's evaluation."""
        evaluation = self.evaluation
        if evaluation is None or evaluation.status not in _JUDGED:
            return set()
        return {name for name, fires in DETECTORS.items() if fires(evaluation, thresholds)}


Thresholds = Mapping[str, float]

_JUDGED = (EvalStatus.OK, EvalStatus.NO_CLAIMS)
"""Evaluations that ended with a verdict: an answer with claims, or one with none to score (an
abstention the passages could not answer, which its diagnosis still reads)."""


def _below(evaluation: Evaluation, metric: str, thresholds: Thresholds) -> bool:
    """The metric's score fails its threshold (below it, as the span's ``fail`` label)."""
    score, threshold = evaluation.score(metric), thresholds.get(metric)
    return score is not None and threshold is not None and score < threshold


def _claims_fail(evaluation: Evaluation, thresholds: Thresholds) -> bool:
    if evaluation.abstained:
        return False  # an abstention has no claim; its own detector speaks for it
    return (
        _below(evaluation, FAITHFULNESS, thresholds) or _below(evaluation, GROUNDEDNESS, thresholds)
    ) or any(c.verdict in _FLAGGING_VERDICTS for c in evaluation.claims)


DETECTORS: dict[str, Callable[[Evaluation, Thresholds], bool]] = {
    "claims": _claims_fail,
    "relevancy": lambda e, t: _below(e, RELEVANCY, t),
    "completeness": lambda e, t: _below(e, COMPLETENESS, t),
    "citation": lambda e, t: _below(e, CITATION, t),
    "abstention": lambda e, t: bool(e.abstained and e.answerable),
    "retrieval": lambda e, t: e.diagnosis == RETRIEVAL_MISS,
}
"""Detector name -> whether it fires on an evaluation, given each metric's threshold."""

DETECTOR_OF: dict[FaultKind, str] = {
    FaultKind.CHANGED_NUMBER: "claims",
    FaultKind.FOREIGN_DATE: "claims",
    FaultKind.UNSUPPORTED_SENTENCE: "claims",
    FaultKind.OFF_QUESTION: "relevancy",
    FaultKind.OMITTED_PART: "completeness",
    FaultKind.WRONG_CITATION: "citation",
    FaultKind.UNWARRANTED_ABSTENTION: "abstention",
    FaultKind.WRONG_CHUNKS: "retrieval",
    FaultKind.MISSING_CHUNKS: "retrieval",
    # An answer after a failed tool stands on nothing: its claims are not in any evidence.
    FaultKind.FAILED_TOOL: "claims",
}
"""The signal meant to catch each kind of fault."""


@dataclass(frozen=True, slots=True)
class Detection:
    """How the evaluator's flags line up with the injected ground truth."""

    faults: int
    caught: int
    clean: int
    false_alarms: int
    unjudged: int
    """Requests without a judged evaluation (app error, judge error, pending, skipped)."""
    by_kind: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Fault kind -> (caught by its own signal, injected)."""
    false_alarms_by_kind: dict[str, int] = field(default_factory=dict)
    """Fault kind -> clean answers on which that kind's signal fired."""

    @property
    def missed(self) -> int:
        return self.faults - self.caught


def detect(outcomes: Sequence[Outcome], thresholds: Thresholds) -> Detection:
    """Compare flags with ground truth over the requests that were judged."""
    faults = caught = clean = false_alarms = unjudged = 0
    kinds: dict[str, list[int]] = {kind.value: [0, 0] for kind in FaultKind}
    fired_on_clean: Counter[str] = Counter()
    for outcome in outcomes:
        if outcome.evaluation is None or outcome.evaluation.status not in _JUDGED:
            unjudged += 1
            continue
        signals = outcome.signals(thresholds)
        flagged = bool(signals)
        if outcome.reply is not None and outcome.reply.fault is not None:
            faults += 1
            caught += flagged
            kind = outcome.reply.fault.kind
            tally = kinds[kind.value]
            tally[0] += DETECTOR_OF[kind] in signals
            tally[1] += 1
        else:
            clean += 1
            false_alarms += flagged
            fired_on_clean.update(signals)
    by_kind = {kind: (hit, total) for kind, (hit, total) in kinds.items() if total}
    alarms = {kind.value: fired_on_clean[DETECTOR_OF[kind]] for kind in FaultKind}
    return Detection(faults, caught, clean, false_alarms, unjudged, by_kind, alarms)


def run_demo(options: DemoOptions, console: Console | None = None) -> int:
    """Run the demo end to end and print its report; returns the exit code."""
    console = console or _console()
    if options.requests < 1 or options.concurrency < 1:
        console.print("[red]ragpulse demo:[/] --requests and --concurrency must be at least 1")
        return 2
    try:
        generator = _generator(options)
        judge = _judge(options)
        retriever = Bm25Retriever()
    except ImportError as exc:
        # Brackets are rich markup: every text that is not ours, and "[demo]", is escaped.
        extra = _EXTRA_OF.get((exc.name or "").split(".")[0], "all")
        console.print(
            f"[red]ragpulse demo:[/] {escape(str(exc))}. Install it with "
            + escape(f"`pip install '.[{extra}]'`")
            + " in a checkout"
        )
        return 2
    except JudgeUnavailable as exc:
        console.print(f"[red]ragpulse demo:[/] --judge {options.judge}: {escape(str(exc))}")
        return 2
    device = options.judge_options.get("device", "cpu")
    for note in judge_notes(judge):
        console.print(f"[yellow]ragpulse demo:[/] --device {escape(str(device))}: {escape(note)}")

    faulty = plan_faults(options.requests, options.drift, options.seed)
    bot = SupportBot(retriever, generator, faulty=faulty, seed=options.seed)
    questions = _question_sequence(options.requests, options.seed)
    outcomes = [Outcome(i, q) for i, q in enumerate(questions)]

    evaluations: dict[int, Evaluation] = {}
    records: dict[int, RagRecord] = {}
    lock = threading.Lock()
    progress = _progress(console)
    request_task = progress.add_task("answered", total=options.requests)
    evaluated_task = progress.add_task("evaluated", total=options.requests)

    def on_evaluation(record: RagRecord, evaluation: Evaluation) -> None:
        # Runs on ragpulse's worker thread; keep it short.
        if record.span_context is None or record.name != APP_NAME:
            return
        with lock:
            evaluations[record.span_context.span_id] = evaluation
            records[record.span_context.span_id] = record
        progress.advance(evaluated_task)

    console.print(_intro(options, generator, judge))
    try:
        handle = ragpulse.configure(
            service_name=SERVICE_NAME,
            judge=judge,
            sample_rate=1.0,
            metrics=METRICS,
            thresholds=dict(options.thresholds),
            prometheus_port=options.prometheus_port,
            output_file=options.output_file,
            on_evaluation=on_evaluation,
        )
    except (OSError, RuntimeError) as exc:
        console.print(f"[red]ragpulse demo:[/] could not set up telemetry: {escape(str(exc))}")
        return 2
    if options.prometheus_port is not None and handle.prometheus_url is None:
        # configure() goes on without /metrics (a port taken, say); the demo was asked for it.
        handle.shutdown()
        console.print(
            "[red]ragpulse demo:[/] could not set up telemetry: "
            f"cannot serve /metrics on port {options.prometheus_port}"
        )
        return 2
    # Each run starts its files afresh, so a report of ragpulse-traces.jsonl shows this run
    # alone (configure() appends, as an application's restarts must not lose what it wrote).
    _start_afresh(handle.output_files.values())
    offsets = {signal: _size(path) for signal, path in handle.output_files.items()}
    scrape: dict[str, int] | None = None
    try:
        with progress:

            def serve(outcome: Outcome) -> None:
                try:
                    outcome.reply = bot.ask(outcome.request_id, outcome.question)
                except Exception as exc:  # the app failed; the demo reports it and goes on
                    outcome.error = f"{type(exc).__name__}: {exc}"
                    progress.advance(evaluated_task)  # no evaluation will come
                progress.advance(request_task)

            with ThreadPoolExecutor(options.concurrency, thread_name_prefix="request") as pool:
                list(pool.map(serve, outcomes))
            handle.force_flush(timeout=options.flush_timeout)
        if handle.prometheus_url is not None:
            scrape = _scrape(handle.prometheus_url)
    finally:
        handle.shutdown()

    with lock:
        for outcome in outcomes:
            if outcome.reply is not None:
                outcome.evaluation = evaluations.get(outcome.reply.span_id)
    if options.show_table:
        _print_table(console, _table(outcomes, options.thresholds, fit=console.is_terminal))
    detection = detect(outcomes, options.thresholds)
    for line in _summary(outcomes, detection, options, handle, offsets, scrape):
        console.print(line, soft_wrap=True)  # RESULT and the counts stay on one line each
    console.print(_write_page(outcomes, records, options), soft_wrap=True)  # the path unbroken
    answered = sum(o.reply is not None for o in outcomes)
    return 0 if answered else 1


# --- setup ---------------------------------------------------------------------------


def _console() -> Console:
    console = Console()
    # Piped output (CI, tests) gets a width that fits the table instead of 80 columns.
    return console if console.is_terminal else Console(width=190)


def _print_table(console: Console, table: Table) -> None:
    """A terminal gets the table fitted to its window; piped output (a file, CI's log) has no
    window, so the table is printed at its natural width and never cut."""
    if console.is_terminal:
        console.print(table)
        return
    natural = Measurement.get(console, console.options.update_width(100_000), table).maximum
    saved = console.width
    console.width = max(saved, natural)  # print() never exceeds the console's own width
    try:
        console.print(table)
    finally:
        console.width = saved


def _generator(options: DemoOptions) -> AnswerGenerator:
    if options.base_url or os.environ.get("OPENAI_API_KEY"):
        # --model names a local judge's directory for those judges, not a chat model.
        chat = options.model if options.judge in ("lexical", "openai") else None
        return OpenAIChatGenerator(chat or DEFAULT_MODEL, base_url=options.base_url)
    return ExtractiveGenerator()


def _tiny_model(kind: str) -> str:
    """``--model tiny``: the test suite's tiny model, built over the demo's words into a
    temporary directory that is removed at exit."""
    from ragpulse.demo.tiny_model import build_tiny

    texts = [d.content for d in DOCUMENTS] + [q.text for q in QUESTIONS]
    directory = Path(tempfile.mkdtemp(prefix=f"ragpulse-tiny-{kind}-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return str(build_tiny(kind, texts, directory))


def _judge(options: DemoOptions) -> Judge:
    # configure() wraps it in a ResilientJudge, as it does every judge it is given.
    model = options.model or DEFAULT_MODEL if options.judge == "openai" else options.model
    local = options.judge in ("nli", "tokens") or (
        options.judge == "cascade" and options.judge_options.get("escalate") in ("nli", "tokens")
    )
    if local and model == TINY_MODEL:
        kind = options.judge if options.judge != "cascade" else options.judge_options["escalate"]
        model = _tiny_model(kind)
    return build_judge(
        options.judge,
        model=model,
        base_url=options.base_url,
        correctness_mode=options.correctness_mode,
        **options.judge_options,
    )


def _question_sequence(requests: int, seed: int) -> list[str]:
    """Every question once in a seeded order, then again, until ``requests`` are asked."""
    rng = random.Random(seed)
    sequence: list[str] = []
    while len(sequence) < requests:
        batch = [q.text for q in QUESTIONS]
        rng.shuffle(batch)
        sequence.extend(batch)
    return sequence[:requests]


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description:>9}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )


def _correctness_note(mode: str) -> str:
    """How to read the correctness column, in the mode the judge scores it."""
    if mode == "agreement":
        reading = (
            "a sentence the reference says nothing about counts neither way; one it "
            "contradicts lowers the score"
        )
    else:
        reading = "true sentences beyond it lower its precision"
    return (
        f"[dim]Correctness ({mode}) compares each answer with a one-sentence reference "
        f"answer: {reading}.[/]"
    )


def _intro(options: DemoOptions, generator: AnswerGenerator, judge: Judge) -> str:
    faults = round(min(max(options.drift, 0.0), 1.0) * options.requests)
    return (
        f"[bold]ragpulse demo[/]: {options.requests} questions to the Larkspur support bot "
        f"(generator [cyan]{escape(generator.model)}[/], {faults} answers with an injected "
        f"fault), evaluated live by the [cyan]{escape(judge.name)}[/] judge."
        + (
            f"\n[yellow]--model {TINY_MODEL}[/]: the judge runs the test suite's tiny ONNX model, "
            "built for this run (it calls a claim supported when a passage holds its every "
            "word): the whole path of a model judge, not a model's accuracy. Export a real "
            "model as docs/local-judges.md shows, and pass its directory."
            if options.model == TINY_MODEL and options.judge in ("nli", "tokens", "cascade")
            else ""
        )
    )


def _start_afresh(paths: Iterable[Path]) -> None:
    """Empty the demo's output files before it writes (its exporters append to them)."""
    for path in paths:
        with contextlib.suppress(OSError):  # a file that cannot be emptied is appended to
            os.truncate(path, 0)


def _size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:
        return 0


def _scrape(url: str) -> dict[str, int]:
    """Sample counts per metric family name on the Prometheus endpoint."""
    counts: Counter[str] = Counter()
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            body = response.read().decode("utf-8", "replace")
    except OSError:
        return {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            counts[line.split("{", 1)[0].split(" ", 1)[0]] += 1
    return dict(counts)


# --- report --------------------------------------------------------------------------


def _write_page(
    outcomes: Sequence[Outcome], records: dict[int, RagRecord], options: DemoOptions
) -> str:
    """Writes ``ragpulse-report.html`` (beside the traces file) and says where it is."""
    from ragpulse.report import build_report, run_from_evaluations

    items = [
        (str(o.request_id + 1), records[o.reply.span_id], o.evaluation)
        for o in outcomes
        if o.reply is not None and o.evaluation is not None and o.reply.span_id in records
    ]
    folder = Path(options.output_file).parent if options.output_file else Path()
    page = folder / "ragpulse-report.html"
    try:
        page.write_text(
            build_report([run_from_evaluations("demo", items)], dict(options.thresholds)), "utf-8"
        )
    except OSError as exc:
        return f"[red]Report[/]: could not write {escape(str(page))}: {escape(str(exc))}"
    return "[bold]Report[/] (each claim beside its evidence, open it in a browser): " + escape(
        str(page.resolve())
    )


def _score_cell(evaluation: Evaluation | None, metric: str, thresholds: Thresholds) -> str:
    score = evaluation.score(metric) if evaluation is not None else None
    if score is None:
        return "[dim]–[/]"
    threshold = thresholds.get(metric)
    colour = "default" if threshold is None else "red" if score < threshold else "green"
    return f"[{colour}]{score:.2f}[/]"


def _claims_cell(evaluation: Evaluation | None) -> str:
    if evaluation is None or not evaluation.claims:
        return "[dim]–[/]"
    counts = Counter(c.verdict for c in evaluation.claims)
    cells = []
    for verdict in Verdict:
        value = counts.get(verdict, 0)
        bad = verdict in _FLAGGING_VERDICTS and value
        cells.append(f"[red]{value}[/]" if bad else str(value))
    return "/".join(cells)


def _status_cell(outcome: Outcome) -> str:
    if outcome.error is not None:
        return "[red]app error[/]"
    if outcome.evaluation is None:
        return "[yellow]pending[/]"
    evaluation = outcome.evaluation
    if evaluation.status is EvalStatus.ERROR:
        return f"[red]error: {escape(evaluation.error_type or '?')}[/]"
    return str(evaluation.status.value)


_FAULT_LABELS = {
    FaultKind.CHANGED_NUMBER: "number",
    FaultKind.FOREIGN_DATE: "date",
    FaultKind.UNSUPPORTED_SENTENCE: "added",
    FaultKind.OFF_QUESTION: "off-question",
    FaultKind.OMITTED_PART: "omitted",
    FaultKind.WRONG_CITATION: "citation",
    FaultKind.UNWARRANTED_ABSTENTION: "abstained",
    FaultKind.WRONG_CHUNKS: "retrieval: wrong passages",
    FaultKind.MISSING_CHUNKS: "retrieval: nothing found",
    FaultKind.FAILED_TOOL: "tool failed",
}


def _fault_cell(outcome: Outcome) -> str:
    fault = outcome.reply.fault if outcome.reply is not None else None
    if fault is None:
        return "[dim]–[/]"
    label = _FAULT_LABELS[fault.kind]
    if fault.kind in RETRIEVAL_FAULTS:
        return label
    if fault.kind is FaultKind.FAILED_TOOL:
        return f"{label}: {escape(fault.injected)}"
    if fault.kind in (FaultKind.UNSUPPORTED_SENTENCE, FaultKind.OFF_QUESTION):
        return f"{label}: “{escape(fault.injected)}”"
    if fault.kind is FaultKind.OMITTED_PART:
        return f"{label}: “{escape(fault.original)}”"
    if fault.kind is FaultKind.UNWARRANTED_ABSTENTION:
        return f"{label}: “{escape(fault.injected)}”"
    return f"{label}: {escape(fault.original)} → {escape(fault.injected)}"


def _flag_cell(outcome: Outcome, thresholds: Thresholds) -> str:
    if outcome.evaluation is None or outcome.evaluation.status not in _JUDGED:
        return "[dim]–[/]"
    flagged = outcome.flagged(thresholds)
    if outcome.injected:
        return "[green]caught[/]" if flagged else "[red]missed[/]"
    return "[yellow]false alarm[/]" if flagged else "no"


def _table(outcomes: Sequence[Outcome], thresholds: Thresholds, *, fit: bool = True) -> Table:
    # Fits 100 columns: no vertical rules, scores four characters wide, status and diagnosis
    # in one column (the status when the evaluation did not end ok, else whose fault), and
    # the two free texts (question, fault) the only columns that give way, never below what
    # still reads. A terminal wider than that gives them the room; unfitted (piped), every
    # cell is whole.
    table = Table(
        title="Requests and their evaluations",
        caption=_TABLE_LEGEND,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 0),
        expand=fit,
    )
    table.add_column("#", justify="right", style="dim", no_wrap=True, min_width=2)
    table.add_column(
        "question", ratio=3 if fit else None, min_width=18, overflow="ellipsis", no_wrap=True
    )
    for metric in _SHORT:
        header = _SHORT[metric]
        table.add_column(header, justify="right", no_wrap=True, min_width=4)
    table.add_column("claims", justify="center", no_wrap=True, min_width=7)
    table.add_column("diagnosis", no_wrap=True, min_width=9)
    table.add_column(
        "injected fault", ratio=2 if fit else None, min_width=12, overflow="ellipsis", no_wrap=True
    )
    table.add_column("flagged", no_wrap=True, min_width=6)
    for outcome in outcomes:
        agent = outcome.reply is not None and outcome.reply.agent
        table.add_row(
            f"{outcome.request_id + 1}{'a' if agent else ''}",
            escape(outcome.question),
            *(_score_cell(outcome.evaluation, m, thresholds) for m in _SHORT),
            _claims_cell(outcome.evaluation),
            _outcome_cell(outcome),
            _fault_cell(outcome),
            _flag_cell(outcome, thresholds),
        )
    return table


_TABLE_LEGEND = (
    '#: request, "a" when a tool-calling agent answered. Scores: faithfulness, groundedness, '
    "correctness, relevancy, completeness, citation; red below the metric's threshold. claims: "
    "the answer's claims supported / inferred / not found / contradicted. diagnosis: whose fault "
    "the unsupported claims are (retrieval, generation drift, a failed tool); it reads the "
    "claims only, so an answer true to its passages is ok there even when it misses the "
    "question (relevancy) or part of it (completeness), which are scored on their own. "
    "flagged: caught, missed, or a false alarm on a clean answer."
)


def _outcome_cell(outcome: Outcome) -> str:
    """The diagnosis of an evaluation that ended ok, else its status."""
    evaluation = outcome.evaluation
    ended_ok = evaluation is not None and evaluation.status in _JUDGED
    if outcome.error is None and ended_ok and evaluation and evaluation.diagnosis is not None:
        return _diagnosis_cell(evaluation)
    return _status_cell(outcome)


_DIAGNOSIS_SHORT = {
    OK: "ok",
    RETRIEVAL_MISS: "[yellow]retrieval[/]",
    GENERATION_DRIFT: "[red]drift[/]",
    "unanswerable_ok": "unanswerable",
    TOOL_FAILURE: "[red]tool fail[/]",
}


def _diagnosis_cell(evaluation: Evaluation | None) -> str:
    if evaluation is None or evaluation.diagnosis is None:
        return "–"
    return _DIAGNOSIS_SHORT.get(evaluation.diagnosis, escape(evaluation.diagnosis))


# The table's score columns: the answer's six metrics (the context metrics are in the
# summary and the report).
_SHORT = {
    "faithfulness": "faith",
    "groundedness": "grnd",
    "correctness": "corr",
    "relevancy": "relev",
    "completeness": "compl",
    "citation": "cite",
}


def _percent(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.0f}%" if whole else "n/a"


def _summary(
    outcomes: Sequence[Outcome],
    detection: Detection,
    options: DemoOptions,
    handle: Handle,
    offsets: dict[str, int],
    scrape: dict[str, int] | None,
) -> Iterator[str]:
    evaluated = [o.evaluation for o in outcomes if o.evaluation is not None]
    statuses = Counter(e.status.value for e in evaluated)
    app_errors = sum(o.error is not None for o in outcomes)
    yield ""
    yield (
        f"[bold]Evaluated[/] {len(evaluated)} of {len(outcomes)} requests ("
        + ", ".join(f"{status} {count}" for status, count in sorted(statuses.items()))
        + (f"; {app_errors} app errors" if app_errors else "")
        + ")."
    )
    means, below, declined_here = [], [], []
    unlabelled = declined(options.judge)
    for metric in METRICS:
        scores = [s for e in evaluated if (s := e.score(metric)) is not None]
        if not scores:
            continue
        means.append(f"{metric} {sum(scores) / len(scores):.2f}")
        threshold = options.thresholds.get(metric)
        if threshold is None:
            # A score without a pass/fail label: a share to read (context relevance), or
            # one the judge cannot decide on real answers (groundedness, offline judge).
            if metric in unlabelled:
                declined_here.append(metric)
            continue
        under = sum(s < threshold for s in scores)
        below.append(
            f"{metric} {under}/{len(scores)} ({_percent(under, len(scores))}) below {threshold:g}"
        )
    if means:
        yield "[bold]Mean scores[/]: " + ", ".join(means) + " (undefined scores skipped)."
        yield "[bold]Below their threshold[/] (fail): " + ", ".join(below) + "."
        for metric in declined_here:
            yield (
                f"[bold]Unlabelled[/]: {metric} is scored without a pass/fail label by the "
                f"{options.judge} judge: {unlabelled[metric]}."
            )
        yield _correctness_note(options.correctness_mode)
    yield (
        "[bold]Flagged[/] = any signal that fails its metric's threshold: claims "
        "(faithfulness or a labelled groundedness, or a claim NOT_FOUND or CONTRADICTED), "
        "relevancy, completeness, "
        "citation, or an abstention the passages could have answered. Each metric is read "
        "on its own; none is averaged with another."
    )
    kinds = ", ".join(f"{kind} {hit}/{total}" for kind, (hit, total) in detection.by_kind.items())
    yield (
        f"[bold]Injected faults[/]: {detection.faults} evaluated, caught {detection.caught} "
        f"({_percent(detection.caught, detection.faults)}), missed {detection.missed}"
        + (f" (by kind, caught/injected: {kinds})" if kinds else "")
        + "."
    )
    yield (
        f"[bold]Clean answers[/]: {detection.clean} evaluated, false alarms "
        f"{detection.false_alarms} ({_percent(detection.false_alarms, detection.clean)})"
        + (f"; {detection.unjudged} requests not judged ok" if detection.unjudged else "")
        + "."
    )
    yield "[bold]By kind[/] (caught by its own signal / injected; false alarms of that signal):"
    for kind in FaultKind:
        hit, total = detection.by_kind.get(kind.value, (0, 0))
        alarms = detection.false_alarms_by_kind.get(kind.value, 0)
        yield (
            f"  {kind.value:<24} caught {hit}/{total}, signal {DETECTOR_OF[kind]}, "
            f"false alarms {alarms}/{detection.clean}"
        )
    diagnosed = _diagnosed(outcomes)
    yield "[bold]Diagnosis[/] (ragpulse.eval.diagnosis: whose fault), per kind of request:"
    for group, (label, hit, total) in diagnosed.items():
        yield f"  {group:<24} {label} {hit}/{total}"
    yield from _telemetry_lines(handle, offsets, scrape)
    yield (
        f"RESULT requests={len(outcomes)} evaluated={len(evaluated)} "
        f"faults={detection.faults} caught={detection.caught} missed={detection.missed} "
        f"clean={detection.clean} false_alarms={detection.false_alarms} "
        f"unjudged={detection.unjudged} app_errors={app_errors} "
        + " ".join(
            f"caught_{kind}={hit} injected_{kind}={total} "
            f"false_alarms_{kind}={detection.false_alarms_by_kind.get(kind, 0)}"
            for kind, (hit, total) in detection.by_kind.items()
        )
        + " "
        + " ".join(
            f"diagnosed_{group.replace(' ', '_')}={hit} {group.replace(' ', '_')}={total}"
            for group, (_, hit, total) in diagnosed.items()
        )
    )


# What a request's diagnosis should be: a retrieval fault is the retriever's; a fault that
# makes claims the passages do not hold (or an abstention they could answer) the model's.
_EXPECTED_DIAGNOSIS: dict[str, tuple[str, frozenset[FaultKind]]] = {
    "retrieval faults": (RETRIEVAL_MISS, RETRIEVAL_FAULTS),
    "tool faults": (TOOL_FAILURE, AGENT_FAULTS),
    "generation faults": (
        GENERATION_DRIFT,
        frozenset(
            {
                FaultKind.CHANGED_NUMBER,
                FaultKind.FOREIGN_DATE,
                FaultKind.UNSUPPORTED_SENTENCE,
                FaultKind.UNWARRANTED_ABSTENTION,
            }
        ),
    ),
}


def _diagnosed(outcomes: Sequence[Outcome]) -> dict[str, tuple[str, int, int]]:
    """Per group of requests, the diagnosis it should get, how many got it, how many there are."""
    groups: dict[str, tuple[str, int, int]] = {}
    judged = [o for o in outcomes if o.evaluation is not None and o.evaluation.diagnosis]
    for group, (label, kinds) in _EXPECTED_DIAGNOSIS.items():
        members = [o for o in judged if o.reply and o.reply.fault and o.reply.fault.kind in kinds]
        hits = sum(1 for o in members if o.evaluation and o.evaluation.diagnosis == label)
        groups[group] = (label, hits, len(members))
    clean = [o for o in judged if not o.injected]
    hits = sum(1 for o in clean if o.evaluation and o.evaluation.diagnosis == OK)
    groups["clean answers"] = (OK, hits, len(clean))
    return groups


def _telemetry_lines(
    handle: Handle, offsets: dict[str, int], scrape: dict[str, int] | None
) -> Iterator[str]:
    if handle.endpoint is not None:
        protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        yield (
            f"[bold]Telemetry[/]: spans, metrics and log events sent over OTLP "
            f"({escape(protocol)}) to {escape(str(handle.endpoint))}."
        )
    elif handle.output_files:
        yield "[bold]Telemetry[/] (OTLP-JSON lines, written afresh by each run):"
        for signal, path in handle.output_files.items():
            yield f"  {signal:<7} {escape(str(path.resolve()))}"
        traces = handle.output_files.get("traces")
        if traces is not None:
            spans, scored = _count_spans(traces, offsets.get("traces", 0))
            yield f"  this run wrote {spans} spans, {scored} of them with evaluation scores"
        logs = handle.output_files.get("logs")
        if logs is not None:
            events = _count_events(logs, offsets.get("logs", 0))
            yield f"  and {events} {semconv.GEN_AI_EVALUATION_RESULT_EVENT} log events."
    if handle.prometheus_url is not None:
        if scrape:
            score_samples = sum(
                n for name, n in scrape.items() if name.startswith("ragpulse_evaluation_score")
            )
            pipeline = sum(n for name, n in scrape.items() if name.startswith("ragpulse_"))
            detail = (
                f"scraped at the end: {score_samples} ragpulse_evaluation_score samples, "
                f"{pipeline} ragpulse_* samples"
            )
        else:
            detail = "could not be scraped"
        url = escape(handle.prometheus_url)
        yield f"[bold]Prometheus[/]: {url} ({detail}; served while the demo runs)."


def _new_lines(path: Path, offset: int) -> Iterator[dict[str, Any]]:
    """The OTLP-JSON payloads appended to ``path`` after ``offset`` (this run's)."""
    try:
        for _, line in read_lines(path, start=offset):
            try:
                payload = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(payload, dict):
                yield payload
    except OSError:
        return


def _count_spans(path: Path, offset: int) -> tuple[int, int]:
    """Spans, and spans carrying a groundedness score, written after ``offset``."""
    score_key = semconv.eval_score(GROUNDEDNESS)
    spans = scored = 0
    for payload in _new_lines(path, offset):
        for resource in payload.get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    spans += 1
                    keys = {a.get("key") for a in span.get("attributes", [])}
                    scored += score_key in keys
    return spans, scored


def _count_events(path: Path, offset: int) -> int:
    """``gen_ai.evaluation.result`` log records written after ``offset``."""
    events = 0
    for payload in _new_lines(path, offset):
        for resource in payload.get("resourceLogs", []):
            for scope in resource.get("scopeLogs", []):
                for record in scope.get("logRecords", []):
                    events += record.get("eventName") == semconv.GEN_AI_EVALUATION_RESULT_EVENT
    return events
