"""Time limits that fit the judge: a local model's default evaluation timeout follows its
estimated cost, and a configured timeout below that estimate is warned about once."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.models.tiny_onnx import write_nli_model

from ragpulse.judges.lexical.judge import LexicalJudge
from ragpulse.judges.local._cost import BASE_SIZE, TYPICAL_RECORD, encoder_flops
from ragpulse.judges.local._cost import estimated_seconds as estimate
from ragpulse.judges.local.nli import NLIJudge
from ragpulse.processor import EvaluatingSpanProcessor
from ragpulse.settings import DEFAULT_EVALUATION_TIMEOUT, LOCAL_TIMEOUT_HEADROOM, Settings

LARGE = {"num_hidden_layers": 24, "hidden_size": 1024, "intermediate_size": 4096}


def sized(directory: Path, size: dict[str, int]) -> Path:
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, **size}))
    return directory


def test_an_encoders_flops_follow_its_size() -> None:
    # One base layer over 128 tokens: the projections, then the two n x n products.
    assert encoder_flops(128, (1, 768, 3072)) == 2 * 128 * (4 * 768**2 + 2 * 768 * 3072) + (
        4 * 128**2 * 768
    )
    assert encoder_flops(128, BASE_SIZE) == 12 * encoder_flops(128, (1, 768, 3072))


def test_the_default_timeout_follows_the_judge_kind(tmp_path: Path) -> None:
    settings = Settings.load({}, environ={})
    assert settings.evaluation_timeout_for(LexicalJudge()) == DEFAULT_EVALUATION_TIMEOUT
    tiny = NLIJudge(write_nli_model(tmp_path / "tiny", ["a b"]), threads=1)
    assert settings.evaluation_timeout_for(tiny) == DEFAULT_EVALUATION_TIMEOUT  # it costs nothing
    large = NLIJudge(sized(write_nli_model(tmp_path / "large", ["a b"]), LARGE), threads=1)
    seconds = estimate(large)
    sequences, tokens = TYPICAL_RECORD["nli"]
    assert seconds == pytest.approx(
        sequences * encoder_flops(tokens / sequences, (24, 1024, 4096)) / 20e9
    )
    assert settings.evaluation_timeout_for(large) >= LOCAL_TIMEOUT_HEADROOM * seconds
    assert settings.evaluation_timeout_for(large) > DEFAULT_EVALUATION_TIMEOUT
    configured = Settings.load({"evaluation_timeout": 7.0}, environ={})
    assert configured.evaluation_timeout_for(large) == 7.0  # the user's value stands


def test_a_configured_timeout_below_the_estimate_is_warned_about_once_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    large = NLIJudge(sized(write_nli_model(tmp_path / "large", ["a b"]), LARGE), threads=1)
    settings = Settings.load({"evaluation_timeout": 5.0}, environ={})
    with caplog.at_level(logging.WARNING, logger="ragpulse.settings"):
        for _ in range(3):
            processor = EvaluatingSpanProcessor.from_settings(
                SimpleSpanProcessor(InMemorySpanExporter()), settings, judge=large
            )
            processor.shutdown()
    warned = [r for r in caplog.records if "evaluation_timeout=5s" in r.getMessage()]
    assert len(warned) == 1
    assert "needs about" in warned[0].getMessage()
    unset = Settings.load({}, environ={})
    assert unset.check_judge_cost(large) is None  # the default follows the model


@pytest.mark.parametrize(
    "size",
    [
        {"num_hidden_layers": 10**400},
        {"hidden_size": 10**30},
        {"intermediate_size": 2**64},
    ],
)
def test_a_config_json_stating_absurd_sizes_makes_the_model_unavailable_not_an_overflow(
    tmp_path: Path, size: dict[str, int]
) -> None:
    judge = NLIJudge(sized(write_nli_model(tmp_path / "absurd", ["a b"]), {**LARGE, **size}))
    assert judge.problem is not None
    assert f"{next(iter(size))} larger than any encoder's" in judge.problem
    assert estimate(judge) is None  # no cost is estimated from it
    settings = Settings.load({}, environ={})
    assert settings.evaluation_timeout_for(judge) == DEFAULT_EVALUATION_TIMEOUT
    processor = EvaluatingSpanProcessor.from_settings(
        SimpleSpanProcessor(InMemorySpanExporter()), settings, judge=judge
    )
    processor.shutdown()
