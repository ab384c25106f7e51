"""``ragpulse serve``: evaluate any app's traces outside its process.

An OTLP receiver (HTTP ``/v1/traces`` in protobuf or JSON, gzip; gRPC) in front
of the same pipeline as in-process evaluation: received spans become SDK
``ReadableSpan``s, a trace assembler holds each evaluation unit until the spans
its record needs have arrived, the ``EvaluatingSpanProcessor`` samples and
evaluates it, and every span is forwarded exactly once (the unit enriched with
``ragpulse.eval.*``) to ``OTEL_EXPORTER_OTLP_ENDPOINT`` or an OTLP-JSON file,
with metrics and log events beside. Many replicas scale out behind the
OpenTelemetry Collector's ``loadbalancing`` exporter (``routing_key: traceID``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragpulse.serve._service import ServeOptions, ServeService, run_service

__all__ = ["ServeOptions", "ServeService", "run_service"]


def __getattr__(name: str) -> Any:
    # The service needs the ``serve`` extra (uvicorn, grpcio); importing this package (as the
    # ``ragpulse`` command does to mount ``ragpulse serve``) must work without it.
    if name in __all__:
        from ragpulse.serve import _service

        return getattr(_service, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
