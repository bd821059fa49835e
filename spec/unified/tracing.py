"""OpenTelemetry spans for client entities (``observeTracingMessages``) and the ``expectTracingMessages`` assertion.

A client that observes tracing is made with ``tracing={"enabled": True, "query_text_max_length": N}`` (N large
with ``enableCommandPayload``, else 0: no db.query.text). Its spans reach the process's SDK provider and
in-memory exporter (``tests/otel_support.py``); a ``SpanCollector`` keeps those that finished between its
client's creation and the end of the test's operations. OpenTelemetry does not say which client made a span,
so a test may have one tracing client at most (the spec's tests have one).

Matching follows the unified format: spans in order (siblings by start time), ``name`` exact, ``attributes``
as a root document (extra attributes allowed), ``nested`` the child spans; ``ignoreExtraSpans`` lets other
spans appear among them, at any level. Attribute values are turned into what the spec types them as: an
integer attribute is int64 (``long``), and db.mongodb.lsid, an Extended JSON string, into the document it
holds (for ``$$sessionLsid``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from spec.unified.outcomes import MatchError, NotSupported, TestFileError

#: db.query.text length for ``enableCommandPayload: true``: long enough that no test's command is cut.
PAYLOAD_MAX_LENGTH = 1_000_000
_OBSERVE_KEYS = frozenset({"enableCommandPayload"})
_EXPECT_KEYS = frozenset({"client", "ignoreExtraSpans", "spans"})
_SPAN_KEYS = frozenset({"name", "attributes", "nested"})


def tracing_option(observe: Any) -> dict:
    """The client's ``tracing`` keyword for an ``observeTracingMessages`` object."""
    if not isinstance(observe, Mapping) or set(observe) - _OBSERVE_KEYS:
        raise TestFileError(f"observeTracingMessages: expected an object with enableCommandPayload, got {observe!r}")
    payload = observe.get("enableCommandPayload", False)
    return {"enabled": True, "query_text_max_length": PAYLOAD_MAX_LENGTH if payload else 0}


class SpanCollector:
    """The spans one client entity's operations finish, from its creation until ``stop``."""

    def __init__(self, client_id: str) -> None:
        try:
            from tests.otel_support import memory_exporter

            self._exporter = memory_exporter()
        except ImportError as exc:
            raise NotSupported(f"observeTracingMessages needs opentelemetry-sdk (the test extra): {exc}") from None
        self.client_id = client_id
        self._exporter.clear()
        self.spans: Optional[list] = None

    def stop(self) -> None:
        if self.spans is None:
            self.spans = list(self._exporter.get_finished_spans())

    def finished(self) -> list:
        self.stop()
        assert self.spans is not None
        return self.spans


class _Node:
    __slots__ = ("span", "children")

    def __init__(self, span: Any) -> None:
        self.span = span
        self.children: list[_Node] = []

    def describe(self, depth: int = 0) -> str:
        lines = ["  " * depth + self.span.name]
        lines.extend(child.describe(depth + 1) for child in self.children)
        return "\n".join(lines)


def span_tree(spans: list) -> list[_Node]:
    """The spans as trees: roots are spans whose parent is not among them; siblings by start time."""
    nodes = {span.context.span_id: _Node(span) for span in spans}
    roots = []
    for node in nodes.values():
        parent = node.span.parent
        owner = nodes.get(parent.span_id) if parent is not None else None
        (owner.children if owner is not None else roots).append(node)
    for node in nodes.values():
        node.children.sort(key=lambda child: child.span.start_time)
    roots.sort(key=lambda root: root.span.start_time)
    return roots


def assert_tracing_messages(matcher: Any, adapter: Any, expected: Mapping[str, Any], collector: SpanCollector) -> None:
    """One ``expectTracingMessages`` entry against the spans its client's collector kept."""
    unknown = set(expected) - _EXPECT_KEYS
    if unknown or "spans" not in expected:
        raise TestFileError(f"expectTracingMessages: unknown keys {sorted(unknown)} or no spans")
    roots = span_tree(collector.finished())
    _match_list(matcher, adapter, expected["spans"], roots, bool(expected.get("ignoreExtraSpans", False)),
                f"expectTracingMessages[{expected['client']}]")


def _match_list(matcher: Any, adapter: Any, expected: list, actual: list[_Node], ignore_extra: bool,
                path: str) -> None:
    if not ignore_extra:
        if len(expected) != len(actual):
            raise MatchError(f"{path}: expected {len(expected)} span(s) {[span.get('name') for span in expected]}, "
                             f"got {len(actual)}:\n" + "\n".join(node.describe(1) for node in actual))
        for index, (want, node) in enumerate(zip(expected, actual)):
            _match_span(matcher, adapter, want, node, ignore_extra, f"{path}[{index}]")
        return
    position = 0
    for index, want in enumerate(expected):
        last_error: Optional[MatchError] = None
        while position < len(actual):
            node = actual[position]
            position += 1
            try:
                _match_span(matcher, adapter, want, node, ignore_extra, f"{path}[{index}]")
                break
            except MatchError as exc:
                last_error = exc
        else:
            raise MatchError(f"{path}[{index}]: no span matches {want.get('name')!r} (in order) among:\n"
                             + "\n".join(node.describe(1) for node in actual)
                             + (f"\nlast mismatch: {last_error}" if last_error else ""))


def _match_span(matcher: Any, adapter: Any, expected: Mapping[str, Any], node: _Node, ignore_extra: bool,
                path: str) -> None:
    unknown = set(expected) - _SPAN_KEYS
    if unknown or "name" not in expected or "attributes" not in expected:
        raise TestFileError(f"{path}: a span needs name and attributes (unknown keys {sorted(unknown)})")
    span = node.span
    if span.name != expected["name"]:
        raise MatchError(f"{path}: expected span {expected['name']!r}, got {span.name!r}")
    attributes = _attributes(adapter, span)
    matcher.match(expected["attributes"], attributes, root=True, path=f"{path}({span.name}).attributes")
    _match_list(matcher, adapter, expected.get("nested", []), node.children, ignore_extra,
                f"{path}({span.name}).nested")


def _attributes(adapter: Any, span: Any) -> dict:
    out: dict = {}
    for key, value in (span.attributes or {}).items():
        if isinstance(value, int) and not isinstance(value, bool):
            value = adapter.bson.Int64(value)
        elif key == "db.mongodb.lsid" and isinstance(value, str):
            value = adapter.json_loads(value)
        out[key] = value
    return out
