"""No option is accepted and then ignored: every option the client takes reaches something the driver
uses, or is refused with an error that names it.

For each option of ``greenmongo.options.validators.OPTIONS`` the test builds ClientOptions twice, with
and without the option (plus whatever companions it needs to be valid), and compares what the driver
reads from them: the connection settings, the topology settings, the pool options, credentials,
concerns, codec options and the client-level switches. A change there means the option is consumed;
the test then also checks that each of those views is read outside the options package. A new option
without an entry here fails the test, so it cannot slip in unconsumed.
"""

from __future__ import annotations

import datetime
import inspect
import pathlib
import re
from typing import Any

import pytest

from greenmongo.bson.codec_options import TypeRegistry
from greenmongo.bson.son import SON
from greenmongo.driver_info import DriverInfo
from greenmongo.errors import ConfigurationError
from greenmongo.monitoring import CommandListener
from greenmongo.options.client_options import ClientOptions
from greenmongo.options.read_preferences import Secondary
from greenmongo.options.server_api import ServerApi
from greenmongo.options.validators import OPTIONS

GREENMONGO = pathlib.Path(__file__).resolve().parents[1] / "greenmongo"


class Listener(CommandListener):
    def started(self, event: Any) -> None: ...

    def succeeded(self, event: Any) -> None: ...

    def failed(self, event: Any) -> None: ...


def _selector(servers: Any) -> Any:
    return servers


class _Resolver:
    """SRV/TXT answers for mongodb+srv options, without DNS."""

    def resolve_srv(self, name: str, timeout: Any) -> list:
        return [("a.example.com", 27017), ("b.example.com", 27017)]

    def resolve_txt(self, name: str, timeout: Any) -> list:
        return []


# option -> (its value, the companions it needs to be valid at all[, the value it is compared with when
# it cannot be left out]); companions are in both builds.
SAMPLES: dict[str, tuple] = {
    "appname": ("myapp", {}),
    "authMechanism": ("PLAIN", {"username": "u", "password": "p"}),
    "authMechanismProperties": ("AWS_SESSION_TOKEN:tok", {"authMechanism": "MONGODB-AWS", "username": "u",
                                                          "password": "p"}),
    "authSource": ("other", {"username": "u", "password": "p"}),
    "compressors": ("zlib", {}),
    "connectTimeoutMS": (1234, {}),
    "directConnection": (True, {}),
    "heartbeatFrequencyMS": (4321, {}),
    "journal": (True, {}),
    "loadBalanced": (True, {}),
    "localThresholdMS": (42, {}),
    "maxIdleTimeMS": (777, {}),
    "maxPoolSize": (7, {}),
    "maxConnecting": (5, {}),
    "maxStalenessSeconds": (120, {"readPreference": "secondary"}),
    "minPoolSize": (3, {}),
    "proxyHost": ("proxy.example.com", {}),
    "proxyPort": (1081, {"proxyHost": "proxy.example.com"}),
    "proxyUsername": ("pu", {"proxyHost": "proxy.example.com", "proxyPassword": "pp"}, "pu0"),
    "proxyPassword": ("pp2", {"proxyHost": "proxy.example.com", "proxyUsername": "pu"}, "pp0"),
    "readConcernLevel": ("majority", {}),
    "readPreference": ("secondary", {}),
    "readPreferenceTags": ([{"dc": "ny"}], {"readPreference": "secondary"}),
    "replicaSet": ("rs", {}),
    "retryReads": (False, {}),
    "retryWrites": (False, {}),
    "serverMonitoringMode": ("poll", {}),
    "serverSelectionTimeoutMS": (999, {}),
    "socketTimeoutMS": (555, {}),
    "srvMaxHosts": (1, {"@srv": True}),
    "srvServiceName": ("custom", {"@srv": True}),
    "tls": (True, {}),
    "tlsAllowInvalidCertificates": (True, {}),
    "tlsAllowInvalidHostnames": (True, {}),
    "tlsCAFile": ("/ca.pem", {}),
    "tlsCertificateKeyFile": ("/client.pem", {}),
    "tlsCertificateKeyFilePassword": ("secret", {"tlsCertificateKeyFile": "/client.pem"}),
    "tlsDisableCertificateRevocationCheck": (True, {}),
    "tlsDisableOCSPEndpointCheck": (True, {}),
    "tlsInsecure": (True, {}),
    "timeoutMS": (250, {}),
    "w": (2, {}),
    "waitQueueTimeoutMS": (333, {}),
    "wTimeoutMS": (444, {}),
    "zlibCompressionLevel": (3, {"compressors": "zlib"}),
    "maxAdaptiveRetries": (5, {}),
    "enableOverloadRetargeting": (True, {}),
    "connect": (False, {}),
    "fsync": (True, {}),
    "tlsCRLFile": ("/crl.pem", {}),
    "tz_aware": (True, {}),
    "uuidRepresentation": ("standard", {}),
    "unicode_decode_error_handler": ("replace", {}),
    "datetime_conversion": ("datetime_ms", {}),
    "username": ("u", {"password": "p"}, "u0"),
    "password": ("p", {"username": "u"}, "p0"),
    "read_preference": (Secondary(), {}),
    "server_api": (ServerApi("1"), {}),
    "document_class": (SON, {}),
    "tzinfo": (datetime.timezone(datetime.timedelta(hours=2)), {"tz_aware": True}),
    "type_registry": (TypeRegistry(fallback_encoder=str), {}),
    "event_listeners": ([Listener()], {}),
    "server_selector": (_selector, {}),
    "driver": (None, {}),  # replaced below: a DriverInfo-shaped object
    "auto_encryption_opts": ({"kms_providers": {}}, {}),
    "srvAllowedHostsSuffix": ("example.com", {"@srv": True}),
    "srv_host_validator": (lambda host: True, {"@srv": True}),
    "tracing": ({"enabled": True, "query_text_max_length": 100}, {}),
    "pool_debug": (True, {}),
}

#: Refused until the feature exists (the error must name the option).
REFUSED = {"auto_encryption_opts", "srvAllowedHostsSuffix", "srv_host_validator"}


SAMPLES["driver"] = (DriverInfo("lib", "1.0", "py"), {})
_ABSENT = object()

#: What the driver reads from ClientOptions: (ClientOptions attribute, where outside options/ it is read).
CONSUMED_VIEWS = (
    "connection_settings", "topology_settings", "credentials", "read_preference", "read_concern",
    "write_concern", "codec_options", "timeout", "retry_reads", "retry_writes", "max_adaptive_retries",
    "enable_overload_retargeting", "event_listeners", "server_selector", "server_selection_timeout",
    "server_monitoring_mode", "max_pool_size", "min_pool_size", "max_idle_time_seconds", "wait_queue_timeout",
    "max_connecting", "load_balanced", "compressors", "connect", "seeds", "srv_host", "srv_service_name",
    "tracing", "pool_debug",
)


def _build(kwargs: dict[str, Any]) -> ClientOptions:
    kwargs = dict(kwargs)
    if kwargs.pop("@srv", False):
        return ClientOptions("mongodb+srv://cluster.example.com/", srv_resolver=_Resolver(), **kwargs)
    return ClientOptions("mongodb://a.example.com", **kwargs)


def _views(options: ClientOptions) -> list:
    """The views, compared by value (secrets included: ConnectionSettings hides them only from repr)."""
    return [getattr(options, name)() if inspect.ismethod(getattr(options, name)) else getattr(options, name)
            for name in CONSUMED_VIEWS]


def test_every_option_has_a_sample() -> None:
    names = {option.name for option in OPTIONS}
    assert names == set(SAMPLES), f"options without a sample: {sorted(names - set(SAMPLES))}"


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_option_is_consumed_or_refused(name: str) -> None:
    value, companions, alternative = (*SAMPLES[name], _ABSENT)[:3]
    if name in REFUSED:
        with pytest.raises(ConfigurationError, match=name):
            _build({**companions, name: value})
        return
    baseline = _views(_build(companions if alternative is _ABSENT else {**companions, name: alternative}))
    with_option = _views(_build({**companions, name: value}))
    changed = [view for view, before, after in zip(CONSUMED_VIEWS, baseline, with_option) if before != after]
    assert changed, f"{name} is accepted but changes nothing the driver reads"


def test_the_views_are_read_by_the_driver() -> None:
    """Each view the previous test relies on is read outside the options package."""
    sources = "\n".join(path.read_text() for path in GREENMONGO.rglob("*.py")
                        if "options" not in path.relative_to(GREENMONGO).parts)
    unread = [name for name in CONSUMED_VIEWS if not re.search(rf"options\.{name}\b|\.{name}\(\)", sources)]
    assert not unread, f"views nothing outside options/ reads: {unread}"
