"""``ContentEventIntake``: the log record processor that hands GenAI content events to the
trace they belong to.

The GenAI instrumentation may write a chat call's messages as log events rather than on its
span (``adapters._content_events``). ``configure()`` adds this processor to the logger
provider it builds or joins (an app building ``EvaluatingSpanProcessor`` itself adds
``processor.content_events`` to its own): each record emitted is tested by its event name,
a set lookup, and a content event is handed over to the processor as an ended span is, an
append for its worker thread, which holds it with its trace in the ``TraceBuffer``, within
the same bounds as the trace's spans. Every other record costs that lookup.

The instrumentation emits the events before it ends the span they describe, on the same
thread, so they are read before the trace's local root is; an event for a trace already
read is dropped and counted (``TraceBuffer.events_dropped``). Events of traces that no unit
reads leave with their trace (its root, or a bound, takes it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry.sdk._logs import LogRecordProcessor

from ragpulse.adapters._content_events import CONTENT_EVENT_NAMES


class ContentEventIntake(LogRecordProcessor):
    """Hands each GenAI content log record to ``hand_over`` (the span processor's)."""

    def __init__(self, hand_over: Callable[[Any], None]) -> None:
        self._hand_over = hand_over

    def on_emit(self, log_record: Any) -> None:
        # SDK 1.39+ passes a ReadWriteLogRecord, earlier ones a LogData: both hold the record.
        record = getattr(log_record, "log_record", log_record)
        name = getattr(record, "event_name", None)
        if name is not None and name not in CONTENT_EVENT_NAMES:
            return  # nearly every record: one lookup
        # A record without an event name may carry it as an attribute (older SDKs): the
        # worker thread tells.
        self._hand_over(record)

    emit = on_emit  # the method's name before SDK 1.39

    def shutdown(self) -> None:
        """Nothing to release: the events live in the span processor's buffer."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is queued here: an event is held as it is emitted."""
        return True
