"""How ``ragpulse serve`` runs its judge: a CPU-bound one in at most one process per CPU."""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

import pytest

from ragpulse.evaluation.types import EvalStatus, Evaluation, RagRecord
from ragpulse.judges import LexicalJudge
from ragpulse.judges._cpus import available_cpus
from ragpulse.judging import ResilientJudge
from ragpulse.judging.process import ProcessJudge
from ragpulse.serve._judge_processes import serve_judge, serve_settings
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


def _affinity() -> int:
    return len(os.sched_getaffinity(0))


@pytest.mark.parametrize(
    ("files", "limit"),
    [
        ({"cpu.max": "150000 100000\n"}, 2),  # a container limited to 1.5 CPUs: 2 processes
        ({"cpu.max": "50000 100000\n"}, 1),
        ({"cpu.max": "max 100000\n"}, None),  # no limit
        ({"cpu/cpu.cfs_quota_us": "100000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1),  # v1
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({"cpu.max": "not a limit\n"}, None),  # unreadable: the affinity alone
        ({}, None),  # no cgroup files (not in a container)
    ],
    ids=["v2-1.5", "v2-0.5", "v2-max", "v1-1", "v1-none", "garbage", "absent"],
)
def test_the_cpus_serve_may_use_are_its_affinity_within_its_container_s_cpu_limit(
    tmp_path: Path, files: dict[str, str], limit: int | None
) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)

    cpus = available_cpus(str(tmp_path))

    assert cpus == (_affinity() if limit is None else min(limit, _affinity()))
