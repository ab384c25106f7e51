"""Where a local model runs: providers (a missing one noted, the CPU kept), threads from
the CPU quota, and int8-quantized models, on the tiny models built here."""

from __future__ import annotations

import logging
from pathlib import Path

import onnx
import onnxruntime
import pytest
from tests.models.tiny_onnx import quantize, write_nli_model

from ragpulse.evaluation.types import Context, RagRecord, Verdict
from ragpulse.judges._cpus import available_cpus
from ragpulse.judges.local._device import (
    CPU,
    requested_providers,
    session_threads,
    usable_providers,
)
from ragpulse.judges.local.nli import NLIJudge
from ragpulse.judging._factory import judge_from_settings, judge_notes
from ragpulse.settings import Settings

PASSAGES = ("Tickets cost ten euros for adults.", "The cafe was denied a permit.")
ANSWER = "Tickets cost ten euros for adults. The cafe has a permit."
MISSING = "NoSuchExecutionProvider"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_nli_model(tmp_path_factory.mktemp("nli"), [*PASSAGES, ANSWER], max_length=64)


def verdicts(judge: NLIJudge) -> list[Verdict]:
    judged = judge.evaluate_sync(RagRecord(None, tuple(Context(p) for p in PASSAGES), ANSWER))
    return [c.verdict for c in judged.claims]


EXPECTED = [Verdict.SUPPORTED, Verdict.CONTRADICTED]


def test_device_names_are_provider_lists() -> None:
    assert requested_providers("cpu") == (CPU,)
    assert requested_providers("cuda") == ("CUDAExecutionProvider", CPU)
    assert requested_providers("tensorrt, cuda") == (
        "TensorrtExecutionProvider",
        "CUDAExecutionProvider",
    )
    assert requested_providers(["OpenVINOExecutionProvider"]) == ("OpenVINOExecutionProvider",)
    with pytest.raises(ValueError, match="names no onnxruntime provider"):
        requested_providers(" , ")


def test_a_missing_provider_is_dropped_with_a_note_and_the_cpu_kept() -> None:
    providers, note = usable_providers(("CUDAExecutionProvider", CPU), (CPU,))
    assert providers == (CPU,)
    assert note is not None and "CUDAExecutionProvider" in note and "onnxruntime-gpu" in note
    assert usable_providers((CPU,), ("AzureExecutionProvider", CPU)) == ((CPU,), None)


def test_a_judge_asking_for_a_provider_onnxruntime_lacks_judges_on_the_cpu(
    model_dir: Path,
) -> None:
    assert MISSING not in onnxruntime.get_available_providers()
    judge = NLIJudge(model_dir, device=f"{MISSING},CPUExecutionProvider")
    assert judge.problem is None
    assert judge.device_note is not None and MISSING in judge.device_note
    assert judge_notes(judge) == [judge.device_note]
    assert verdicts(judge) == EXPECTED
    assert judge.model._session.get_providers() == [CPU]


def test_a_running_service_with_a_missing_provider_warns_once_and_keeps_judging(
    model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings.load(
        {"judge": "nli", "judge_model": str(model_dir), "judge_device": MISSING}, environ={}
    )
    with caplog.at_level(logging.WARNING):
        judge = judge_from_settings(settings)
    warned = [r for r in caplog.records if MISSING in r.getMessage()]
    assert len(warned) == 1
    assert isinstance(judge, NLIJudge) and verdicts(judge) == EXPECTED


def test_without_a_thread_count_a_session_takes_its_share_of_the_cpu_quota(
    model_dir: Path,
) -> None:
    assert session_threads(3, processes=8) == 3
    assert session_threads(None, processes=1) == available_cpus()
    assert session_threads(None, processes=available_cpus() * 4) == 1
    judge = NLIJudge(model_dir)
    verdicts(judge)
    options = judge.model._session.get_session_options()
    assert options.intra_op_num_threads == available_cpus()
    shared = NLIJudge(model_dir, processes=available_cpus() + 1)
    verdicts(shared)
    assert shared.model._session.get_session_options().intra_op_num_threads == 1


def test_an_int8_quantized_model_loads_and_gives_the_same_verdicts(
    model_dir: Path, tmp_path: Path
) -> None:
    quantized = quantize(model_dir, tmp_path / "int8")
    ops = {node.op_type for node in onnx.load(str(quantized / "model.onnx")).graph.node}
    assert "MatMulInteger" in ops or "DynamicQuantizeLinear" in ops  # int8 arithmetic
    judge = NLIJudge(quantized)
    assert judge.problem is None
    assert verdicts(judge) == EXPECTED


def test_a_directory_with_only_model_quantized_onnx_is_read(
    model_dir: Path, tmp_path: Path
) -> None:
    quantized = quantize(model_dir, tmp_path / "optimum")
    (quantized / "model.onnx").rename(quantized / "model_quantized.onnx")
    judge = NLIJudge(quantized)
    assert judge.problem is None
    assert judge.model.directory.model_file == "model_quantized.onnx"
    assert verdicts(judge) == EXPECTED
