"""The SASL command shapes every mechanism shares, and small credential helpers.

saslStart/saslContinue carry opaque payloads as BSON binary (subtype 0): we send
``bytes`` and accept back bytes, a bytes-like Binary, or (old servers) base64
text.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

from greenmongo.errors import OperationFailure

if TYPE_CHECKING:
    from greenmongo.options.credentials import MongoCredential

__all__ = ["mechanism_property", "payload_bytes", "sasl_continue", "sasl_start", "require_done"]


def sasl_start(mechanism: str, payload: bytes, **extra: Any) -> Dict[str, Any]:
    command: Dict[str, Any] = {"saslStart": 1, "mechanism": mechanism, "payload": bytes(payload)}
    command.update(extra)
    return command


def sasl_continue(conversation_id: Any, payload: bytes) -> Dict[str, Any]:
    return {"saslContinue": 1, "conversationId": conversation_id, "payload": bytes(payload)}


def payload_bytes(reply: Mapping[str, Any]) -> bytes:
    """The ``payload`` of a SASL reply as bytes."""
    value = reply.get("payload", b"")
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except ValueError:
            raise OperationFailure(f"SASL reply payload is not base64: {value!r}") from None
    try:
        return bytes(value)
    except TypeError:
        raise OperationFailure(f"SASL reply payload has unexpected type {type(value).__name__}") from None


def require_done(reply: Mapping[str, Any], mechanism: str) -> None:
    if not reply.get("done"):
        raise OperationFailure(f"{mechanism}: server did not finish the SASL conversation", details=reply)


def mechanism_property(credentials: MongoCredential, name: str, default: Any = None) -> Any:
    """Look up a mechanism property by name, case-insensitively (as the spec requires)."""
    properties: Optional[Mapping[str, Any]] = getattr(credentials, "mechanism_properties", None)
    if not properties:
        return default
    if name in properties:
        return properties[name]
    wanted = name.lower()
    for key, value in properties.items():
        if isinstance(key, str) and key.lower() == wanted:
            return value
    return default
