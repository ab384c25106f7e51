"""Known models by name: an export of a recommended model is checked against what that
model publishes (its judge, its id2label, a binary model's supported class), with one
line naming config.json when it does not fit. The exports are the tiny models, named
in config.json's ``_name_or_path`` as optimum-cli writes it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests.models.tiny_onnx import write_binary_model, write_nli_model, write_token_model

from ragpulse import errors
from ragpulse.errors import EvalStatus
from ragpulse.evaluation.types import Context, RagRecord, Verdict
from ragpulse.judges.local._known import KNOWN_MODELS, LETTUCEDETECT_TEMPLATE, known_model
from ragpulse.judges.local.nli import NLIJudge
from ragpulse.judges.local.token_classifier import TokenJudge
from ragpulse.judging._factory import JudgeUnavailable, build_judge, judge_from_settings
from ragpulse.settings import Settings

PASSAGE = "Tickets cost ten euros for adults."
TEXTS = [PASSAGE, "Adults pay twelve euros."]
RECORD = RagRecord(None, (Context(PASSAGE),), "Tickets cost ten euros for adults.")


def named(directory: Path, name: str) -> Path:
    """The export as optimum-cli writes it from hub id ``name``."""
    config = json.loads((directory / "config.json").read_text())
    config["_name_or_path"] = name
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def test_the_recommended_models_are_known_by_their_hub_ids() -> None:
    assert set(KNOWN_MODELS) >= {
        "cross-encoder/nli-deberta-v3-xsmall",
        "cross-encoder/nli-deberta-v3-base",
        "lytang/minicheck-deberta-v3-large",
        "krlabsorg/lettucedect-base-modernbert-en-v1",
        "krlabsorg/lettucedect-large-modernbert-en-v1",
    }
    found = known_model("/home/me/.cache/cross-encoder/nli-deberta-v3-base/")
    assert found is not None and found.hub_id == "cross-encoder/nli-deberta-v3-base"
    assert known_model("my-org/my-nli") is None


def test_an_nli_export_with_its_models_labels_loads_and_judges(tmp_path: Path) -> None:
    model = named(write_nli_model(tmp_path, TEXTS), "cross-encoder/nli-deberta-v3-xsmall")
    judge = NLIJudge(model)
    assert judge.problem is None
    assert judge.known is not None and judge.model_name == "cross-encoder/nli-deberta-v3-xsmall"
    [claim] = judge.evaluate_sync(RECORD).claims
    assert claim.verdict is Verdict.SUPPORTED


def test_an_export_whose_labels_are_not_its_models_is_refused_naming_config_json(
    tmp_path: Path,
) -> None:
    # Same three names, another order: each probability would be read as another verdict.
    model = write_nli_model(tmp_path, TEXTS, labels=("entailment", "contradiction", "neutral"))
    named(model, "cross-encoder/nli-deberta-v3-base")
    judge = NLIJudge(model)
    assert judge.problem is not None
    assert judge.problem.startswith(f"{model / 'config.json'}: ")
    assert "cross-encoder/nli-deberta-v3-base's ['contradiction', 'entailment', 'neutral']" in (
        judge.problem
    )
    with pytest.raises(JudgeUnavailable, match=r"config\.json"):
        build_judge("nli", model=str(model))


def test_a_wrong_config_in_a_running_app_records_judge_unavailable_naming_the_file(
    tmp_path: Path,
) -> None:
    model = write_nli_model(tmp_path, TEXTS, labels=("neutral", "entailment", "contradiction"))
    named(model, "cross-encoder/nli-deberta-v3-base")
    judge = judge_from_settings(Settings.load({"judge": "nli", "judge_model": str(model)}, {}))
    evaluation = asyncio.run(judge.evaluate(RECORD, ["faithfulness"]))
    assert evaluation.status is EvalStatus.ERROR
    assert evaluation.error_type == errors.JUDGE_UNAVAILABLE
    assert evaluation.explanation is not None and "config.json" in evaluation.explanation


def test_minicheck_needs_no_label_map_its_class_1_is_supported(tmp_path: Path) -> None:
    model = named(write_binary_model(tmp_path, TEXTS), "lytang/MiniCheck-DeBERTa-v3-Large")
    judge = NLIJudge(model)  # LABEL_0 / LABEL_1 in config.json, as published
    assert judge.problem is None
    [claim] = judge.evaluate_sync(RECORD).claims
    assert claim.verdict is Verdict.SUPPORTED


def test_a_label_map_that_makes_another_class_supported_is_refused_for_minicheck(
    tmp_path: Path,
) -> None:
    model = named(write_binary_model(tmp_path, TEXTS), "lytang/MiniCheck-RoBERTa-Large")
    judge = NLIJudge(model, label_map="0=supported")
    assert judge.problem is not None and "supported class is 1" in judge.problem


def test_a_token_classifier_named_as_such_is_refused_as_an_nli_model(tmp_path: Path) -> None:
    model = write_token_model(tmp_path, TEXTS, labels=("LABEL_0", "LABEL_1"))
    named(model, "KRLabsOrg/lettucedect-base-modernbert-en-v1")
    judge = NLIJudge(model)
    assert judge.problem is not None
    assert "model for --judge tokens, not --judge nli" in judge.problem


def test_lettucedetect_reads_its_own_prompt_layout_and_class_1_as_hallucinated(
    tmp_path: Path,
) -> None:
    words = [*TEXTS, LETTUCEDETECT_TEMPLATE]
    model = write_token_model(tmp_path, words, labels=("LABEL_0", "LABEL_1"), max_length=128)
    named(model, "KRLabsOrg/lettucedect-large-modernbert-en-v1")
    judge = TokenJudge(model)
    assert judge.problem is None and judge.template == LETTUCEDETECT_TEMPLATE
    answer = "Tickets cost twelve euros for adults."
    [claim] = judge.evaluate_sync(RagRecord(None, (Context(PASSAGE),), answer)).claims
    assert claim.verdict is Verdict.NOT_FOUND
    assert [answer[s:e] for s, e in claim.unsupported] == ["twelve"]
    own = TokenJudge(model, template="{contexts}")
    assert own.template == "{contexts}"  # a layout given is kept
