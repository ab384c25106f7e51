"""EvalSampler: deterministic by trace id, rules and the adaptive boost; it carries the caps
that the processor enforces (tests/unit/test_processor_budgets.py) but holds no budget."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.sampling import Decision as OtelDecision
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

import ragpulse.sampling.sampler
from ragpulse import errors, semconv
from ragpulse.sampling.sampler import Decision, EvalSampler

# Where this ragpulse was imported from, so the child process imports the same code.
PACKAGE_ROOT = Path(ragpulse.sampling.sampler.__file__).resolve().parents[1]


class ManualClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _trace_ids(count: int, seed: int = 7) -> list[int]:
    rng = random.Random(seed)
    return [rng.getrandbits(128) for _ in range(count)]


def _selected(sampler: EvalSampler, ids: list[int]) -> set[int]:
    return {i for i in ids if sampler.should_evaluate(i).evaluate}


def test_same_trace_id_gets_the_same_decision_from_every_sampler() -> None:
    ids = _trace_ids(2000)
    assert _selected(EvalSampler(0.3), ids) == _selected(EvalSampler(0.3), ids)


def test_same_trace_id_gets_the_same_decision_in_another_process() -> None:
    ids = _trace_ids(300)
    script = (
        "import sys\n"
        "from ragpulse.sampling.sampler import EvalSampler\n"
        "s = EvalSampler(0.5)\n"
        "ids = [int(x) for x in sys.stdin.read().split()]\n"
        "print(' '.join('1' if s.should_evaluate(i).evaluate else '0' for i in ids))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        input=" ".join(map(str, ids)),
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(PACKAGE_ROOT), "PYTHONHASHSEED": "12345"},
    ).stdout.split()
    here = EvalSampler(0.5)
    assert out == ["1" if here.should_evaluate(i).evaluate else "0" for i in ids]


def test_rate_selects_that_share_of_random_trace_ids() -> None:
    ids = _trace_ids(20_000)
    share = len(_selected(EvalSampler(0.2), ids)) / len(ids)
    assert share == pytest.approx(0.2, abs=0.015)


def test_decisions_agree_with_opentelemetry_trace_id_ratio_sampler() -> None:
    ids = _trace_ids(5000)
    otel = TraceIdRatioBased(0.37)
    ours = EvalSampler(0.37)
    for trace_id in ids:
        kept = otel.should_sample(None, trace_id, "x").decision is OtelDecision.RECORD_AND_SAMPLE
        assert ours.should_evaluate(trace_id).evaluate is kept


def test_a_trace_sampled_at_a_lower_rate_is_sampled_at_every_higher_rate() -> None:
    ids = _trace_ids(5000)
    at_01 = _selected(EvalSampler(0.1), ids)
    at_02 = _selected(EvalSampler(0.2), ids)
    assert at_01
    assert at_01 < at_02


def test_only_the_low_64_bits_of_the_trace_id_decide() -> None:
    sampler = EvalSampler(0.5)
    low = 0x0123_4567_89AB_CDEF
    assert sampler.should_evaluate(low) == sampler.should_evaluate((0xFFFF << 64) | low)


def test_rate_zero_evaluates_nothing_and_rate_one_everything() -> None:
    ids = _trace_ids(1000)
    assert _selected(EvalSampler(0.0), ids) == set()
    assert _selected(EvalSampler(1.0), ids) == set(ids)


def test_sampled_decision_says_evaluated() -> None:
    assert EvalSampler(1.0).should_evaluate(5) == Decision(True, errors.REASON_EVALUATED)


def test_unsampled_decision_says_not_sampled() -> None:
    assert EvalSampler(0.0).should_evaluate(5) == Decision(False, errors.REASON_NOT_SAMPLED)


def test_force_attribute_evaluates_an_unsampled_trace() -> None:
    decision = EvalSampler(0.0).should_evaluate(5, attributes={semconv.RAG_FORCE_EVALUATION: True})
    assert decision == Decision(True, errors.REASON_FORCED)


@pytest.mark.parametrize("value", [False, 0, "false", "0", ""])
def test_falsy_force_attribute_does_not_force(value: object) -> None:
    decision = EvalSampler(0.0).should_evaluate(5, attributes={semconv.RAG_FORCE_EVALUATION: value})
    assert decision.reason == errors.REASON_NOT_SAMPLED


def test_custom_force_attribute_is_the_one_read() -> None:
    sampler = EvalSampler(0.0, force_attribute="app.feedback.negative")
    assert sampler.should_evaluate(5, attributes={"app.feedback.negative": "true"}).evaluate
    assert not sampler.should_evaluate(5, attributes={semconv.RAG_FORCE_EVALUATION: True}).evaluate


def test_always_evaluate_glob_matches_the_unit_name() -> None:
    sampler = EvalSampler(0.0, always_evaluate=["billing.*", "refunds"])
    assert sampler.should_evaluate(5, name="billing.answer").reason == errors.REASON_FORCED
    assert sampler.should_evaluate(5, name="refunds").reason == errors.REASON_FORCED
    assert sampler.should_evaluate(5, name="refunds2").reason == errors.REASON_NOT_SAMPLED
    assert sampler.should_evaluate(5, name="support").reason == errors.REASON_NOT_SAMPLED


def test_always_evaluate_glob_matches_the_http_route() -> None:
    sampler = EvalSampler(0.0, always_evaluate=["/v1/billing/*"])
    decision = sampler.should_evaluate(
        5, name="answer", attributes={semconv.HTTP_ROUTE: "/v1/billing/{id}"}
    )
    assert decision.reason == errors.REASON_FORCED


def test_sampler_holds_no_budget_its_decisions_never_run_out() -> None:
    sampler = EvalSampler(1.0, max_evaluations_per_minute=2, clock=ManualClock())
    forced = {semconv.RAG_FORCE_EVALUATION: True}
    assert {sampler.should_evaluate(i).reason for i in range(50)} == {errors.REASON_EVALUATED}
    assert {sampler.should_evaluate(i, attributes=forced).reason for i in range(50)} == {
        errors.REASON_FORCED
    }


def test_sampler_carries_the_caps_for_the_processor() -> None:
    clock = ManualClock()
    sampler = EvalSampler(
        0.2, max_evaluations_per_minute=120, max_judge_tokens_per_hour=500_000, clock=clock
    )
    assert sampler.max_evaluations_per_minute == 120
    assert sampler.max_judge_tokens_per_hour == 500_000
    assert sampler.clock is clock
    assert EvalSampler().max_evaluations_per_minute is None
    assert EvalSampler().max_judge_tokens_per_hour is None


@pytest.mark.parametrize("cap", ["max_evaluations_per_minute", "max_judge_tokens_per_hour"])
@pytest.mark.parametrize("value", [0, -1, float("nan")])
def test_a_cap_that_is_not_positive_is_refused(cap: str, value: float) -> None:
    with pytest.raises(ValueError):
        EvalSampler(**{cap: value})


def test_low_recent_groundedness_boosts_the_rate() -> None:
    sampler = EvalSampler(0.1, adaptive_threshold=0.7, adaptive_rate=0.5, adaptive_window=4)
    assert sampler.effective_rate == 0.1
    for score in (0.9, 0.4, 0.5, 0.6):
        sampler.record_score(score)
    assert sampler.effective_rate == 0.5
    ids = _trace_ids(20_000)
    assert len(_selected(sampler, ids)) / len(ids) == pytest.approx(0.5, abs=0.015)


def test_boost_ends_when_the_recent_mean_recovers() -> None:
    sampler = EvalSampler(0.1, adaptive_threshold=0.7, adaptive_rate=0.5, adaptive_window=3)
    for score in (0.2, 0.2, 0.2):
        sampler.record_score(score)
    assert sampler.effective_rate == 0.5
    for score in (0.9, 0.9, 0.9):
        sampler.record_score(score)
    assert sampler.effective_rate == 0.1


def test_boost_keeps_every_trace_the_base_rate_selected() -> None:
    ids = _trace_ids(5000)
    base = _selected(EvalSampler(0.1), ids)
    boosted_sampler = EvalSampler(0.1, adaptive_threshold=0.7, adaptive_rate=0.3)
    boosted_sampler.record_score(0.0)
    assert base < _selected(boosted_sampler, ids)


def test_boost_never_lowers_a_higher_base_rate() -> None:
    sampler = EvalSampler(0.8, adaptive_threshold=0.7, adaptive_rate=0.3)
    sampler.record_score(0.0)
    assert sampler.effective_rate == 0.8


def test_undefined_scores_do_not_move_the_boost() -> None:
    sampler = EvalSampler(0.1, adaptive_threshold=0.7, adaptive_rate=0.5, adaptive_window=2)
    sampler.record_score(0.9)
    sampler.record_score(None)
    sampler.record_score(float("nan"))
    assert sampler.effective_rate == 0.1


def test_without_a_threshold_scores_never_boost() -> None:
    sampler = EvalSampler(0.1)
    sampler.record_score(0.0)
    assert sampler.effective_rate == 0.1


def test_from_env_reads_ragpulse_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(semconv.ENV_SAMPLE_RATE, "0.0")
    monkeypatch.setenv(semconv.ENV_MAX_EVALUATIONS_PER_MINUTE, "1")
    monkeypatch.setenv(semconv.ENV_MAX_JUDGE_TOKENS_PER_HOUR, "100")
    sampler = EvalSampler.from_env(clock=ManualClock())
    assert sampler.rate == 0.0
    assert sampler.max_evaluations_per_minute == 1
    assert sampler.max_judge_tokens_per_hour == 100


def test_keyword_arguments_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(semconv.ENV_SAMPLE_RATE, "0.0")
    assert EvalSampler.from_env(rate=1.0).rate == 1.0


@pytest.mark.parametrize("raw", ["lots", "1.5", "-0.1"])
def test_unusable_sample_rate_in_the_environment_is_ignored(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv(semconv.ENV_SAMPLE_RATE, raw)
    assert EvalSampler.from_env().rate == 1.0


@pytest.mark.parametrize("raw", ["lots", "0", "-3"])
def test_unusable_budget_in_the_environment_is_ignored(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv(semconv.ENV_MAX_EVALUATIONS_PER_MINUTE, raw)
    assert EvalSampler.from_env().max_evaluations_per_minute is None


@pytest.mark.parametrize("rate", [-0.1, 1.01, float("nan")])
def test_a_rate_outside_zero_to_one_is_refused(rate: float) -> None:
    with pytest.raises(ValueError):
        EvalSampler(rate)
