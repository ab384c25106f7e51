"""An app configured with ``ragpulse.configure()`` that the delivery tests and bench/faults.py
run as their own process, then disturb (backend restart, SIGTERM, exit without shutdown).

argv[1] is the mode; settings come from the environment (``OTEL_*`` and ``RAGPULSE_*``):

- ``stream-evaluated COUNT SECONDS``: COUNT evaluated requests (question ``q-N``) spread over
  SECONDS, then shutdown.
- ``sigterm COUNT``: COUNT spans, print ``ready`` and who handles SIGTERM (``ragpulse`` or
  ``default``), then wait to be terminated. Default settings: ragpulse flushes on SIGTERM.
- ``sigterm-chained COUNT``: the same with the app's own SIGTERM handler installed first.
- ``sigterm-load THREADS``: THREADS threads make evaluated requests (question ``q-T.N``)
  without end, printing ``done q-T.N`` after each has returned, until terminated.
- ``sigterm-hanging THREADS``: as ``sigterm-load``, with a judge that never answers, so that
  every evaluation is still running when SIGTERM comes, and the threads go on ending a request
  every 10 ms each while ragpulse shuts down.
- ``burst COUNT THREADS``: COUNT spans ended as fast as THREADS threads can, then shutdown.
- ``big COUNT KIB``: COUNT spans with a KIB-kibibyte attribute each, ended together, then shutdown.
- ``hang``: one evaluated request whose judge never answers; the script ends without shutdown.
- ``flush-hang``: one evaluated request with a judge that answers after 3 s; print the result
  of ``force_flush(0.5)`` before it did and of ``force_flush(10.0)`` after, then shut down.
- ``flush``: one span; print the result of ``force_flush(1.0)``, then end without shutdown.
- ``short``: one evaluated request (a span, its events, its metrics); end without shutdown.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import sys
import threading
import time
from collections.abc import Collection
from types import FrameType

from opentelemetry import trace

import ragpulse
from ragpulse.evaluation.types import EvalStatus, Evaluation, RagRecord

GRACE = 120.0
"""Shutdown grace of the modes that check delivery: a hang guard, not a deadline to race."""


class SlowJudge:
    """A judge that takes ``delay`` seconds (forever, for ``None``) and then finds nothing."""

    name = "slow"
    annotator_kind = "CODE"

    def __init__(self, delay: float | None) -> None:
        self.delay = delay

    async def evaluate(self, record: RagRecord, metrics: Collection[str]) -> Evaluation:
        if self.delay is None:
            await asyncio.Event().wait()
        await asyncio.sleep(self.delay or 0.0)
        return Evaluation(status=EvalStatus.NO_CLAIMS, metrics={}, judge=self.name)


@ragpulse.rag(name="support-bot")
def answer(question: str) -> str:
    ragpulse.record_contexts(["Support is open from 9am to 5pm on weekdays."])
    return "Support is open from 9am to 5pm on weekdays."


def spans(count: int, size: int = 0) -> None:
    tracer = trace.get_tracer("delivery-app")
    for i in range(count):
        with tracer.start_as_current_span(f"req-{i}") as span:
            if size:
                span.set_attribute("payload", "x" * size)


def main() -> None:
    mode = sys.argv[1]
    if mode == "stream-evaluated":
        handle = ragpulse.configure(service_name="delivery-app")
        count, seconds = int(sys.argv[2]), float(sys.argv[3])
        for i in range(count):
            answer(f"q-{i}")
            time.sleep(seconds / count)
        # These modes check delivery, not the exit grace: a busy machine must not cut it short.
        handle.shutdown(GRACE)
    elif mode in {"sigterm", "sigterm-chained"}:
        if mode == "sigterm-chained":

            def own(signum: int, frame: FrameType | None) -> None:
                print("app handler ran", flush=True)
                sys.exit(0)

            signal.signal(signal.SIGTERM, own)
        ragpulse.configure(service_name="delivery-app", evaluate=False)
        spans(int(sys.argv[2]))
        handler = signal.getsignal(signal.SIGTERM)
        if handler in (signal.SIG_DFL, None):
            who = "default"
        else:
            who = (
                "ragpulse"
                if getattr(handler, "__module__", "") == "ragpulse.outputs.exit"
                else "app"
            )
        print("ready", who, flush=True)
        while True:
            time.sleep(0.1)
    elif mode in {"sigterm-load", "sigterm-hanging"}:
        judge = SlowJudge(None) if mode == "sigterm-hanging" else None
        ragpulse.configure(service_name="delivery-app", judge=judge)
        lock = threading.Lock()

        pause = 0.01 if mode == "sigterm-hanging" else 0.0

        def load(thread: int) -> None:
            for n in itertools.count():
                answer(f"q-{thread}.{n}")
                with lock:  # one whole line at a time
                    print(f"done q-{thread}.{n}", flush=True)
                time.sleep(pause)

        for t in range(int(sys.argv[2])):
            threading.Thread(target=load, args=(t,), daemon=True).start()
        while True:
            time.sleep(0.1)
    elif mode == "burst":
        handle = ragpulse.configure(service_name="delivery-app", evaluate=False)
        count, threads = int(sys.argv[2]), int(sys.argv[3])
        tracer = trace.get_tracer("delivery-app")

        def burst(first: int) -> None:
            for i in range(first, count, threads):
                with tracer.start_as_current_span(f"req-{i}"):
                    pass

        workers = [threading.Thread(target=burst, args=(t,)) for t in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        handle.shutdown(GRACE)
    elif mode == "big":
        handle = ragpulse.configure(service_name="delivery-app", evaluate=False)
        spans(int(sys.argv[2]), size=int(sys.argv[3]) * 1024)
        handle.shutdown(GRACE)
    elif mode == "hang":
        ragpulse.configure(service_name="delivery-app", judge=SlowJudge(None))
        answer("When is support open?")
        print("ending", flush=True)
    elif mode == "flush-hang":
        handle = ragpulse.configure(service_name="delivery-app", judge=SlowJudge(3.0))
        answer("When is support open?")
        print("flushed", handle.force_flush(0.5), flush=True)
        print("then flushed", handle.force_flush(10.0), flush=True)
        handle.shutdown()
    elif mode == "short":
        ragpulse.configure(service_name="delivery-app")
        answer("When is support open?")
        # The exit starts here: the test measures it from this line, not from the start.
        print(f"exiting at {time.monotonic()}", flush=True)
    elif mode == "flush":
        handle = ragpulse.configure(service_name="delivery-app", evaluate=False)
        spans(1)
        print("flushed", handle.force_flush(1.0), flush=True)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
