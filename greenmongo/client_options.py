"""PyMongo's import path ``pymongo.client_options``: ClientOptions, and the PoolOptions view
``ClientOptions.pool_options`` returns.

The options themselves are parsed and validated by ``greenmongo.options.client_options`` (pure, below
the I/O layers); the ClientOptions here adds what needs those layers. ``client.options.pool_options`` is a
``greenmongo.pool.PoolOptions`` (the CMAP options every pool of the client uses) that also answers
PyMongo's connection-level names: ``connect_timeout``, ``socket_timeout``, ``appname``, ``driver``,
``metadata`` (the handshake's client document), ``server_api``, ``tls_allow_invalid_hostnames``,
``max_idle_time_seconds``, ``pause_enabled``.
"""

from __future__ import annotations

from typing import Any, Optional

from greenmongo.net.metadata import client_metadata
from greenmongo.options import client_options as _parsed
from greenmongo.options.connection_settings import ConnectionSettings
from greenmongo.pool import PoolOptions


class ClientPoolOptions(PoolOptions):
    """One client's PoolOptions with PyMongo's attribute names (read-only)."""

    __slots__ = ("_settings", "_driver")

    def __init__(self, options: _parsed.ClientOptions) -> None:
        super().__init__(max_pool_size=options.max_pool_size or 0, min_pool_size=options.min_pool_size,
                         max_idle_time=options.max_idle_time_seconds, wait_queue_timeout=options.wait_queue_timeout,
                         max_connecting=options.max_connecting, load_balanced=options.load_balanced,
                         debug=options.pool_debug)
        self._settings: ConnectionSettings = options.connection_settings()
        self._driver = options.driver

    @property
    def max_idle_time_seconds(self) -> Optional[float]:
        """maxIdleTimeMS in seconds; None when idle connections are kept forever."""
        return self.max_idle_time

    @property
    def connect_timeout(self) -> Optional[float]:
        return self._settings.connect_timeout

    @property
    def socket_timeout(self) -> Optional[float]:
        return self._settings.socket_timeout

    @property
    def tls_allow_invalid_hostnames(self) -> bool:
        """tlsAllowInvalidHostnames (tlsInsecure implies it)."""
        tls = self._settings.tls
        return tls is not None and (tls.insecure or tls.allow_invalid_hostnames)

    @property
    def appname(self) -> Optional[str]:
        return self._settings.appname

    @property
    def driver(self) -> Any:
        """The ``driver=`` DriverInfo (None when not given)."""
        return self._driver

    @property
    def server_api(self) -> Any:
        return self._settings.server_api

    @property
    def metadata(self) -> dict[str, Any]:
        """The ``client`` document new connections send in their handshake (a copy)."""
        return client_metadata(self._settings.appname, self._settings.driver_info)

    @property
    def pause_enabled(self) -> bool:
        """Always True: pools pause when their server is marked Unknown (CMAP)."""
        return True


class ClientOptions(_parsed.ClientOptions):
    """A MongoClient's options (``client.options``): ``ClientOptions(host, port, **kwargs)``, as MongoClient."""

    @property
    def pool_options(self) -> ClientPoolOptions:
        """The connection pool options (``greenmongo.pool.PoolOptions``) with PyMongo's attribute names:
        ``max_pool_size``, ``min_pool_size``, ``max_idle_time_seconds``, ``wait_queue_timeout``,
        ``connect_timeout``, ``appname``, ``metadata``, ..."""
        return ClientPoolOptions(self)


__all__ = ["ClientOptions"]
