"""The export content policy: what of an evaluation may leave, and credentials never do."""

from __future__ import annotations

import io
import logging
import re
from dataclasses import replace

import pytest

from ragpulse._guard import ThrottleFilter
from ragpulse._secrets import REDACTED_SECRET, register_secret, scrub_secrets
from ragpulse.capture._content import ContentPolicy
from ragpulse.evaluation.types import (
    CORRECTNESS,
    FAITHFULNESS,
    GROUNDEDNESS,
    Claim,
    ClaimVerdict,
    EvalStatus,
    Evaluation,
    Evidence,
    MetricResult,
    Verdict,
)
from ragpulse.metrics._assemble import apply_strict
from ragpulse.signals.emit import MAX_EXPLANATION, EmitOptions, span_attributes
from ragpulse.signals.privacy import export_evaluation

SSN = "078-05-1120"
NO_CONTENT = ContentPolicy(capture_content=False)
REDACT = ContentPolicy(redact=lambda text: re.sub(r"\d{3}-\d{2}-\d{4}", "[SSN]", text))


def _evaluation() -> Evaluation:
    # Answer: "Ann's number is 078-05-1120. She lives in Berlin."
    # Context: "Ann's number is 078-05-1120. She lives in Paris."
    supported = ClaimVerdict(
        Claim(f"Ann's number is {SSN}.", 0, 28),
        Verdict.SUPPORTED,
        Evidence(0, 0, 27, f"Ann's number is {SSN}"),
        quote=f"Ann's number is {SSN}",
        reason=f"the context states {SSN}",
    )
    contradicted = ClaimVerdict(
        Claim("She lives in Berlin.", 29, 49),
        Verdict.CONTRADICTED,
        Evidence(0, 29, 48, "She lives in Paris."),
    )
    raw = f"unsupported: '{SSN}'"
    return Evaluation(
        status=EvalStatus.OK,
        metrics={
            FAITHFULNESS: MetricResult(FAITHFULNESS, 0.5, raw),
            GROUNDEDNESS: MetricResult(GROUNDEDNESS, 0.5, raw),
            CORRECTNESS: MetricResult(CORRECTNESS, 1.0, f"missing from the answer: '{SSN}'"),
        },
        claims=(supported, contradicted),
        reference_claims=(ClaimVerdict(Claim(f"Her number is {SSN}.", 0, 25), Verdict.SUPPORTED),),
        judge="test",
        explanation=raw,
    )


@pytest.mark.parametrize("policy", [NO_CONTENT, REDACT], ids=["no-content", "redact"])
def test_no_text_of_an_exported_evaluation_carries_the_raw_content(policy: ContentPolicy) -> None:
    exported = export_evaluation(_evaluation(), policy)
    assert SSN not in repr(exported)
    assert SSN not in repr(span_attributes(exported, EmitOptions(inline_annotations=True)))


def test_export_keeps_scores_verdicts_offsets_and_evidence_positions() -> None:
    original = _evaluation()
    exported = export_evaluation(original, NO_CONTENT)
    assert {n: m.score for n, m in exported.metrics.items()} == {
        n: m.score for n, m in original.metrics.items()
    }
    for before, after in zip(original.claims, exported.claims, strict=True):
        assert after.verdict is before.verdict
        assert (after.claim.answer_start, after.claim.answer_end) == (
            before.claim.answer_start,
            before.claim.answer_end,
        )
        assert before.evidence is not None and after.evidence is not None
        assert (after.evidence.start, after.evidence.end) == (
            before.evidence.start,
            before.evidence.end,
        )


def test_without_content_a_claim_is_its_length_only() -> None:
    exported = export_evaluation(_evaluation(), NO_CONTENT)
    assert [c.claim.text for c in exported.claims] == [
        "[withheld: 28 chars]",
        "[withheld: 20 chars]",
    ]
    assert exported.claims[0].quote is None and exported.claims[0].reason is None


def test_explanations_name_the_failing_claim_and_its_verdict_under_the_policy() -> None:
    redacted = export_evaluation(_evaluation(), REDACT).metrics[FAITHFULNESS].explanation
    assert redacted == (
        "1 of 2 claims supported or inferred from the contexts; failing claims: "
        '#2 CONTRADICTED "She lives in Berlin." against context 1 "She lives in Paris."'
    )
    withheld = export_evaluation(_evaluation(), NO_CONTENT).metrics[GROUNDEDNESS].explanation
    assert withheld == (
        "1 of 2 claims supported by a verified span; failing claims: "
        "#2 CONTRADICTED (answer chars 29-49) against context 1 chars 29-48"
    )


def test_a_judge_error_message_is_withheld_without_content_and_redacted_with_a_hook() -> None:
    failed = Evaluation.failed(
        "schema_mismatch", judge="j", annotator_kind="LLM", explanation=f"input_value='{SSN}'"
    )
    assert export_evaluation(failed, NO_CONTENT).explanation == (
        "schema_mismatch (message [withheld: 25 chars])"
    )
    assert export_evaluation(failed, REDACT).explanation == "input_value='[SSN]'"


def test_a_secret_across_the_display_cut_of_an_error_message_is_redacted_whole() -> None:
    message = "x" * 295 + f" {SSN} rest of the upstream message"
    failed = Evaluation.failed(
        "schema_mismatch", judge="j", annotator_kind="LLM", explanation=message
    )
    explanation = export_evaluation(failed, REDACT).explanation
    assert explanation is not None and len(explanation) <= 300
    assert not re.search(r"\d", explanation)


def test_exporting_twice_changes_nothing() -> None:
    for policy in (NO_CONTENT, REDACT):
        once = export_evaluation(_evaluation(), policy)
        assert export_evaluation(once, policy) == once
    failed = Evaluation.failed("auth_error", judge="j", annotator_kind="LLM", explanation="x" * 9)
    once = export_evaluation(failed, NO_CONTENT)
    assert export_evaluation(once, NO_CONTENT) == once


def test_a_failing_redact_hook_exports_a_marker_not_the_text() -> None:
    def broken(text: str) -> str:
        raise RuntimeError("hook bug")

    exported = export_evaluation(_evaluation(), ContentPolicy(redact=broken))
    assert SSN not in repr(exported)
    assert exported.claims[0].claim.text == "[redaction failed]"


def test_no_claims_keeps_its_fixed_explanation_without_content() -> None:
    evaluation = Evaluation(
        status=EvalStatus.NO_CLAIMS,
        metrics={GROUNDEDNESS: MetricResult(GROUNDEDNESS, None, "none", EvalStatus.NO_CLAIMS)},
        explanation="none",
    )
    exported = export_evaluation(evaluation, NO_CONTENT)
    assert exported.metrics[GROUNDEDNESS].explanation == "the answer has no claims to check"


# --- credentials ---------------------------------------------------------------------------


def test_bearer_tokens_sk_keys_and_key_value_pairs_are_scrubbed() -> None:
    text = (
        "Incorrect API key provided: sk-proj-abc1***************wxyz. "
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig api_key=hunter2hunter2"
    )
    scrubbed = scrub_secrets(text)
    for secret in ("sk-proj-abc1", "eyJhbGciOiJIUzI1NiJ9", "hunter2hunter2"):
        assert secret not in scrubbed
    assert "Incorrect API key provided: " + REDACTED_SECRET in scrubbed


def test_a_registered_or_environment_key_is_scrubbed_whatever_its_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    register_secret("0f3c9b7e2d4a6c8e0f1a3b5c7d9e1f2a")
    monkeypatch.setenv("OPENAI_API_KEY", "plain-looking-key-42")
    scrubbed = scrub_secrets("keys 0f3c9b7e2d4a6c8e0f1a3b5c7d9e1f2a and plain-looking-key-42")
    assert scrubbed == f"keys {REDACTED_SECRET} and {REDACTED_SECRET}"


def test_short_keys_are_not_scrubbed_as_literals() -> None:
    register_secret("test")
    assert scrub_secrets("a test message") == "a test message"


def test_error_messages_are_scrubbed_even_with_content_on() -> None:
    failed = Evaluation.failed(
        "auth_error", judge="j", annotator_kind="LLM", explanation="bad key sk-live-9f8e7d6c5b4a"
    )
    assert export_evaluation(failed, ContentPolicy()).explanation == (f"bad key {REDACTED_SECRET}")


def test_ragpulse_log_lines_are_scrubbed_as_a_handler_writes_them() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    ours, theirs = logging.getLogger("ragpulse.worker"), logging.getLogger("app")
    for logger in (ours, theirs):
        logger.addHandler(handler)
    try:
        try:
            raise ValueError("upstream said Bearer abcdef123456789")
        except ValueError as exc:
            ours.warning("judge raised %r", exc, exc_info=True)
        theirs.warning("token Bearer abcdef123456789")
    finally:
        for logger in (ours, theirs):
            logger.removeHandler(handler)
    written = stream.getvalue()
    ragpulse_part, app_part = written.split("\napp ")
    assert "abcdef123456789" not in ragpulse_part
    assert "judge raised ValueError('upstream said Bearer [redacted secret]')" in ragpulse_part
    assert "Traceback" in ragpulse_part
    assert "abcdef123456789" in app_part


def test_scrubbing_keeps_the_template_so_the_throttle_counts_repeats() -> None:
    logger = logging.getLogger("ragpulse.privacy-throttle-test")
    throttle = ThrottleFilter(window=60.0)
    logger.addFilter(throttle)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    try:
        for attempt in range(3):
            logger.warning("judge failed on try %d: %s", attempt, f"sk-live-{attempt}abcdefgh")
    finally:
        logger.removeHandler(handler)
        logger.removeFilter(throttle)
    assert stream.getvalue() == f"judge failed on try 0: {REDACTED_SECRET}\n"


def test_a_long_list_of_failing_claims_fits_the_explanation_cap_and_counts_the_rest() -> None:
    claims = tuple(
        ClaimVerdict(
            Claim(f"Claim number {i} " + "word " * 60, i * 400, i * 400 + 300), Verdict.NOT_FOUND
        )
        for i in range(50)
    )
    evaluation = Evaluation(
        status=EvalStatus.OK,
        metrics={FAITHFULNESS: MetricResult(FAITHFULNESS, 0.0, "raw")},
        claims=claims,
    )
    explanation = export_evaluation(evaluation, ContentPolicy()).metrics[FAITHFULNESS].explanation
    assert explanation is not None
    assert len(explanation) <= MAX_EXPLANATION
    assert explanation.startswith("0 of 50 claims supported or inferred from the contexts")
    assert '#1 NOT_FOUND "Claim number 0 word' in explanation
    assert explanation.endswith(" more")


def test_the_llm_judge_keeps_an_error_message_whole_for_the_policy_to_redact() -> None:
    from ragpulse.judges.llm.openai import _short

    message = _short(ValueError("x" * 295 + f" {SSN} and more"))
    assert SSN in message  # the hook sees the whole secret; the display cut comes after it


def _context_recall_evaluation(policy: ContentPolicy) -> object:
    from ragpulse.evaluation.types import Context, RagRecord
    from ragpulse.judges.lexical.judge import LexicalJudge

    record = RagRecord(
        "What is the account holder's SSN?",
        (Context("The account was opened in 2019."),),
        "The account was opened in 2019.",
        reference="The account was opened in 2019. The SSN is 123-45-6789.",
    )
    judged = LexicalJudge().evaluate_sync(record, ("context_recall", "context_relevance"))
    return export_evaluation(judged, policy)


def test_context_recall_names_the_missing_reference_claim_only_as_the_policy_allows() -> None:
    withheld = _context_recall_evaluation(NO_CONTENT)
    redacted = _context_recall_evaluation(REDACT)
    for exported in (withheld, redacted):
        text = exported.metrics["context_recall"].explanation  # type: ignore[attr-defined]
        assert text.startswith("1 of 2 reference claims found in the passages")
        assert "123-45-6789" not in text
    assert "[SSN]" in redacted.metrics["context_recall"].explanation  # type: ignore[attr-defined]
    assert "reference chars" in withheld.metrics["context_recall"].explanation  # type: ignore[attr-defined]
    # Context relevance speaks of passages by number: nothing of the request to withhold.
    relevance = withheld.metrics["context_relevance"].explanation  # type: ignore[attr-defined]
    assert relevance.startswith("mean relevance")


def test_strict_mode_explains_the_inferred_claims_as_failing_under_the_policy() -> None:
    inferred = ClaimVerdict(Claim(f"So {SSN} is hers.", 29, 49), Verdict.INFERRED)
    lenient = replace(
        _evaluation(),
        claims=(_evaluation().claims[0], inferred),
        metrics={FAITHFULNESS: MetricResult(FAITHFULNESS, 1.0, "2 of 2")},
    )
    strict = apply_strict(lenient)
    assert strict.score(FAITHFULNESS) == 0.5
    explanation = export_evaluation(strict, NO_CONTENT).metrics[FAITHFULNESS].explanation
    assert explanation == (
        "strict: 1 of 2 claims supported by the contexts (inferred claims count as "
        "unfaithful); failing claims: #2 INFERRED (answer chars 29-49)"
    )
    redacted = export_evaluation(strict, REDACT).metrics[FAITHFULNESS].explanation or ""
    assert '#2 INFERRED "So [SSN] is hers."' in redacted and SSN not in redacted
