"""read-write-concern/tests/{connection-string,document}: concerns from URIs and from values."""

from __future__ import annotations

import warnings

import pytest

from greenmongo.errors import ConfigurationError
from greenmongo.options import ClientOptions, ReadConcern, WriteConcern
from spec.support import params

#: The spec's user-facing names for write concern fields, as sent on the wire.
_WIRE = {"w": "w", "wtimeoutMS": "wtimeout", "journal": "j"}


def _cases(path, data):
    for case in data["tests"]:
        yield case["description"], case


def _write_concern_kwargs(spec_fields):
    names = {"w": "w", "wtimeoutMS": "wtimeout", "journal": "j"}
    return {names[key]: value for key, value in spec_fields.items()}


@pytest.mark.parametrize("case", params("read-write-concern/tests/connection-string", _cases))
def test_concerns_from_connection_string(case):
    if not case["valid"]:
        with pytest.raises(ConfigurationError):
            ClientOptions(case["uri"])
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        options = ClientOptions(case["uri"])
    if case.get("warning") is not None:
        assert bool([w for w in caught if w.category is UserWarning]) == case["warning"]
    if "readConcern" in case:
        assert options.read_concern.document == case["readConcern"]
    if "writeConcern" in case:
        expected = {_WIRE[key]: value for key, value in case["writeConcern"].items()}
        assert options.write_concern.document == expected


@pytest.mark.parametrize("case", params("read-write-concern/tests/document", _cases))
def test_concern_documents(case):
    if "readConcern" in case:
        make = lambda: ReadConcern(**case["readConcern"])  # noqa: E731
    else:
        make = lambda: WriteConcern(**_write_concern_kwargs(case["writeConcern"]))  # noqa: E731
    if not case["valid"]:
        with pytest.raises(ConfigurationError):
            make()
        return
    concern = make()
    expected = case.get("readConcernDocument", case.get("writeConcernDocument"))
    assert concern.document == expected
    assert concern.is_server_default == case["isServerDefault"]
    if "isAcknowledged" in case:
        assert concern.acknowledged == case["isAcknowledged"]
