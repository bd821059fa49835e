"""Per-client authentication state and the I/O hooks the mechanisms use.

``MongoCredential.cache`` holds one ``AuthCache``: derived SCRAM keys, AWS
credentials fetched from cloud endpoints, and the OIDC client cache. It compares
equal to any other ``AuthCache`` so credentials still compare by value.
Mutations are plain attribute/dict assignments, which never yield to the
gevent hub, so they are atomic without locks.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from greenmongo.auth.scram import ScramKeyCache

__all__ = ["AuthCache", "AuthIO"]


def _read_text_file(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _default_http(*args: Any, **kwargs: Any) -> Any:
    from greenmongo.net.http import http_request  # imports gevent: only when a cloud endpoint is used
    return http_request(*args, **kwargs)


def _gevent_sleep(seconds: float) -> None:
    from greenmongo.hub.waiting import sleep  # imports gevent: only when a mechanism has to wait
    sleep(seconds)


@dataclass
class AuthIO:
    """Where the mechanisms get the outside world: swap any of these in tests.

    ``environ`` is read on every authentication (the AWS spec requires that);
    ``http`` has the shape of ``greenmongo.net.http.http_request``.
    """

    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    http: Callable[..., Any] = _default_http
    read_file: Callable[[str], str] = _read_text_file
    sleep: Callable[[float], None] = _gevent_sleep
    now: Callable[[], float] = time.time


class AuthCache:
    """Everything authentication remembers between connections of one client."""

    __slots__ = ("scram_keys", "aws_credentials", "oidc", "io")

    def __init__(self, io: Optional[AuthIO] = None) -> None:
        self.scram_keys = ScramKeyCache()
        self.aws_credentials: Any = None  # greenmongo.auth.aws.AwsCredentials with an expiry, or None
        self.oidc: Any = None             # greenmongo.auth.oidc.OidcClientCache, created on first use
        self.io = io or AuthIO()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AuthCache)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(AuthCache)

    def __repr__(self) -> str:
        return "AuthCache()"  # never show cached secrets
