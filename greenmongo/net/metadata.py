"""The ``client`` document of the handshake: driver, os, platform, env, application.

Pure apart from reading the environment and /etc/os-release (both injectable
for tests). ``fit_metadata`` applies the handshake spec's truncation order to
stay within 512 BSON bytes.
"""

from __future__ import annotations

import copy
import functools
import os
import platform
import sys
from typing import Any, Callable, Mapping, Optional

from greenmongo import bson
from greenmongo._version import __version__
from greenmongo.errors import ConfigurationError

DRIVER_NAME = "greenmongo"
MAX_METADATA_SIZE = 512
MAX_APPNAME_SIZE = 128


def _gevent_version() -> str:
    """gevent's own ``__version__``: importlib.metadata would cost an import (~10 ms) and a file read."""
    import gevent

    return str(getattr(gevent, "__version__", "unknown"))


def platform_string() -> str:
    """Most important first, as the spec suggests: it is what gets truncated."""
    implementation = platform.python_implementation()
    version = ".".join(str(part) for part in sys.version_info[:3])
    if sys.version_info.releaselevel != "final":
        version += f"{sys.version_info.releaselevel}{sys.version_info.serial}"
    return f"{implementation} {version} gevent {_gevent_version()}"


def _os_pretty_name(read_file: Callable[[str], str]) -> Optional[str]:
    for path, key in (("/etc/os-release", "PRETTY_NAME"), ("/etc/lsb-release", "DISTRIB_DESCRIPTION")):
        try:
            text = read_file(path)
        except OSError:
            continue
        for line in text.splitlines():
            name, _, value = line.partition("=")
            if name.strip() == key and value.strip():
                return value.strip().strip('"').strip("'")
    return None


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def os_document(read_file: Callable[[str], str] = _read_text) -> dict[str, Any]:
    system = platform.system() or "unknown"
    document: dict[str, Any] = {"type": system}
    name = _os_pretty_name(read_file) if system == "Linux" else None
    if system == "Darwin":
        name = "macOS"
    document["name"] = name or system
    if platform.machine():
        document["architecture"] = platform.machine()
    if platform.release():
        document["version"] = platform.release()
    return document


def _int32(value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        return None
    return number if -2**31 <= number < 2**31 else None


def faas_name(environ: Mapping[str, str]) -> Optional[str]:
    found = []
    if environ.get("AWS_EXECUTION_ENV", "").startswith("AWS_Lambda_") or environ.get("AWS_LAMBDA_RUNTIME_API"):
        found.append("aws.lambda")
    if environ.get("FUNCTIONS_WORKER_RUNTIME"):
        found.append("azure.func")
    if environ.get("K_SERVICE") or environ.get("FUNCTION_NAME"):
        found.append("gcp.func")
    if environ.get("VERCEL"):
        found.append("vercel")
    if set(found) == {"vercel", "aws.lambda"}:
        return "vercel"
    return found[0] if len(found) == 1 else None


_FAAS_FIELDS = {
    "aws.lambda": (("region", "AWS_REGION", str), ("memory_mb", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE", int)),
    "gcp.func": (("memory_mb", "FUNCTION_MEMORY_MB", int), ("timeout_sec", "FUNCTION_TIMEOUT_SEC", int),
                 ("region", "FUNCTION_REGION", str)),
    "vercel": (("region", "VERCEL_REGION", str),),
    "azure.func": (),
}


def env_document(
    environ: Mapping[str, str],
    path_exists: Callable[[str], bool] = os.path.exists,
) -> Optional[dict[str, Any]]:
    """FaaS and container details, or None when nothing was detected."""
    document: dict[str, Any] = {}
    name = faas_name(environ)
    if name is not None:
        document["name"] = name
        for field, variable, kind in _FAAS_FIELDS[name]:
            raw = environ.get(variable)
            if raw is None:
                continue
            value = _int32(raw) if kind is int else raw
            if value is not None:
                document[field] = value
    container: dict[str, Any] = {}
    if path_exists("/.dockerenv"):
        container["runtime"] = "docker"
    if environ.get("KUBERNETES_SERVICE_HOST"):
        container["orchestrator"] = "kubernetes"
    if container:
        document["container"] = container
    return document or None


def driver_info_entries(driver_info: Any) -> tuple:
    """``(name, version, platform)`` per wrapping library: from a ``greenmongo.driver_info.DriverInfoChain``
    (``driver=`` then ``append_metadata``), or one DriverInfo-like object (``name``/``version``/``platform``)."""
    if driver_info is None:
        return ()
    entries = getattr(driver_info, "entries", None)
    if entries is not None:
        return tuple(entries)
    return ((driver_info.name, getattr(driver_info, "version", None), getattr(driver_info, "platform", None)),)


def _check_driver_info_part(value: Optional[str]) -> None:
    if value is not None and "|" in value:
        raise ConfigurationError(f"driver info {value!r} must not contain '|'")


def build_metadata(
    appname: Optional[str] = None,
    driver_info: Any = None,
    *,
    environ: Optional[Mapping[str, str]] = None,
    path_exists: Callable[[str], bool] = os.path.exists,
    read_file: Callable[[str], str] = _read_text,
) -> dict[str, Any]:
    """The full client document before size limits (see ``fit_metadata``)."""
    environ = os.environ if environ is None else environ
    document: dict[str, Any] = {}
    if appname is not None:
        if len(appname.encode("utf-8")) > MAX_APPNAME_SIZE:
            raise ConfigurationError(f"appname must be at most {MAX_APPNAME_SIZE} bytes in UTF-8")
        document["application"] = {"name": appname}
    name, version, platform_text = DRIVER_NAME, __version__, platform_string()
    for info_name, info_version, info_platform in driver_info_entries(driver_info):
        for part in (info_name, info_version, info_platform):
            _check_driver_info_part(part)
        # Each info adds a name and a version segment (empty when unset), so the two stay aligned.
        name = f"{name}|{info_name or ''}"
        version = f"{version}|{info_version or ''}"
        if info_platform:
            platform_text = f"{platform_text}|{info_platform}"
    document["driver"] = {"name": name, "version": version}
    document["os"] = os_document(read_file)
    document["platform"] = platform_text
    env = env_document(environ, path_exists)
    if env is not None:
        document["env"] = env
    return document


def fit_metadata(document: Mapping[str, Any], encoded_size: Callable[[Mapping[str, Any]], int],
                 limit: int = MAX_METADATA_SIZE) -> dict[str, Any]:
    """Shrink ``document`` to ``limit`` BSON bytes in the spec's order; returns a new document.

    1. drop ``env`` fields but ``env.name``; 2. drop ``os`` fields but
    ``os.type``; 3. drop ``env``; 4. truncate ``platform``.
    """
    result = copy.deepcopy(dict(document))
    if encoded_size(result) <= limit:
        return result
    if "env" in result:
        result["env"] = {key: value for key, value in result["env"].items() if key == "name"}
        if not result["env"]:
            del result["env"]
        if encoded_size(result) <= limit:
            return result
    result["os"] = {"type": result["os"]["type"]}
    if encoded_size(result) <= limit:
        return result
    result.pop("env", None)
    if encoded_size(result) <= limit:
        return result
    if "platform" in result:
        excess = encoded_size(result) - limit
        text = result["platform"].encode("utf-8")
        keep = max(len(text) - excess, 0)
        result["platform"] = text[:keep].decode("utf-8", "ignore")
        if not result["platform"]:
            del result["platform"]
    return result


class _Entries:
    """A driver-info snapshot as build_metadata reads it (``entries``), hashable for the cache."""

    __slots__ = ("entries",)

    def __init__(self, entries: tuple) -> None:
        self.entries = entries


@functools.lru_cache(maxsize=16)
def _cached_client_metadata(appname: Optional[str], driver_info_key: tuple) -> dict[str, Any]:
    full = build_metadata(appname, _Entries(driver_info_key))
    return fit_metadata(full, lambda doc: len(bson.encode(doc)))


def client_metadata(appname: Optional[str] = None, driver_info: Any = None) -> dict[str, Any]:
    """The size-limited client document for this process (computed once per appname/driver info;
    a ``DriverInfoChain`` is read now, so what ``append_metadata`` added shows on new connections)."""
    return copy.deepcopy(_cached_client_metadata(appname, driver_info_entries(driver_info)))
