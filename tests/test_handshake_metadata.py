"""The handshake's client document: fields, FaaS/container detection, the 512-byte limit."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import greenmongo
from greenmongo import bson
from greenmongo.errors import ConfigurationError
from greenmongo.net import metadata
from greenmongo.net.handshake import build_hello
from greenmongo.options.connection_settings import ConnectionSettings


def no_file(_path: str) -> bool:
    return False


def build(environ=None, **kwargs):
    return metadata.build_metadata(environ=environ or {}, path_exists=no_file, **kwargs)


def test_required_fields() -> None:
    document = build()
    assert document["driver"] == {"name": "greenmongo", "version": greenmongo.__version__}
    assert document["os"]["type"]
    assert "gevent" in document["platform"] and document["platform"].startswith("CPython")
    assert "application" not in document and "env" not in document


def test_appname_and_its_limit() -> None:
    assert build(appname="myapp")["application"] == {"name": "myapp"}
    build(appname="é" * 64)  # 128 bytes exactly
    with pytest.raises(ConfigurationError):
        build(appname="é" * 65)


def test_driver_info_is_appended() -> None:
    info = SimpleNamespace(name="Motor", version="3.0", platform="Tornado 6")
    document = build(driver_info=info)
    assert document["driver"] == {"name": "greenmongo|Motor", "version": f"{greenmongo.__version__}|3.0"}
    assert document["platform"].endswith("|Tornado 6")
    with pytest.raises(ConfigurationError):
        build(driver_info=SimpleNamespace(name="a|b", version=None, platform=None))


def test_os_name_from_os_release() -> None:
    def read(path: str) -> str:
        if path == "/etc/os-release":
            return 'NAME="X"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n'
        raise OSError
    document = metadata.os_document(read)
    if document["type"] == "Linux":
        assert document["name"] == "Debian GNU/Linux 12 (bookworm)"


# The handshake spec's test plan environments.
@pytest.mark.parametrize("environ, expected", [
    ({"AWS_EXECUTION_ENV": "AWS_Lambda_java8", "AWS_REGION": "us-east-2",
      "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024"},
     {"name": "aws.lambda", "region": "us-east-2", "memory_mb": 1024}),
    ({"FUNCTIONS_WORKER_RUNTIME": "node"}, {"name": "azure.func"}),
    ({"K_SERVICE": "servicename", "FUNCTION_MEMORY_MB": "1024", "FUNCTION_TIMEOUT_SEC": "60",
      "FUNCTION_REGION": "us-central1"},
     {"name": "gcp.func", "memory_mb": 1024, "timeout_sec": 60, "region": "us-central1"}),
    ({"VERCEL": "1", "VERCEL_REGION": "cdg1"}, {"name": "vercel", "region": "cdg1"}),
    ({"AWS_EXECUTION_ENV": "AWS_Lambda_java8", "FUNCTIONS_WORKER_RUNTIME": "node"}, None),
    ({"AWS_EXECUTION_ENV": "AWS_Lambda_java8", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "big"}, {"name": "aws.lambda"}),
    ({"AWS_EXECUTION_ENV": "EC2"}, None),
    ({"AWS_LAMBDA_RUNTIME_API": "x", "VERCEL": "1"}, {"name": "vercel"}),
])
def test_faas_detection(environ, expected) -> None:
    assert metadata.env_document(environ, no_file) == expected


def test_long_aws_region_is_dropped_by_truncation() -> None:
    environ = {"AWS_EXECUTION_ENV": "AWS_Lambda_java8", "AWS_REGION": "a" * 512}
    full = build(environ)
    assert full["env"]["region"] == "a" * 512
    fitted = metadata.fit_metadata(full, lambda doc: len(bson.encode(doc)))
    assert len(bson.encode(fitted)) <= 512
    assert fitted["env"] == {"name": "aws.lambda"}
    assert fitted["os"] == full["os"]  # step 1 was enough


def test_container_detection() -> None:
    env = metadata.env_document({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, lambda path: path == "/.dockerenv")
    assert env == {"container": {"runtime": "docker", "orchestrator": "kubernetes"}}


def test_truncation_order() -> None:
    document = {
        "driver": {"name": "greenmongo", "version": "1"},
        "os": {"type": "Linux", "name": "n" * 50, "architecture": "x86_64", "version": "6"},
        "platform": "p" * 300,
        "env": {"name": "aws.lambda", "region": "r" * 40, "container": {"runtime": "docker"}},
    }
    size = lambda doc: len(bson.encode(doc))  # noqa: E731
    full = size(document)

    step1 = metadata.fit_metadata(document, size, limit=full - 1)
    assert step1["env"] == {"name": "aws.lambda"} and step1["os"] == document["os"]

    step2 = metadata.fit_metadata(document, size, limit=size(step1) - 1)
    assert step2["os"] == {"type": "Linux"} and step2["env"] == {"name": "aws.lambda"}

    step3 = metadata.fit_metadata(document, size, limit=size(step2) - 1)
    assert "env" not in step3 and step3["platform"] == "p" * 300

    step4 = metadata.fit_metadata(document, size, limit=size(step3) - 100)
    assert size(step4) <= size(step3) - 100 and step4["platform"] == "p" * 200
    assert document["env"]["region"] == "r" * 40  # the input is not modified


def test_client_metadata_is_cached_and_fits() -> None:
    first = metadata.client_metadata("app")
    first["application"]["name"] = "changed"
    second = metadata.client_metadata("app")
    assert second["application"]["name"] == "app"
    assert len(bson.encode(second)) <= 512


def test_legacy_hello_command() -> None:
    command = build_hello(ConnectionSettings(compressors=("zlib",)), {"driver": {}})
    assert list(command)[:2] == ["isMaster", "helloOk"] and command["helloOk"] is True
    assert command["compression"] == ["zlib"]
    assert "loadBalanced" not in command and "apiVersion" not in command


def test_op_msg_hello_with_server_api_and_load_balancing() -> None:
    api = SimpleNamespace(version="1", strict=True, deprecation_errors=None)
    command = build_hello(ConnectionSettings(server_api=api, load_balanced=True), {"driver": {}})
    assert next(iter(command)) == "hello"
    assert command["loadBalanced"] is True
    assert command["apiVersion"] == "1" and command["apiStrict"] is True
    assert "apiDeprecationErrors" not in command
    assert command["compression"] == []  # spec: send an empty list when nothing is configured


def test_authenticator_fields_are_limited_to_standard_ones() -> None:
    class Fields:
        def __init__(self, fields):
            self.fields = fields

        def handshake_fields(self):
            return self.fields

        def authenticate(self, conn, reply):
            pass

    command = build_hello(ConnectionSettings(), {}, Fields({"saslSupportedMechs": "admin.u",
                                                            "speculativeAuthenticate": {"saslStart": 1}}))
    assert command["saslSupportedMechs"] == "admin.u"
    with pytest.raises(ConfigurationError):
        build_hello(ConnectionSettings(), {}, Fields({"extra": 1}))
