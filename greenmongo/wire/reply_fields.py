"""Typed reads of reply fields: a field of the wrong type is the server's protocol error.

A reply that decodes as BSON can still be nonsense: a cursor id that is a string, a batch
that is not an array, a count that is a document. Reading such a field with ``int()``,
``list()`` or ``[...]`` would leak a TypeError, ValueError or KeyError to the user, or pass
the garbage off as a result. The getters here return the field or raise ``ProtocolError``
naming it (``cursor.id is a str ('abc'), expected an integer``); parsers use them at the
point they read a field, so the check costs one type test.
"""

from __future__ import annotations

from collections.abc import Mapping as _MappingABC
from typing import Any, Mapping, Optional

from greenmongo.bson.codec import DocumentBatch
from greenmongo.bson.int64 import Int64
from greenmongo.bson.timestamp import Timestamp
from greenmongo.errors import ProtocolError

#: The default of a required field.
REQUIRED: Any = object()

_REPR_LIMIT = 40


def describe(value: Any) -> str:
    """``a str ('abc')``: the type and a short repr (a 10 MB field must not make a 10 MB message)."""
    text = repr(value)
    if len(text) > _REPR_LIMIT:
        text = text[:_REPR_LIMIT] + "..."
    return f"a {type(value).__name__} ({text})"


def malformed(path: str, value: Any, expected: str) -> ProtocolError:
    return ProtocolError(f"malformed reply: {path} is {describe(value)}, expected {expected}")


def missing(path: str) -> ProtocolError:
    return ProtocolError(f"malformed reply: {path} is missing")


def is_integer(value: Any) -> bool:
    """int, Int64 - not bool (a BSON boolean is not a count)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _path(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _get(document: Mapping[str, Any], name: str, where: str, default: Any) -> Any:
    """The field, or REQUIRED when it is absent (a BSON null counts as absent for an optional field)."""
    value = document.get(name, REQUIRED)
    if value is None and default is not REQUIRED:
        value = REQUIRED
    if value is REQUIRED and default is REQUIRED:
        raise missing(_path(where, name))
    return value


def integer(document: Mapping[str, Any], name: str, *, where: str = "", default: Any = REQUIRED) -> Any:
    """An integer field (int32, int64 or an integral double, as some servers send counts); ``default``
    when absent (or missing-field ProtocolError if no default)."""
    value = document.get(name)
    if type(value) is int or type(value) is Int64:  # the usual cases (a cursor id is an Int64); bool is not
        return value
    value = _get(document, name, where, default)
    if value is REQUIRED:
        return default
    if is_integer(value):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise malformed(_path(where, name), value, "an integer")


def number(document: Mapping[str, Any], name: str, *, where: str = "", default: Any = REQUIRED) -> Any:
    """A numeric field (``ok``): int, double or bool."""
    value = _get(document, name, where, default)
    if value is REQUIRED:
        return default
    if isinstance(value, (int, float)):
        return value
    raise malformed(_path(where, name), value, "a number")


def _typed(container: Mapping[str, Any], name: str, where: str, default: Any, kind: Any, expected: str) -> Any:
    value = _get(container, name, where, default)
    if value is REQUIRED:
        return default
    if isinstance(value, kind):
        return value
    raise malformed(_path(where, name), value, expected)


def string(document: Mapping[str, Any], name: str, *, where: str = "", default: Any = REQUIRED) -> Any:
    value = document.get(name)
    if type(value) is str:  # the usual case: one exact-type test, no call
        return value
    return _typed(document, name, where, default, str, "a string")


def document(container: Mapping[str, Any], name: str, *, where: str = "", default: Any = REQUIRED) -> Any:
    """An embedded document (any Mapping: the codec options' document class, RawBSONDocument)."""
    # collections.abc's class, not typing's alias: the same test, without the alias's
    # __instancecheck__ indirection (this runs on every reply); a plain dict, the usual case, needs neither
    value = container.get(name)
    if type(value) is dict:
        return value
    return _typed(container, name, where, default, _MappingABC, "a document")


def array(container: Mapping[str, Any], name: str, *, where: str = "", default: Any = REQUIRED) -> Any:
    """A BSON array (decoded as a list)."""
    value = container.get(name)
    if type(value) is list:
        return value
    return _typed(container, name, where, default, list, "an array")


def documents(container: Mapping[str, Any], name: str, *, where: str = "", default: Any = REQUIRED,
              document_class: Optional[type] = None) -> Any:
    """An array whose elements are all documents (a cursor batch, writeErrors, upserted). A cursor batch left
    encoded (``DocumentBatch``) was framed as documents only when it was made; each decodes when read."""
    value = container.get(name)
    if type(value) is DocumentBatch:
        return value
    if type(value) is not list:
        value = array(container, name, where=where, default=default)  # raises, or a default
        if value is default and default is not REQUIRED:
            return value
    for index, element in enumerate(value):
        if type(element) is not document_class and not isinstance(element, _MappingABC):
            raise malformed(f"{_path(where, name)}[{index}]", element, "a document")
    return value


def strings(container: Mapping[str, Any], name: str, *, where: str = "", default: Any = REQUIRED) -> Any:
    """An array of strings (errorLabels, compression, hosts)."""
    value = array(container, name, where=where, default=default)
    if value is default and default is not REQUIRED:
        return value
    for index, element in enumerate(value):
        if not isinstance(element, str):
            raise malformed(f"{_path(where, name)}[{index}]", element, "a string")
    return value


def check_gossip(reply: Mapping[str, Any]) -> None:
    """``$clusterTime`` (a document with a Timestamp ``clusterTime``) and ``operationTime`` (a Timestamp),
    which any reply may carry and the client keeps and sends back."""
    cluster_time = reply.get("$clusterTime")
    if cluster_time is not None and type(cluster_time) is not dict:
        cluster_time = document(reply, "$clusterTime", default=None)
    if cluster_time is not None and not isinstance(cluster_time.get("clusterTime"), Timestamp):
        raise malformed("$clusterTime.clusterTime", cluster_time.get("clusterTime"), "a Timestamp")
    operation_time = reply.get("operationTime")
    if operation_time is not None and not isinstance(operation_time, Timestamp):
        raise malformed("operationTime", operation_time, "a Timestamp")
