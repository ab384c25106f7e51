"""The judge of ``ragpulse serve``: one process per CPU at most, none idle where nothing is sampled.

A CPU-bound judge runs in its own processes, ``concurrency`` of them as in an
application, but no more than the CPUs serve may use (``serve_settings``; its affinity
within a container's CPU limit, ``available_cpus``): serve is
the only work of its host or container, and a judge process beyond the CPUs only
takes turns, halving each batch and adding a round trip and a cold start to each
record (on one CPU, serve and four judge processes spent about 53 us of CPU per span
at sample rate 0.1; with one judge process, about 42).

In an application, and in ``ragpulse serve`` at a positive sample rate, one judge
process starts with the processor so the first evaluation does not wait for an
interpreter. At sample rate 0 only a forced unit (``ragpulse.eval.force``) is
judged, usually none: there the idle process (~40 MB) is not worth its memory, so
a CPU-bound judge's processes start with the first record it is given.
"""

from __future__ import annotations

from dataclasses import replace

from ragpulse.judges._cpus import available_cpus
from ragpulse.judges.base import Judge, is_cpu_bound
from ragpulse.judging.custom_metrics import with_custom_metrics
from ragpulse.judging.process import ProcessJudge
from ragpulse.judging.resilient import ResilientJudge, RetryPolicy
from ragpulse.settings import Settings


class OnDemandProcessJudge(ProcessJudge):
    """A ``ProcessJudge`` that starts no child until its first evaluation."""

    def _prestart(self) -> None:
        return None


def serve_settings(judge: Judge, settings: Settings) -> Settings:
    """``settings`` with ``concurrency`` at most the CPUs serve may use, for a CPU-bound
    ``judge`` (its processes); as they are for any other."""
    if isinstance(judge, ResilientJudge) or not is_cpu_bound(judge):
        return settings
    cpus = available_cpus()
    return settings if settings.concurrency <= cpus else replace(settings, concurrency=cpus)


def serve_judge(judge: Judge, settings: Settings) -> Judge:
    """``judge`` as ``ragpulse serve`` runs it under ``settings``.

    At a positive sample rate (or with ``always_evaluate`` globs) it is returned as it
    is, and the processor wraps it as in an application. At rate 0 a CPU-bound judge
    is made resilient as the processor would, with its processes started on demand.
    """
    nothing_sampled = settings.sample_rate == 0.0 and not settings.always_evaluate
    if not nothing_sampled or isinstance(judge, ResilientJudge) or not is_cpu_bound(judge):
        return judge
    retry = RetryPolicy()
    on_demand = OnDemandProcessJudge(
        # The user's metrics run where the judge runs, as the processor would place them.
        with_custom_metrics(judge, settings.metrics),
        processes=settings.concurrency,
        timeout=retry.attempt_timeout,
        nice=settings.judge_nice,
    )
    return ResilientJudge(
        on_demand, retry=retry, processes=settings.concurrency, nice=settings.judge_nice
    )
