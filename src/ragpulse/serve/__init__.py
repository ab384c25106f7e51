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

from ragpulse.serve._service import ServeOptions, ServeService, run_service

__all__ = ["ServeOptions", "ServeService", "run_service"]
