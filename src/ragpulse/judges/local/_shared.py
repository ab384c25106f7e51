"""What the local model judges share: loading, the never-raising evaluate, the vector.

A local judge (``NLIJudge``, ``TokenJudge``) answers one question: which of these
claims do these passages support? (``check``). Everything else is built from it the
same way for both:

- faithfulness and groundedness: the answer's claims against the contexts;
- correctness: the answer's claims against the reference (precision; a contradicted
  claim is marked so), and the reference's claims against the answer (recall);
- completeness: each rubric item against the answer, else the recall side;
- citation: a claim's ``[N]`` markers hold when the cited passages alone support it;
- what an earlier judge found contradicting a claim (a cascade's screen,
  ``evaluate_with_contradictions``) is read with that claim in the faithfulness check;
- relevancy and answerability: the offline judge's word-overlap reading
  (``lexical._vector_view``), which needs no model.

Claims are the offline judge's (``checkable_claims``): sentences and clauses, without
the sentences that talk to the user or about the sources.
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from ragpulse import errors
from ragpulse._guard import Guard
from ragpulse.evaluation.findings import (
    QUESTION_PARTS,
    REFERENCE_AGREEMENT,
    REFERENCE_SUPPORT,
    REQUIRED_POINTS,
    CorrectnessInputs,
    Findings,
)
from ragpulse.evaluation.types import (
    AnnotatorKind,
    Claim,
    ClaimVerdict,
    Context,
    Evaluation,
    RagRecord,
    Verdict,
)
from ragpulse.evaluation.vector import attach_citations, cited_support
from ragpulse.judges.base import Contradiction
from ragpulse.judges.lexical._checkable import checkable_claims, index_context
from ragpulse.judges.lexical._vector_view import (
    ANSWERABILITY_READERS,
    _answerable,
    _parts,
    abstains,
)
from ragpulse.judges.local._device import requested_providers, usable_providers
from ragpulse.judges.local._known import KnownModel, generic, known_model, known_problem
from ragpulse.judges.local._onnx import (
    CONFIG_FILE,
    ModelDirectory,
    ModelUnavailable,
    OnnxModel,
    available_providers,
    parse_label_map,
)
from ragpulse.judges.local._passages import local_contexts
from ragpulse.metrics import ALL_METRICS
from ragpulse.metrics._assemble import assemble
from ragpulse.metrics._registry import findings_for
from ragpulse.metrics.correctness import (
    DEFAULT_CORRECTNESS_MODE,
    CorrectnessMode,
    check_correctness_mode,
)

__all__ = ["LocalModelJudge"]

_guard = Guard(__name__)
_FAITHFUL = (Verdict.SUPPORTED, Verdict.INFERRED)


class LocalModelJudge(ABC):
    """Base of the judges that run an ONNX model from a local directory on the CPU.

    A directory that cannot be used does not raise here: the judge is made, says why
    in ``problem`` (one line naming the file), and every evaluation is an error of
    type ``judge_unavailable``, logged once (so a ``ResilientJudge``'s fallback
    answers instead). ``ragpulse``'s commands refuse such a judge up front.

    ``model`` is the directory; ``label_map`` names classes (``"1=supported"``);
    ``threads`` are the session's intra-op threads per process (None: the process's
    share of the CPU quota over ``processes`` judge processes); ``device`` is ``cpu``,
    ``cuda`` or a list of onnxruntime providers (``_local_device``; one missing is
    dropped and noted in ``device_note``); ``batch_size`` the sequences run at once;
    ``max_context_chars`` bounds each passage read;
    ``correctness_mode`` and ``beta`` score correctness as for every judge.
    """

    annotator_kind: AnnotatorKind = "CODE"
    cpu_bound = True
    """Inference is computation: the worker runs it in the judge's child processes."""
    task: ClassVar[str] = ""
    """The ``optimum-cli export onnx --task`` that writes a directory this judge reads."""
    token_level: ClassVar[bool] = False
    default_name: ClassVar[str] = ""

    def __init__(
        self,
        model: str | Path,
        *,
        name: str | None = None,
        label_map: str | Mapping[int, str] | None = None,
        threads: int | None = None,
        processes: int = 1,
        device: str | Sequence[str] = "cpu",
        batch_size: int = 8,
        max_context_chars: int = 200_000,
        correctness_mode: str | None = None,
        beta: float = 1.0,
    ) -> None:
        if (threads is not None and threads < 1) or batch_size < 1 or processes < 1:
            raise ValueError("threads, processes and batch_size must be at least 1")
        requested = requested_providers(device)
        self.name = name or self.default_name
        self.correctness_mode: CorrectnessMode = check_correctness_mode(
            correctness_mode or DEFAULT_CORRECTNESS_MODE
        )
        self.beta = beta
        self.threads = threads
        """Intra-op threads of the inference session, per judge process (None: its share
        of the CPU quota)."""
        self.device_note: str | None = None
        """Which requested execution providers onnxruntime here lacks (the judge runs on
        the others and the CPU); None when it has them all."""
        self.batch_size = batch_size
        """Sequences run through the model at once."""
        self.max_context_chars = max_context_chars
        """Only this many characters of each passage are read."""
        self.problem: str | None = None
        """Why the model cannot be used (one line naming the file); ``None``: it can."""
        self._model: OnnxModel | None = None
        self.model_name: str | None = None
        """The model's name (config.json's ``_name_or_path``: the hub id it was exported
        from), written as ``ragpulse.eval.judge.model``."""
        self.known: KnownModel | None = None
        """The recommended model this directory was exported from, if it is one."""
        try:
            given = parse_label_map(label_map)
            directory = ModelDirectory.read(model, task=self.task, label_map=given)
            self.model_name = directory.name
            directory = self._fit_known(directory, given)
            self._read_labels(directory)
            providers, self.device_note = usable_providers(requested, available_providers())
            loaded = OnnxModel(directory, threads=threads, processes=processes, providers=providers)
            loaded.check(token_level=self.token_level)
            loaded.release()  # made again where it runs: the judge's own process
            self._model = loaded
        except ModelUnavailable as exc:
            self.problem = str(exc)

    def _fit_known(self, directory: ModelDirectory, given: Mapping[int, str]) -> ModelDirectory:
        """``directory`` checked against the recommended model it names; its generic labels
        read as that model's (unless a label map was given)."""
        known = known_model(directory.name)
        if known is None:
            return directory
        problem = known_problem(known, self.default_name, directory.labels, self._supports)
        if problem is not None:
            raise ModelUnavailable(f"{directory.path / CONFIG_FILE}: {problem}")
        self.known = known
        if not given and generic(directory.labels):
            mapped = known.label_map
            directory = replace(directory, labels=tuple(mapped[i] for i in mapped))
        return directory

    @staticmethod
    def _supports(label: str) -> bool:
        """Whether a class name means "supported" (the judge's reading of names)."""
        return False

    @abstractmethod
    def _read_labels(self, directory: ModelDirectory) -> None:
        """Map the directory's class names to what the judge needs; ``ModelUnavailable`` if not."""

    @property
    def model(self) -> OnnxModel:
        """The loaded model; ``ModelUnavailable`` when there is none."""
        if self._model is None:
            raise ModelUnavailable(self.problem or "no model")
        return self._model

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        """Judge ``record``; never raises."""
        await asyncio.sleep(0)
        return self.evaluate_sync(record, metrics)

    async def evaluate_with_contradictions(
        self,
        record: RagRecord,
        metrics: Collection[str],
        contradicting: Sequence[Contradiction],
    ) -> Evaluation:
        """``evaluate``, reading each passage range of ``contradicting`` (an earlier judge's
        findings) with the claim it contradicted; never raises."""
        await asyncio.sleep(0)
        return self.evaluate_sync(record, metrics, contradicting)

    def evaluate_sync(
        self,
        record: RagRecord,
        metrics: Collection[str] = ALL_METRICS,
        contradicting: Sequence[Contradiction] = (),
    ) -> Evaluation:
        """The same as ``evaluate``, for batch jobs and benchmarks without an event loop."""
        started = time.perf_counter()
        try:
            evaluation = self._evaluate(record, metrics, contradicting)
        except ModelUnavailable as exc:
            # Logged once (the guard counts repeats); every result also says it.
            _guard.warning("judge %s cannot run: %s", self.name, exc)
            return self._failed(errors.JUDGE_UNAVAILABLE, str(exc), started)
        except Exception as exc:  # never raise into the caller; record what went wrong
            return self._failed(type(exc).__name__, str(exc)[:500], started)
        return replace(evaluation, duration_ms=(time.perf_counter() - started) * 1000)

    def _failed(self, error_type: str, explanation: str, started: float) -> Evaluation:
        return Evaluation.failed(
            error_type,
            judge=self.name,
            annotator_kind=self.annotator_kind,
            explanation=explanation,
            duration_ms=(time.perf_counter() - started) * 1000,
        )

    @abstractmethod
    def check(
        self,
        text: str,
        claims: Sequence[Claim],
        passages: Sequence[Context],
        question: str | None = None,
        must_read: Mapping[int, Sequence[tuple[int, int, int]]] | None = None,
    ) -> list[ClaimVerdict]:
        """A verdict per claim of ``text`` against ``passages`` (each cut to the judge's bound).

        ``must_read``: per claim index, ``(passage, start, end)`` ranges the model reads
        with that claim whatever the judge's first stage selects.
        """

    def _passages(self, contexts: Sequence[Context]) -> list[Context]:
        return [
            c
            if len(c.text) <= self.max_context_chars
            else replace(c, text=c.text[: self.max_context_chars])
            for c in contexts
        ]

    def _evaluate(
        self,
        record: RagRecord,
        metrics: Collection[str],
        contradicting: Sequence[Contradiction] = (),
    ) -> Evaluation:
        answer = record.answer or ""
        checkables = checkable_claims(answer)
        claims = [c.claim for c in checkables]
        contexts = self._passages(record.contexts)
        verdicts = (
            self.check(answer, claims, contexts, record.question, _must_read(claims, contradicting))
            if claims
            else []
        )

        def holds(i: int, cited: tuple[int, ...]) -> bool:
            def alone() -> ClaimVerdict:
                passages = [contexts[n] for n in cited]
                # What contradicted the claim in the whole reading is read again here.
                found = verdicts[i].evidence
                forced = (
                    {0: [(cited.index(found.context_index), found.start, found.end)]}
                    if verdicts[i].verdict is Verdict.CONTRADICTED
                    and found is not None
                    and found.context_index in cited
                    else None
                )
                return self.check(answer, [claims[i]], passages, record.question, forced)[0]

            return cited_support(verdicts[i], cited, alone)

        judged = attach_citations(verdicts, answer, len(contexts), holds)
        findings = findings_for(metrics)
        correctness: CorrectnessInputs | None = None
        reference_verdicts: list[ClaimVerdict] = []
        if record.reference and (
            (REFERENCE_AGREEMENT in findings and claims)
            or (REQUIRED_POINTS in findings and not record.rubric)
        ):
            correctness, reference_verdicts = self._correctness(
                answer, claims, record.reference, record.question
            )
        found = self._findings(
            record, findings, checkables, verdicts, correctness, reference_verdicts
        )
        found = replace(
            found,
            correctness=correctness if REFERENCE_AGREEMENT in findings and claims else None,
            reference_verdicts=tuple(reference_verdicts),
        )
        return assemble(
            record,
            metrics,
            judged,
            found,
            judge=self.name,
            annotator_kind=self.annotator_kind,
            correctness_mode=self.correctness_mode,
            beta=self.beta,
        )

    def _correctness(
        self, answer: str, claims: Sequence[Claim], reference: str, question: str | None
    ) -> tuple[CorrectnessInputs, list[ClaimVerdict]]:
        """Answer claims against the reference, and the reference's claims against the answer."""
        against = (
            self.check(answer, claims, [Context(reference, id="reference")], question)
            if claims
            else []
        )
        reference_claims = [c.claim for c in checkable_claims(reference)]
        reference_verdicts = (
            self.check(reference, reference_claims, [Context(answer, id="answer")], question)
            if reference_claims and answer.strip()
            else [ClaimVerdict(c, Verdict.NOT_FOUND) for c in reference_claims]
        )
        inputs = CorrectnessInputs(
            precision_hits=tuple(v.verdict in _FAITHFUL for v in against),
            recall_hits=tuple(v.verdict in _FAITHFUL for v in reference_verdicts),
            contradicted=tuple(v.verdict is Verdict.CONTRADICTED for v in against),
            conflicts=tuple(
                v.evidence.text if v.verdict is Verdict.CONTRADICTED and v.evidence else None
                for v in against
            ),
        )
        return inputs, reference_verdicts

    def _findings(
        self,
        record: RagRecord,
        findings: Collection[str],
        checkables: Sequence[Any],
        verdicts: Sequence[ClaimVerdict],
        correctness: CorrectnessInputs | None,
        reference_verdicts: Sequence[ClaimVerdict],
    ) -> Findings:
        answer = record.answer or ""
        points: list[ClaimVerdict] = []
        wants_points = REQUIRED_POINTS in findings
        if wants_points and record.rubric:
            for point in record.rubric:
                verdict = (
                    self.check(
                        point, [Claim(point, 0, len(point))], [Context(answer, id="answer")]
                    )[0]
                    if answer.strip()
                    else ClaimVerdict(Claim(point), Verdict.NOT_FOUND)
                )
                covered = verdict.verdict in _FAITHFUL
                points.append(
                    replace(
                        verdict,
                        claim=Claim(point),
                        verdict=Verdict.SUPPORTED if covered else Verdict.NOT_FOUND,
                        reason=None if covered else "the answer does not state it",
                        unsupported=(),
                    )
                )
        wants_recall = wants_points and not record.rubric and correctness is not None
        abstained = abstains(answer, checkables)
        answerable = None
        if abstained or ANSWERABILITY_READERS & set(findings):
            indexed = [
                index_context(i, c, self.max_context_chars) for i, c in enumerate(record.contexts)
            ]
            answerable = _answerable(record, indexed)
        # The passages: the model checks the reference against them when a metric needs it.
        contexts, support = local_contexts(
            record,
            self._passages(record.contexts),
            self.check,
            max_chars=self.max_context_chars,
            recall=REFERENCE_SUPPORT in findings,
        )
        return Findings(
            contexts=contexts,
            reference_support=support,
            question_parts=(
                _parts(record, checkables, verdicts) if QUESTION_PARTS in findings else ()
            ),
            required_points=tuple(points),
            recall_hits=correctness.recall_hits if wants_recall and correctness else None,
            reference_claims=tuple(reference_verdicts) if wants_recall else (),
            abstained=abstained,
            answerable=answerable,
        )


def _must_read(
    claims: Sequence[Claim], contradicting: Sequence[Contradiction]
) -> dict[int, list[tuple[int, int, int]]] | None:
    """Per claim index, the passage ranges found contradicting a claim it overlaps."""
    found: dict[int, list[tuple[int, int, int]]] = {}
    for i, claim in enumerate(claims):
        start, end = claim.answer_start, claim.answer_end
        if start is None or end is None:
            continue
        for c in contradicting:
            if c.claim_start < end and start < c.claim_end and c.start < c.end:
                found.setdefault(i, []).append((c.context_index, c.start, c.end))
    return found or None
