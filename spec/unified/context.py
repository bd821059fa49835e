"""What the runner knows about the deployment and the driver, shared by every test of a session.

``UnifiedContext`` holds the adapter, the connection string split into hosts and
options (so a client entity's ``uriOptions`` can override them), the internal
MongoClient, and facts about the server (version, topology, parameters, auth)
that runOnRequirements are checked against. It also converts the unified
format's option documents (readConcern, writeConcern, readPreference,
transaction options) into the driver's objects.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Optional
from urllib.parse import parse_qsl, unquote

import gevent

from spec.unified.drivers import DriverAdapter
from spec.unified.outcomes import NotSupported, TestFileError

_READ_PREFERENCE_MODES = {mode.lower(): mode for mode in
                          ("primary", "primaryPreferred", "secondary", "secondaryPreferred", "nearest")}

#: Codes killAllSessions may fail with harmlessly (spec: Terminating Open Transactions).
_KILL_ALL_SESSIONS_IGNORED = {11601, 13, 59}


class ConnectionString:
    """A ``mongodb://`` URI split into what a client entity may override (the options) and the rest."""

    def __init__(self, uri: str) -> None:
        if not uri.startswith(("mongodb://", "mongodb+srv://")):
            raise ValueError(f"not a MongoDB connection string: {uri!r}")
        scheme, rest = uri.split("://", 1)
        self.scheme = scheme
        authority, _, path_and_query = rest.partition("/")
        if "?" in authority:  # mongodb://host?opts without a slash
            authority, _, query = authority.partition("?")
            path = ""
        else:
            path, _, query = path_and_query.partition("?")
        self.userinfo, _, hosts = authority.rpartition("@")
        self.hosts = hosts.split(",")
        self.path = path
        self.options: dict[str, str] = dict(parse_qsl(query, keep_blank_values=True))

    @property
    def username(self) -> Optional[str]:
        return unquote(self.userinfo.split(":", 1)[0]) if self.userinfo else None

    def host_uri(self, hosts: Optional[list[str]] = None) -> str:
        """The URI without its options (they travel as keyword arguments)."""
        userinfo = f"{self.userinfo}@" if self.userinfo else ""
        return f"{self.scheme}://{userinfo}{','.join(hosts or self.hosts)}/{self.path}"


class ServerInfo:
    """Facts about the deployment for runOnRequirements, read once with the internal client."""

    def __init__(self, version: tuple[int, int, int], topology: str, auth: bool, serverless: bool,
                 shards_are_replica_sets: bool = True) -> None:
        self.version = version
        self.topology = topology
        self.auth = auth
        self.serverless = serverless
        self.shards_are_replica_sets = shards_are_replica_sets
        self._parameters: Optional[dict] = None
        self.parameter_reader: Any = None

    def parameters(self) -> dict:
        if self._parameters is None:
            self._parameters = dict(self.parameter_reader()) if self.parameter_reader else {}
        return self._parameters


class UnifiedContext:
    """The session-wide state of the unified runner (one per server)."""

    def __init__(self, adapter: DriverAdapter, uri: str, load_balancers: Optional[Mapping[str, str]] = None) -> None:
        """``load_balancers``: SINGLE_MONGOS_LB_URI and MULTI_MONGOS_LB_URI when ``uri`` is the former (the
        load-balanced deployment); otherwise they come from the environment, if at all."""
        self.adapter = adapter
        self.uri = uri
        self.load_balancers = dict(load_balancers or {})
        self.connection = ConnectionString(uri)
        self._closing: list = []
        self.internal_client = adapter.MongoClient(self.connection.host_uri(), **self.connection.options)
        try:
            self.server = self._discover()
            self.kill_all_sessions()  # open transactions left by earlier runs would block ours
        except BaseException:
            self.internal_client.close()
            raise

    def close(self) -> None:
        self.finish_closing()
        self.internal_client.close()

    def close_client(self, client: Any) -> None:
        """Close a test's client. A blocking driver (PyMongo joins its monitor threads, ~0.2 s a
        client) closes in gevent's thread pool while the next test starts; ``finish_closing`` waits."""
        if not self.adapter.blocking_io:
            client.close()
            return
        self._closing = [result for result in self._closing if not result.ready()]
        self._closing.append(gevent.get_hub().threadpool.spawn(client.close))

    def finish_closing(self, timeout: float = 30.0) -> None:
        pending, self._closing = self._closing, []
        gevent.wait(pending, timeout=timeout)

    # -- discovery ---------------------------------------------------------------

    def _discover(self) -> ServerInfo:
        admin = self.internal_client.get_database("admin")
        build_info = admin.command("buildInfo")
        version_array = list(build_info.get("versionArray") or [])
        if len(version_array) >= 3:
            version = tuple(int(part) for part in version_array[:3])
        else:
            version = tuple((int(part) for part in build_info["version"].split("-")[0].split(".")[:3]))
        hello = admin.command("hello")
        if self.connection.options.get("loadBalanced", "").lower() == "true" or hello.get("serviceId"):
            topology = "load-balanced"
        elif hello.get("msg") == "isdbgrid":
            topology = "sharded"
        elif hello.get("setName"):
            topology = "replicaset"
        else:
            topology = "single"
        shards_are_replica_sets = True
        if topology == "sharded":
            shards = list(self.internal_client.get_database("config").get_collection("shards").find({}))
            shards_are_replica_sets = all("/" in shard.get("host", "") for shard in shards)
        auth = self.connection.username is not None or bool(os.environ.get("GREENMONGO_UNIFIED_AUTH"))
        serverless = os.environ.get("SERVERLESS", "").lower() in ("1", "true", "yes")
        info = ServerInfo(version, topology, auth, serverless, shards_are_replica_sets)  # type: ignore[arg-type]
        info.parameter_reader = lambda: {key: value for key, value in admin.command("getParameter", "*").items()
                                         if key not in ("ok", "$clusterTime", "operationTime")}
        return info

    # -- internal-client chores ----------------------------------------------------

    def kill_all_sessions(self) -> None:
        """Terminate open transactions (spec: Terminating Open Transactions)."""
        errors = self.adapter.errors
        try:
            self.internal_client.get_database("admin").command("killAllSessions", [])
        except errors.OperationFailure as exc:
            if exc.code not in _KILL_ALL_SESSIONS_IGNORED:
                raise

    # -- option documents -> driver objects --------------------------------------------

    def client_arguments(self, uri_options: Mapping[str, Any],
                         use_multiple_mongoses: Optional[bool]) -> tuple[str, dict]:
        """(host URI, keyword options) for a client entity: the test's options override the suite's."""
        overridden = {key.lower() for key in uri_options}
        options: dict[str, Any] = {key: value for key, value in self.connection.options.items()
                                   if key.lower() not in overridden}
        options.update(uri_options)
        hosts = list(self.connection.hosts)
        direct = options.get("directConnection") in (True, "true")
        if direct:
            for key in [key for key in options if key.lower() == "replicaset"]:
                del options[key]
            hosts = hosts[:1]
        if self.server.topology == "load-balanced":
            variable = "MULTI_MONGOS_LB_URI" if use_multiple_mongoses in (True, None) else "SINGLE_MONGOS_LB_URI"
            lb_uri = self.load_balancers.get(variable) or os.environ.get(variable)
            if not lb_uri:
                raise NotSupported(f"load-balanced topology needs {variable}")
            lb = ConnectionString(lb_uri)
            return lb.host_uri(), {**lb.options, **options}
        if self.server.topology == "sharded" and use_multiple_mongoses is False:
            hosts = hosts[:1]
        return self.connection.host_uri(hosts), options

    def read_concern(self, doc: Mapping[str, Any]) -> Any:
        return self.adapter.ReadConcern(doc.get("level"))

    def write_concern(self, doc: Mapping[str, Any]) -> Any:
        kwargs: dict = {}
        for key, value in doc.items():
            if key == "w":
                kwargs["w"] = value
            elif key == "journal":
                kwargs["j"] = value
            elif key == "wtimeoutMS":
                kwargs["wtimeout"] = value
            else:
                raise TestFileError(f"unknown writeConcern option {key!r}")
        return self.adapter.WriteConcern(**kwargs)

    def read_preference(self, doc: Mapping[str, Any]) -> Any:
        mode = _READ_PREFERENCE_MODES.get(str(doc.get("mode", "")).lower())
        if mode is None:
            raise TestFileError(f"unknown read preference mode {doc.get('mode')!r}")
        return self.adapter.read_preference({**doc, "mode": mode})  # tests spell modes "Secondary" too

    def collection_options(self, doc: Mapping[str, Any]) -> dict:
        """databaseOptions / collectionOptions -> get_database / get_collection keywords."""
        options: dict = {}
        for key, value in doc.items():
            if key == "readConcern":
                options["read_concern"] = self.read_concern(value)
            elif key == "writeConcern":
                options["write_concern"] = self.write_concern(value)
            elif key == "readPreference":
                options["read_preference"] = self.read_preference(value)
            elif key == "timeoutMS":
                keyword = self.adapter.entity_timeout_keyword
                if keyword is None:
                    raise NotSupported(f"{self.adapter.name} has no Database/Collection-level timeoutMS "
                                       "(databaseOptions/collectionOptions timeoutMS)")
                options[keyword] = value
            else:
                raise TestFileError(f"unknown database/collection option {key!r}")
        return options

    def transaction_options(self, doc: Mapping[str, Any]) -> Any:
        if self.adapter.TransactionOptions is None:
            raise NotSupported(f"{self.adapter.name} has no TransactionOptions")
        return self.adapter.TransactionOptions(**self.transaction_kwargs(doc))

    def transaction_kwargs(self, doc: Mapping[str, Any]) -> dict:
        kwargs: dict = {}
        for key, value in doc.items():
            if key == "readConcern":
                kwargs["read_concern"] = self.read_concern(value)
            elif key == "writeConcern":
                kwargs["write_concern"] = self.write_concern(value)
            elif key == "readPreference":
                kwargs["read_preference"] = self.read_preference(value)
            elif key == "maxCommitTimeMS":
                kwargs["max_commit_time_ms"] = value
            else:
                raise TestFileError(f"unknown transaction option {key!r}")
        return kwargs
