"""``ContentEventIntake``: the log record processor that hands GenAI content events to the
trace they belong to.

The GenAI instrumentation may write a chat call's messages as log events rather than on its
span (``adapters._content_events``). ``configure()`` adds this processor to the logger
provider it builds or joins (an app building ``EvaluatingSpanProcessor`` itself adds
``processor.content_events`` to its own): each record emitted is tested by its event name,
a set lookup, and a content event goes into the processor's ``TraceBuffer`` with its trace,
within the same bounds as the trace's spans. Every other record costs that lookup.

The instrumentation emits the events before it ends the span they describe, on the same
thread, so they are held before the trace's local root is read; an event for a trace
already read is dropped and counted (``TraceBuffer.events_dropped``). Events of traces that
no unit reads leave with their trace (its root, or a bound, takes it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry.sdk._logs import LogRecordProcessor

from ragpulse._guard import Guard
from ragpulse.adapters._buffer import TraceBuffer
from ragpulse.adapters._content_events import CONTENT_EVENT_NAMES, from_log_record

_guard = Guard("ragpulse.processor.log_intake")


class ContentEventIntake(LogRecordProcessor):
    """Holds each GenAI content log event with its trace in ``buffer`` while ``reading()``."""

    def __init__(self, buffer: TraceBuffer, reading: Callable[[], bool]) -> None:
        self._buffer = buffer
        self._reading = reading

    def on_emit(self, log_record: Any) -> None:
        # SDK 1.39+ passes a ReadWriteLogRecord, earlier ones a LogData: both hold the record.
        record = getattr(log_record, "log_record", log_record)
        name = getattr(record, "event_name", None)
        if name is not None and name not in CONTENT_EVENT_NAMES:
            return  # nearly every record: one lookup
        if not self._reading():
            return
        with _guard("ragpulse: could not hold a GenAI content event"):
            event = from_log_record(record)
            if event is not None:
                self._buffer.add_event(event)

    emit = on_emit  # the method's name before SDK 1.39

    def shutdown(self) -> None:
        """Nothing to release: the events live in the span processor's buffer."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is queued here: an event is held as it is emitted."""
        return True
