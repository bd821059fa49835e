"""The process's OpenTelemetry SDK provider and in-memory exporter, for the tracing tests and the unified runner.

OpenTelemetry lets a process set its global TracerProvider once, so every test that looks at greenmongo's
spans shares one SDK provider and one ``InMemorySpanExporter`` (the SDK is a test dependency only:
greenmongo itself uses the API). A test clears the exporter before it acts and reads what finished after.
"""

from __future__ import annotations

from typing import Any, Optional

_EXPORTER: Optional[Any] = None


def memory_exporter() -> Any:
    """The shared exporter; raises ImportError when opentelemetry-sdk is not installed."""
    global _EXPORTER
    if _EXPORTER is None:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            provider = TracerProvider()
            trace.set_tracer_provider(provider)
        exporter = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        _EXPORTER = exporter
    return _EXPORTER


def sdk_available() -> bool:
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        return False
    return True
