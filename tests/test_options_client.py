"""ClientOptions: precedence (defaults < TXT < URI < keywords), defaults, per-option validation, rules,
the views for the net/SDAM layers, immutability, and secrets kept out of reprs and errors."""

from __future__ import annotations

import warnings

import pytest

from greenmongo.bson.binary import UuidRepresentation
from greenmongo.errors import ConfigurationError
from greenmongo.options.connection_settings import ConnectionSettings, ProxySettings, TlsSettings
from greenmongo.options import ClientOptions, ReadPreference, Secondary, ServerApi, ServerApiVersion
from greenmongo.sdam.settings import TopologySettings


class CannedDns:
    def __init__(self, srv, txt=()):
        self.srv, self.txt = srv, list(txt)

    def resolve_srv(self, name, timeout=None):
        return self.srv

    def resolve_txt(self, name, timeout=None):
        return self.txt


def invalid(*args, match: str, **kwargs) -> str:
    with pytest.raises(ConfigurationError, match=match) as raised:
        ClientOptions(*args, **kwargs)
    return str(raised.value)


# -- precedence -------------------------------------------------------------------------

def test_keywords_beat_the_connection_string():
    options = ClientOptions("mongodb://u:p@h/db?replicaSet=uri&w=1&appname=uri", replicaSet="kw", w="majority",
                            username="kwuser", password="kwpass")
    assert options.replica_set_name == "kw" and options.write_concern.document == {"w": "majority"}
    assert options.appname == "uri"
    assert (options.credentials.username, options.credentials.password) == ("kwuser", "kwpass")
    assert options.credentials.source == "db"


def test_txt_record_is_weaker_than_uri_and_keywords():
    dns = CannedDns([("x.b.c", 1)], ["replicaSet=txt&authSource=txtdb"])
    assert ClientOptions("mongodb+srv://a.b.c", srv_resolver=dns).replica_set_name == "txt"
    assert ClientOptions("mongodb+srv://a.b.c/?replicaSet=uri", srv_resolver=dns).replica_set_name == "uri"
    options = ClientOptions("mongodb+srv://a.b.c/?replicaSet=uri", srv_resolver=dns, replicaSet="kw")
    assert options.replica_set_name == "kw" and options.options["authSource"] == "txtdb"


def test_srv_turns_tls_on_unless_told_otherwise():
    dns = CannedDns([("x.b.c", 1)])
    assert isinstance(ClientOptions("mongodb+srv://a.b.c", srv_resolver=dns).tls, TlsSettings)
    assert ClientOptions("mongodb+srv://a.b.c/?tls=false", srv_resolver=dns).tls is None
    assert ClientOptions("mongodb+srv://a.b.c", srv_resolver=dns, ssl=False).tls is None


def test_read_preference_object_beats_uri_mode():
    options = ClientOptions("mongodb://h/?readPreference=nearest", read_preference=ReadPreference.SECONDARY)
    assert options.read_preference == ReadPreference.SECONDARY


def test_hosts_ports_and_lists():
    assert ClientOptions().seeds == (("localhost", 27017),)
    assert ClientOptions("db1", 27018).seeds == (("db1", 27018),)
    assert ClientOptions(["db1:1", "mongodb://db2,db1:1/?replicaSet=rs"]).seeds == (("db1", 1), ("db2", 27017))
    invalid("h", 0, match="port")
    invalid("h", True, match="port")
    invalid([], match="at least one")
    dns = CannedDns([("x.b.c", 1)])
    invalid(["mongodb+srv://a.b.c", "other"], srv_resolver=dns, match="only host")


# -- defaults ------------------------------------------------------------------------------

def test_defaults():
    options = ClientOptions("mongodb://h")
    assert options.connect_timeout == 20.0 and options.socket_timeout is None
    assert options.server_selection_timeout == 30.0 and options.heartbeat_frequency == 10.0
    assert options.local_threshold_ms == 15 and options.max_pool_size == 100 and options.min_pool_size == 0
    assert options.max_connecting == 2 and options.max_idle_time_seconds is None
    assert options.wait_queue_timeout is None and options.timeout is None
    assert options.retry_writes and options.retry_reads and options.connect
    assert options.server_monitoring_mode == "auto" and options.compressors == ()
    assert options.zlib_compression_level == -1 and options.tls is None and options.proxy is None
    assert options.load_balanced is False and options.direct_connection is None
    assert options.credentials is None and options.server_api is None
    assert options.read_preference == ReadPreference.PRIMARY and options.read_concern.level is None
    assert options.write_concern.is_server_default
    assert options.codec_options.uuid_representation == UuidRepresentation.UNSPECIFIED
    assert options.srv_service_name == "mongodb" and options.srv_max_hosts == 0


def test_zero_and_none_mean_no_limit_where_the_spec_says_so():
    options = ClientOptions("mongodb://h/?connectTimeoutMS=0&socketTimeoutMS=0&maxPoolSize=0&maxIdleTimeMS=0")
    assert options.connect_timeout is None and options.socket_timeout is None
    assert options.max_pool_size is None and options.max_idle_time_seconds is None
    assert ClientOptions("h", connectTimeoutMS=None).connect_timeout is None
    assert ClientOptions("h", serverSelectionTimeoutMS=0).server_selection_timeout == 0.0
    assert ClientOptions("h", socketTimeoutMS=1500.5).socket_timeout == pytest.approx(1.5005)


# -- single options -----------------------------------------------------------------------

def test_heartbeat_frequency_at_least_500ms():
    assert ClientOptions("mongodb://h/?heartbeatFrequencyMS=500").heartbeat_frequency == 0.5
    invalid("mongodb://h/?heartbeatFrequencyMS=499", match="heartbeatFrequencyMS")
    invalid("h", heartbeatFrequencyMS=499, match="heartbeatFrequencyMS")


def test_max_staleness_is_minus_one_or_at_least_90():
    assert ClientOptions("mongodb://h/?readPreference=secondary&maxStalenessSeconds=90").read_preference == \
        Secondary(max_staleness=90)
    assert ClientOptions("mongodb://h/?readPreference=secondary&maxStalenessSeconds=-1") \
        .read_preference.max_staleness == -1
    for value in (0, 1, 89, -2):
        invalid(f"mongodb://h/?readPreference=secondary&maxStalenessSeconds={value}", match="maxStalenessSeconds")
    invalid("mongodb://h/?maxStalenessSeconds=120", match="primary cannot be combined with maxStalenessSeconds")


def test_tags_need_a_non_primary_mode():
    invalid("mongodb://h/?readPreferenceTags=dc:ny", match="primary cannot be combined with tags")
    options = ClientOptions("mongodb://h/?readPreference=nearest&readPreferenceTags=dc:ny&readPreferenceTags=")
    assert options.read_preference.tag_sets == [{"dc": "ny"}, {}]
    assert ClientOptions("h", readPreference="secondary", readPreferenceTags=[{"a": "b"}]) \
        .read_preference.tag_sets == [{"a": "b"}]


def test_appname_is_at_most_128_bytes_of_utf8():
    assert ClientOptions("h", appname="x" * 128).appname == "x" * 128
    assert ClientOptions("h", appname="é" * 64).appname == "é" * 64  # 128 bytes
    invalid("h", appname="é" * 65, match="128 bytes")
    invalid(f"mongodb://h/?appname={'a' * 129}", match="128 bytes")


@pytest.mark.parametrize("first, second", [
    ("tlsInsecure", "tlsAllowInvalidCertificates"), ("tlsInsecure", "tlsAllowInvalidHostnames"),
    ("tlsInsecure", "tlsDisableOCSPEndpointCheck"), ("tlsInsecure", "tlsDisableCertificateRevocationCheck"),
    ("tlsAllowInvalidCertificates", "tlsDisableOCSPEndpointCheck"),
    ("tlsAllowInvalidCertificates", "tlsDisableCertificateRevocationCheck"),
    ("tlsDisableOCSPEndpointCheck", "tlsDisableCertificateRevocationCheck"),
])
def test_tls_conflicts(first, second):
    invalid(f"mongodb://h/?{first}=false&{second}=false", match="cannot be used together")
    invalid("h", **{first: True, second: True}, match="cannot be used together")
    invalid(f"mongodb://h/?{first}=true", **{second: False}, match="cannot be used together")


def test_tls_settings():
    options = ClientOptions("mongodb://h/?tlsCAFile=/ca.pem&tlsInsecure=true&tlsCertificateKeyFilePassword=pw")
    assert options.tls == TlsSettings(ca_file="/ca.pem", insecure=True, certificate_key_file_password="pw")
    assert not options.tls.verify_certificates and not options.tls.verify_hostname
    invalid("mongodb://h/?tls=false&tlsCAFile=/ca.pem", match="TLS is disabled")
    assert ClientOptions("h", tls=True).tls == TlsSettings()


def test_compressors_and_zlib_level():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        options = ClientOptions("mongodb://h/?compressors=zstd,snoopy,zlib,zlib&zlibCompressionLevel=9")
    assert options.compressors == ("zstd", "zlib") and options.zlib_compression_level == 9
    messages = [str(w.message) for w in caught]
    # A connection string's unknown compressor is not named (it is URI text); a keyword argument's is.
    assert any("Unsupported compressor" in m for m in messages) and not any("snoopy" in m for m in messages)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert ClientOptions("h", compressors="zlib,snoopy").compressors == ("zlib",)
    assert any("snoopy" in str(w.message) for w in caught)
    assert ClientOptions("h", compressors=["snappy"]).compressors == ("snappy",)
    for level in (-2, 10):
        invalid(f"mongodb://h/?zlibCompressionLevel={level}", match="zlibCompressionLevel")
    invalid("h", compressors=5, match="compressors")


def test_uuid_representation():
    assert ClientOptions("mongodb://h/?uuidRepresentation=standard").codec_options.uuid_representation == \
        UuidRepresentation.STANDARD
    assert ClientOptions("h", uuidRepresentation="javaLegacy").codec_options.uuid_representation == \
        UuidRepresentation.JAVA_LEGACY
    assert ClientOptions("h", uuidRepresentation=UuidRepresentation.PYTHON_LEGACY) \
        .codec_options.uuid_representation == UuidRepresentation.PYTHON_LEGACY
    invalid("mongodb://h/?uuidRepresentation=weird", match="uuidRepresentation")
    invalid("h", uuidRepresentation=99, match="uuidRepresentation")


def test_timeout_ms():
    assert ClientOptions("mongodb://h/?timeoutMS=0").timeout == 0.0  # set, and infinite (CSOT)
    assert ClientOptions("h", timeoutMS=1500).timeout == 1.5
    invalid("mongodb://h/?timeoutMS=-1", match="timeoutMS")
    invalid("h", timeoutMS="soon", match="timeoutMS")


def test_server_monitoring_mode():
    assert ClientOptions("mongodb://h/?serverMonitoringMode=poll").server_monitoring_mode == "poll"
    invalid("mongodb://h/?serverMonitoringMode=Poll", match="serverMonitoringMode")


def test_srv_only_options():
    invalid("mongodb://h/?srvMaxHosts=1", match="srvMaxHosts can only be used with a mongodb\\+srv")
    invalid("h", srvServiceName="custom", match="srvServiceName can only be used")
    dns = CannedDns([("x.b.c", 1)])
    for bad in ("-bad", "bad-", "a--b", "123", "a" * 63, ""):
        invalid("mongodb+srv://a.b.c", srv_resolver=dns, srvServiceName=bad, match="srvServiceName")
    invalid("mongodb+srv://a.b.c/?srvMaxHosts=-1", srv_resolver=dns, match="srvMaxHosts")
    invalid("mongodb+srv://a.b.c/?srvMaxHosts=1&replicaSet=rs", srv_resolver=dns, match="replicaSet")
    invalid("mongodb+srv://a.b.c/?srvMaxHosts=1&loadBalanced=true", srv_resolver=dns, match="loadBalanced")
    assert ClientOptions("mongodb+srv://a.b.c/?srvMaxHosts=0&replicaSet=rs", srv_resolver=dns).replica_set_name


def test_load_balanced_and_direct_connection_rules():
    invalid("mongodb://a,b/?loadBalanced=true", match="multiple hosts")
    invalid("mongodb://a/?loadBalanced=true&replicaSet=rs", match="replicaSet")
    invalid("mongodb://a/?loadBalanced=true", directConnection=True, match="directConnection")
    invalid("mongodb://a,b/?directConnection=true", match="multiple seed")
    invalid("mongodb+srv://a.b.c/?directConnection=true", srv_resolver=CannedDns([("x.b.c", 1)]),
            match="mongodb\\+srv")
    assert ClientOptions("mongodb://a/?loadBalanced=true&directConnection=false").load_balanced
    assert ClientOptions("mongodb://a,b/?directConnection=false").direct_connection is False


def test_pool_rules():
    invalid("mongodb://h/?minPoolSize=5&maxPoolSize=2", match="minPoolSize")
    assert ClientOptions("mongodb://h/?minPoolSize=5&maxPoolSize=0").min_pool_size == 5
    invalid("mongodb://h/?maxConnecting=0", match="maxConnecting")


def test_proxy_settings():
    options = ClientOptions("mongodb://h/?proxyHost=p&proxyUsername=u&proxyPassword=s3cret")
    assert options.proxy == ProxySettings("p", 1080, "u", "s3cret")
    invalid("mongodb://h/?proxyPort=1080", match="requires proxyHost")
    invalid("h", proxyHost="p", proxyUsername="u", match="together")


def test_write_and_read_concern_options():
    options = ClientOptions("mongodb://h/?w=2&wTimeoutMS=100&journal=true&readConcernLevel=majority")
    assert options.write_concern.document == {"w": 2, "wtimeout": 100, "j": True}
    assert options.read_concern.document == {"level": "majority"}
    invalid("mongodb://h/?w=0&journal=true", match="w=0")


def test_server_api_and_python_only_options():
    api = ServerApi(ServerApiVersion.V1, strict=True)
    listener = object()
    options = ClientOptions("h", server_api=api, event_listeners=[listener], tz_aware=True, document_class=dict)
    assert options.server_api is api and options.event_listeners == (listener,)
    assert options.codec_options.tz_aware is True
    invalid("h", server_api="1", match="ServerApi")
    invalid("h", event_listeners=5, match="event_listeners")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert "serverApi" not in ClientOptions("mongodb://h/?serverApi=1").options  # never from a URI


def test_unknown_keyword_raises():
    invalid("h", replicaset_name="x", match="Unknown option 'replicaset_name'")
    invalid("h", serverSelectionTryOnce=False, match="Unknown option")


def test_keyword_names_are_case_insensitive():
    assert ClientOptions("h", REPLICASET="rs", ssl=True).options.to_dict() == {"replicaSet": "rs", "tls": True}


# -- views, immutability, secrets ---------------------------------------------------------

def test_views_for_the_layers_below():
    options = ClientOptions("mongodb://a,b/?replicaSet=rs&heartbeatFrequencyMS=1000&localThresholdMS=5"
                            "&appname=app&compressors=zlib&connectTimeoutMS=500&tls=true")
    connection = options.connection_settings()
    assert isinstance(connection, ConnectionSettings)
    assert (connection.connect_timeout, connection.appname, connection.compressors) == (0.5, "app", ("zlib",))
    assert connection.tls == TlsSettings()
    topology = options.topology_settings()
    assert isinstance(topology, TopologySettings)
    assert topology.seeds == (("a", 27017), ("b", 27017)) and topology.replica_set_name == "rs"
    assert (topology.heartbeat_frequency, topology.local_threshold_ms) == (1.0, 5.0)


def test_immutable():
    options = ClientOptions("h")
    with pytest.raises(AttributeError):
        options.appname = "x"
    with pytest.raises(AttributeError):
        options._options = {}
    assert options == ClientOptions("h") and options != ClientOptions("h", appname="x")


def test_no_secret_in_repr_or_errors():
    options = ClientOptions("mongodb://user:hunter2@h/?authMechanism=MONGODB-AWS"
                            "&authMechanismProperties=AWS_SESSION_TOKEN:tok3n&proxyHost=p"
                            "&proxyUsername=pr0xyus3r&proxyPassword=pr0xy&tlsCertificateKeyFilePassword=k3y")
    text = repr(options) + repr(options.credentials) + repr(options.tls) + repr(options.proxy)
    for secret in ("hunter2", "tok3n", "pr0xyus3r", "pr0xy", "k3y"):
        assert secret not in text
    assert "kwsecret" not in repr(ClientOptions("h", username="u", password="kwsecret"))
    message = invalid("h", password=12345, match="password must be a string")
    assert "12345" not in message
    message = invalid("mongodb://user:hunter2@h/?authMechanism=MONGODB-X509", match="password")
    assert "hunter2" not in message


def test_explicit_none_keywords_mean_unset():
    options = ClientOptions("mongodb://h/?replicaSet=rs&appname=a", proxyHost=None, authSource=None,
                            appname=None, readPreferenceTags=None)
    assert options.proxy is None and options.appname is None and options.credentials is None
    assert options.replica_set_name == "rs" and options.read_preference == ReadPreference.PRIMARY
