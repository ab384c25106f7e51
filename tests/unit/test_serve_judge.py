"""How ``ragpulse serve`` runs its judge: a CPU-bound one in at most one process per CPU."""

from __future__ import annotations

from collections.abc import Collection

from ragpulse.evaluation.types import EvalStatus, Evaluation, RagRecord
from ragpulse.judges import LexicalJudge, ResilientJudge
from ragpulse.judges.process import ProcessJudge, available_cpus
from ragpulse.serve._judge import serve_judge, serve_settings
from ragpulse.settings import Settings


class WaitingJudge:
    """A judge that waits on the network (not CPU-bound)."""

    name = "waiting"
    annotator_kind = "LLM"

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        return Evaluation(status=EvalStatus.OK, metrics={}, judge=self.name, annotator_kind="LLM")


def test_a_cpu_bound_judge_gets_no_more_processes_than_cpus() -> None:
    settings = Settings(sample_rate=0.5, concurrency=available_cpus() + 3)
    assert serve_settings(LexicalJudge(), settings).concurrency == available_cpus()


def test_fewer_processes_asked_for_than_cpus_are_what_it_gets() -> None:
    settings = Settings(sample_rate=1.0, concurrency=1)
    assert serve_settings(LexicalJudge(), settings) == settings


def test_a_judge_that_waits_rather_than_computes_keeps_its_concurrency() -> None:
    settings = Settings(sample_rate=1.0, concurrency=64)
    assert serve_settings(WaitingJudge(), settings) == settings


def test_at_rate_zero_the_capped_processes_wait_for_a_record() -> None:
    judge = LexicalJudge()
    settings = serve_settings(judge, Settings(sample_rate=0.0, concurrency=available_cpus() + 1))
    served = serve_judge(judge, settings)
    try:
        assert isinstance(served, ResilientJudge)
        processes = served._run_primary
        assert isinstance(processes, ProcessJudge)
        assert processes.processes == available_cpus()
        assert processes.running == 0
    finally:
        assert isinstance(served, ResilientJudge)
        served.close()
