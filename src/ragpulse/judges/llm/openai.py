"""``OpenAIJudge``: an LLM judge on any OpenAI-compatible Chat Completions endpoint.

OpenAI, Azure, vLLM, Ollama, llama.cpp or a LiteLLM proxy: anything that speaks
``POST /v1/chat/completions``. One call decomposes the answer into atomic claims
and judges each against the numbered contexts with a quoted evidence span; a
second call, only when correctness is asked and a reference exists, checks the
answer against the reference in both directions. At most two calls per
evaluation for the answer's metrics; the context metrics (relevance, precision, recall
of the retrieved passages) add one call for all three when asked (``_llm_context``).

What the model says is checked before it counts (``_guard``): a verdict needs a quote
verified in the named context that relates to the claim, the claims must cover the
answer (the offline ``LexicalJudge`` judges whatever they leave out), a verified
contradiction the offline judge finds overrides the model's support (recorded as a
disagreement), and the number of claims is bounded by the answer's length.

The ``openai`` package is the optional extra ``ragpulse[openai]``; it is imported
here and nowhere else.
"""

from __future__ import annotations

import dataclasses
import email.utils
import os
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, TypeVar

import openai
from pydantic import BaseModel, ValidationError

from ragpulse import errors
from ragpulse._secrets import register_secret
from ragpulse.evaluation.claims import anchor
from ragpulse.evaluation.evidence import locate, verify
from ragpulse.evaluation.findings import REFERENCE_AGREEMENT, REQUIRED_POINTS, CorrectnessInputs
from ragpulse.evaluation.types import (
    FAITHFULNESS,
    GROUNDEDNESS,
    AnnotatorKind,
    Claim,
    ClaimVerdict,
    EvalStatus,
    Evaluation,
    RagRecord,
    Usage,
    Verdict,
)
from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.judges.llm._context_call import (
    ContextsJudgement,
    context_findings,
    contexts_prompt,
    wants_context_call,
)
from ragpulse.judges.llm._prompts import (
    Atomicity,
    ClaimJudgement,
    CorrectnessJudgement,
    Coverage,
    JudgedClaim,
    Prompt,
    claims_prompt,
    correctness_prompt,
    new_nonce,
    strict_json_schema,
)
from ragpulse.judges.llm._steering import addresses_the_judge
from ragpulse.judges.llm._vector_call import (
    FIRST_CALL,
    RequiredPoint,
    RubricJudgement,
    VectorClaimJudgement,
    VectorCorrectnessJudgement,
    llm_vector,
    rubric_prompt,
    vector_claims_prompt,
    vector_correctness_prompt,
)
from ragpulse.judges.llm._verify import claim_budget, guard
from ragpulse.metrics._assemble import assemble
from ragpulse.metrics._registry import findings_for
from ragpulse.metrics.correctness import (
    DEFAULT_CORRECTNESS_MODE,
    CorrectnessMode,
    check_correctness_mode,
)
from ragpulse.prompting.parsing import JSONExtractionError, TruncatedJSONError, parse_model

__all__ = ["OpenAIJudge"]

ResponseFormat = Literal["json_schema", "json_object", "auto"]
CorrectnessModeName = CorrectnessMode
"""The correctness modes (``ragpulse.metrics.correctness.CorrectnessMode``)."""

# Local servers (vLLM, Ollama, llama.cpp) accept any key, but the client insists on one.
_PLACEHOLDER_API_KEY = "ragpulse-no-key"

# In "auto" mode, the formats tried in order; "text" sends no response_format at all and
# relies on the prompt and tolerant parsing.
_FORMAT_LADDER: dict[str, tuple[str, ...]] = {
    "auto": ("json_schema", "json_object", "text"),
    "json_schema": ("json_schema",),
    "json_object": ("json_object",),
}
# Words in a 400 reply that say the server rejected the response_format, not the request.
_FORMAT_ERROR_HINTS = ("response_format", "json_schema", "json_object", "schema")

_ModelT = TypeVar("_ModelT", bound=BaseModel)


class _JudgeFailure(Exception):
    """A failed judge call, already classified into ragpulse's error vocabulary."""

    def __init__(self, error_type: str, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.error_type = error_type
        self.message = message
        self.retry_after = retry_after


@dataclass
class _Tally:
    """What one evaluation spent, kept up to date even when a call fails."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    notes: list[str] = field(default_factory=list)

    def usage(self) -> Usage:
        return Usage(self.calls, self.prompt_tokens, self.completion_tokens)


class OpenAIJudge:
    """Judges a ``RagRecord`` with an LLM behind an OpenAI-compatible endpoint.

    ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``;
    without a key, a dummy key is sent (local servers accept any). ``atomicity`` and
    ``coverage`` shape the claim decomposition as in Ragas FactualCorrectness;
    ``correctness_mode`` (``agreement`` by default, or Ragas' ``precision``, ``recall``,
    ``f1``) and ``beta`` choose how correctness scores.

    ``response_format="auto"`` asks for a strict JSON schema first, and when the
    server rejects it, for a JSON object, then for plain text; the first format the
    server accepts is remembered for the judge's lifetime. The client makes no
    retries of its own: ragpulse's worker owns retries, using the ``error_type`` of
    the failed ``Evaluation``. ``evaluate`` never raises.

    ``offline_judge`` (a ``LexicalJudge`` by default) cross-checks the model: it judges
    answer text the model's claims leave out, backs or replaces verdicts whose quotes do
    not hold, and its verified contradictions override the model's support when
    ``conservative`` is true (the default); either way the disagreement is recorded.
    """

    annotator_kind: AnnotatorKind = "LLM"
    label_kind = "openai"
    """Whose label policy its scores are read by (``ragpulse.judges._labels``)."""

    def __init__(
        self,
        model: str = "gpt-4o-mini",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        timeout: float = 30.0,
        max_tokens: int = 2048,
        temperature: float = 0.0,
        atomicity: Atomicity = "low",
        coverage: Coverage = "low",
        correctness_mode: str = DEFAULT_CORRECTNESS_MODE,
        beta: float = 1.0,
        response_format: ResponseFormat = "auto",
        name: str | None = None,
        offline_judge: LexicalJudge | None = None,
        conservative: bool = True,
        strict_quotes: bool | None = None,
    ) -> None:
        if atomicity not in ("low", "high"):
            raise ValueError(f"atomicity must be 'low' or 'high', got {atomicity!r}")
        if coverage not in ("low", "high"):
            raise ValueError(f"coverage must be 'low' or 'high', got {coverage!r}")
        mode = check_correctness_mode(correctness_mode)
        if beta <= 0:
            raise ValueError(f"beta must be positive, got {beta}")
        if response_format not in _FORMAT_LADDER:
            raise ValueError(f"unknown response_format {response_format!r}")
        self.model = model
        self.model_name = model
        """The model written as ``ragpulse.eval.judge.model`` (checked against the generator's
        family)."""
        self.name = name or f"openai:{model}"
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.atomicity: Atomicity = atomicity
        self.coverage: Coverage = coverage
        self.correctness_mode: CorrectnessMode = mode
        self.beta = beta
        self.offline_judge = offline_judge or LexicalJudge()
        self.conservative = conservative
        """Take the offline judge's verified contradiction over the model's support."""
        self.strict_quotes = strict_quotes
        """Hold every quote to the strict checks (True), none (False), or only those of a
        request whose text addresses the judge (None, the default)."""
        self._formats = _FORMAT_LADDER[response_format]
        self._format_index = 0
        self._owns_client = client is None
        # Upstream error messages become explanations; the key must not travel with them.
        register_secret(api_key or (client.api_key if client is not None else None))
        if client is None:
            self._client = openai.AsyncOpenAI(
                api_key=api_key or os.environ.get("OPENAI_API_KEY") or _PLACEHOLDER_API_KEY,
                base_url=base_url or os.environ.get("OPENAI_BASE_URL") or None,
                timeout=timeout,
                max_retries=0,
            )
        else:
            self._client = client.with_options(max_retries=0, timeout=timeout)

    @property
    def response_format(self) -> str:
        """The structured-output format this judge currently asks the server for."""
        return self._formats[self._format_index]

    async def aclose(self) -> None:
        """Close the HTTP client, when this judge created it."""
        if self._owns_client:
            await self._client.close()

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        """Claims, verdicts, verified evidence and the asked metrics; never raises."""
        started = time.perf_counter()
        tally = _Tally()
        try:
            return await self._evaluate(record, metrics, tally, started)
        except _JudgeFailure as failure:
            error_type, message, retry_after = (
                failure.error_type,
                failure.message,
                failure.retry_after,
            )
        except Exception as exc:  # the caller's request must never see our bugs
            error_type, message, retry_after = (
                errors.UNEXPECTED,
                f"{type(exc).__name__}: {exc}",
                None,
            )
        return Evaluation.failed(
            error_type,
            judge=self.name,
            annotator_kind=self.annotator_kind,
            explanation=message,
            usage=tally.usage(),
            duration_ms=_elapsed_ms(started),
            retry_after=retry_after,
        )

    async def _evaluate(
        self, record: RagRecord, metrics: Collection[str], tally: _Tally, started: float
    ) -> Evaluation:
        findings = findings_for(metrics)
        wants_points = REQUIRED_POINTS in findings
        wants_rubric = wants_points and bool(record.rubric)
        # Required points without a rubric are the reference's claims: the reference's call.
        wants_correctness = bool(record.reference) and (
            REFERENCE_AGREEMENT in findings or (wants_points and not record.rubric)
        )
        wants_contexts = wants_context_call(findings, record)
        # Only the context metrics asked (relevance, precision, recall): no claims call.
        wants_claims = bool(FIRST_CALL & findings) or wants_correctness
        if not (wants_claims or wants_rubric or wants_contexts):
            return Evaluation(
                status=EvalStatus.SKIPPED,
                metrics={},
                judge=self.name,
                annotator_kind=self.annotator_kind,
                duration_ms=_elapsed_ms(started),
                explanation="no metric this judge computes was asked",
            )
        answer = record.answer or ""
        claims: list[ClaimVerdict] = []
        disagreement: bool | None = None
        judgement: ClaimJudgement | None = None
        offline_claims: tuple[ClaimVerdict, ...] = ()
        base = claims_prompt(
            record, atomicity=self.atomicity, coverage=self.coverage, nonce=new_nonce()
        )
        if answer.strip() and wants_claims:
            # One call for claims, verdicts, citations, relevancy and answerability.
            prompt = vector_claims_prompt(base, findings)
            budget = claim_budget(answer)
            output = (
                VectorClaimJudgement if prompt.output is VectorClaimJudgement else ClaimJudgement
            )
            judgement = await self._complete(prompt, output, tally, max_items=budget + 1)
            if len(judgement.claims) > budget:
                tally.notes.append(
                    f"the judge listed more than {budget} claims for an answer of "
                    f"{len(answer.split())} words; only the first {budget} were read"
                )
            judged = _claim_verdicts(judgement.claims[:budget], record, answer)
            offline = self.offline_judge.evaluate_sync(record, (FAITHFULNESS, GROUNDEDNESS))
            offline_claims = offline.claims
            strict = self.strict_quotes
            if strict is None:
                steering = addresses_the_judge(record)
                strict = steering is not None
                if steering is not None:
                    tally.notes.append(
                        f"the {steering} addresses the judge; its quotes must state their claims"
                    )
            checked = guard(
                judged,
                offline.claims,
                record.contexts,
                question=record.question,
                answer=answer,
                conservative=self.conservative,
                strict=strict,
            )
            claims, disagreement = checked.verdicts, checked.disagreement
            tally.notes.extend(checked.notes)

        correctness_inputs: CorrectnessInputs | None = None
        reference_claims: tuple[ClaimVerdict, ...] = ()
        points: list[RequiredPoint] | None = None
        # Without answer claims there is nothing to check against the reference. The
        # second call also checks the rubric's points, or is the rubric's own call.
        # An answer without claims still gets the reference's call when completeness rests
        # on the reference: an abstention covers none of its claims.
        completeness_from_reference = wants_points and not record.rubric
        if wants_correctness and (claims or (completeness_from_reference and answer.strip())):
            prompt = correctness_prompt(
                record,
                [verdict.claim.text for verdict in claims],
                atomicity=self.atomicity,
                coverage=self.coverage,
                nonce=new_nonce(),
            )
            if wants_rubric:
                prompt = vector_correctness_prompt(prompt, record)
            checks = await self._complete(prompt, VectorCorrectnessJudgement, tally)
            correctness_inputs, reference_claims = _correctness(checks, len(claims), record)
            points = checks.required_points if wants_rubric else None
        elif wants_rubric:
            rubric = await self._complete(
                rubric_prompt(base, record, new_nonce()), RubricJudgement, tally
            )
            points = rubric.required_points

        # The context metrics' one call (relevance, precision, recall), when asked.
        passages: ContextsJudgement | None = None
        if wants_contexts:
            prompt = contexts_prompt(record, new_nonce())
            passages = await self._complete(prompt, ContextsJudgement, tally)

        cited, found = llm_vector(
            record,
            findings,
            claims,
            judgement,
            offline_claims,
            points=points,
            recall_hits=None if correctness_inputs is None else correctness_inputs.recall_hits,
            reference_claims=reference_claims,
        )
        found = dataclasses.replace(
            found, correctness=correctness_inputs, reference_verdicts=reference_claims
        )
        if passages is not None:
            contexts, support = context_findings(record, passages)
            found = dataclasses.replace(found, contexts=contexts, reference_support=support)
        evaluation = assemble(
            record,
            metrics,
            cited,
            found,
            judge=self.name,
            annotator_kind=self.annotator_kind,
            usage=tally.usage(),
            duration_ms=_elapsed_ms(started),
            correctness_mode=self.correctness_mode,
            beta=self.beta,
        )
        if tally.notes:
            notes = "; ".join(tally.notes)
            explanation = f"{evaluation.explanation}; {notes}" if evaluation.explanation else notes
            evaluation = dataclasses.replace(evaluation, explanation=explanation)
        return dataclasses.replace(evaluation, disagreement=disagreement)

    async def _complete(
        self,
        prompt: Prompt,
        output: type[_ModelT],
        tally: _Tally,
        *,
        max_items: int | None = None,
    ) -> _ModelT:
        """One judge call (plus one per response_format the server rejects), parsed."""
        while True:
            index = self._format_index
            tally.calls += 1
            try:
                response = await self._client.chat.completions.create(
                    model=self.model,
                    messages=prompt.messages(),  # type: ignore[arg-type]
                    temperature=self.temperature,
                    max_tokens=self.max_tokens,
                    timeout=self.timeout,
                    **self._format_arguments(self._formats[index], prompt),
                )
            except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
                if index + 1 < len(self._formats) and _rejects_response_format(exc):
                    # Concurrent evaluations may all see the rejection; step down once.
                    self._format_index = max(self._format_index, index + 1)
                    continue
                raise _classify(exc) from exc
            except openai.OpenAIError as exc:
                raise _classify(exc) from exc
            break

        if response.usage is not None:
            tally.prompt_tokens += response.usage.prompt_tokens or 0
            tally.completion_tokens += response.usage.completion_tokens or 0
        if not response.choices:
            raise _JudgeFailure(errors.SCHEMA_MISMATCH, "the reply has no choices")
        choice = response.choices[0]
        refusal = getattr(choice.message, "refusal", None)
        if refusal:
            raise _JudgeFailure(errors.REFUSAL, f"the judge refused: {refusal}")
        if choice.finish_reason == "content_filter":
            raise _JudgeFailure(errors.REFUSAL, "the reply was stopped by a content filter")
        if choice.finish_reason == "length":
            raise _JudgeFailure(
                errors.TRUNCATED, f"the reply hit max_tokens={self.max_tokens} before it ended"
            )
        content = choice.message.content or ""
        try:
            return parse_model(content, output, max_items=max_items)
        except TruncatedJSONError as exc:
            raise _JudgeFailure(errors.TRUNCATED, str(exc)) from exc
        except (JSONExtractionError, ValidationError) as exc:
            raise _JudgeFailure(
                errors.SCHEMA_MISMATCH, f"the reply does not fit {output.__name__}: {_short(exc)}"
            ) from exc

    @staticmethod
    def _format_arguments(fmt: str, prompt: Prompt) -> dict[str, Any]:
        if fmt == "json_schema":
            return {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {
                        "name": prompt.schema_name,
                        "schema": strict_json_schema(prompt.output),
                        "strict": True,
                    },
                }
            }
        if fmt == "json_object":
            return {"response_format": {"type": "json_object"}}
        return {}


def _claim_verdicts(
    judged_claims: Sequence[JudgedClaim], record: RagRecord, answer: str
) -> list[ClaimVerdict]:
    """The judge's claims with answer offsets and only the evidence that verifies."""
    verdicts: list[ClaimVerdict] = []
    for judged in judged_claims:
        text = judged.claim.strip()
        if not text:
            continue
        # The prompt numbers contexts from 1; a quote counts only in the context it names.
        index = judged.context - 1 if judged.context is not None else None
        evidence = verify(judged.quote, record.contexts, index)
        claim = anchor(text, answer)
        flagged = judged.verdict in (Verdict.NOT_FOUND, Verdict.CONTRADICTED)
        verdicts.append(
            ClaimVerdict(
                claim=claim,
                verdict=judged.verdict,
                evidence=evidence,
                quote=judged.quote,
                reason=judged.reason or None,
                unsupported=_phrase_ranges(judged.unsupported, claim, answer) if flagged else (),
            )
        )
    return verdicts


def _phrase_ranges(
    phrases: Sequence[str], claim: Claim, answer: str
) -> tuple[tuple[int, int], ...]:
    """Answer ranges of the claim's unsupported phrases; a phrase counts only where the
    answer holds it within (or across the edge of) the claim's own range."""
    start, end = claim.answer_start, claim.answer_end
    if start is None or end is None:
        return ()
    ranges = set()
    for phrase in phrases:
        found = locate(phrase, answer[start:end])
        if found is not None:
            ranges.add((start + found[0], start + found[1]))
            continue
        found = locate(phrase, answer)
        if found is not None and found[0] < end and found[1] > start:
            ranges.add(found)
    return tuple(sorted(ranges))


def _correctness(
    checks: CorrectnessJudgement, answer_claims: int, record: RagRecord
) -> tuple[CorrectnessInputs, tuple[ClaimVerdict, ...]]:
    """Precision outcomes aligned with the answer claims, recall hits with the reference's."""
    # A claim the judge left out of its reply counts as not supported, and not as
    # contradicted: the judge said nothing of it.
    precision_hits = [False] * answer_claims
    contradicted = [False] * answer_claims
    conflicts: list[str | None] = [None] * answer_claims
    reference = record.reference or ""
    for check in checks.answer_claims:
        if 1 <= check.number <= answer_claims:
            index = check.number - 1
            precision_hits[index] = check.outcome == "SUPPORTED"
            contradicted[index] = check.outcome == "CONTRADICTED"
            # Only a quote the reference holds is shown as the reference's words.
            span = locate(check.quote or "", reference) if contradicted[index] else None
            if span is not None:
                conflicts[index] = reference[span[0] : span[1]]
    reference_claims = tuple(
        ClaimVerdict(
            # Offsets of a reference claim point into the reference text.
            claim=anchor(check.claim, reference) if reference else Claim(check.claim),
            verdict=Verdict.SUPPORTED if check.covered else Verdict.NOT_FOUND,
            quote=check.quote,
        )
        for check in checks.reference_claims
        if check.claim.strip()
    )
    recall_hits = tuple(verdict.verdict is Verdict.SUPPORTED for verdict in reference_claims)
    inputs = CorrectnessInputs(
        tuple(precision_hits), recall_hits, tuple(contradicted), tuple(conflicts)
    )
    return inputs, reference_claims


def _rejects_response_format(exc: openai.APIStatusError) -> bool:
    body = exc.body if isinstance(exc.body, dict) else {}
    if body.get("param") == "response_format":
        return True
    text = f"{exc.message} {body}".lower()
    return any(hint in text for hint in _FORMAT_ERROR_HINTS)


def _classify(exc: openai.OpenAIError) -> _JudgeFailure:
    """Map a client error onto ragpulse's judge error vocabulary."""
    message = _short(exc)
    if isinstance(exc, openai.APITimeoutError):
        return _JudgeFailure(errors.TIMEOUT, message)
    if isinstance(exc, openai.APIConnectionError):
        return _JudgeFailure(errors.CONNECTION_ERROR, message)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retry_after = _retry_after(exc.response.headers)
        if status == 429:
            return _JudgeFailure(errors.RATE_LIMITED, message, retry_after)
        if status in (401, 403):
            return _JudgeFailure(errors.AUTH_ERROR, message)
        if status == 408:
            return _JudgeFailure(errors.TIMEOUT, message, retry_after)
        if status >= 500:
            return _JudgeFailure(errors.SERVER_ERROR, message, retry_after)
        return _JudgeFailure(errors.BAD_REQUEST, message)
    return _JudgeFailure(errors.UNEXPECTED, message)


def _retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        try:
            return max(0.0, float(milliseconds) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


# Error messages are kept whole up to this bound (memory only): the content policy redacts
# them first and cuts them for display after (``privacy``), so a secret straddling a cut
# cannot leave half-redacted.
_MESSAGE_CHARS = 65_536


def _short(exc: BaseException, limit: int = _MESSAGE_CHARS) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _elapsed_ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
