"""Read preferences (PyMongo's shapes), ReadConcern, WriteConcern and ServerApi."""

from __future__ import annotations

import copy
import pickle

import pytest

from greenmongo.errors import ConfigurationError
from greenmongo.options import (
    Nearest,
    Primary,
    PrimaryPreferred,
    ReadConcern,
    ReadPreference,
    Secondary,
    SecondaryPreferred,
    ServerApi,
    ServerApiVersion,
    WriteConcern,
    make_read_preference,
    read_pref_mode_from_name,
)

MODES = [(Primary, 0, "primary"), (PrimaryPreferred, 1, "primaryPreferred"), (Secondary, 2, "secondary"),
         (SecondaryPreferred, 3, "secondaryPreferred"), (Nearest, 4, "nearest")]


@pytest.mark.parametrize("cls, mode, mongos_mode", MODES)
def test_mode_names_and_defaults(cls, mode, mongos_mode):
    pref = cls()
    assert (pref.mode, pref.mongos_mode, pref.name) == (mode, mongos_mode, cls.__name__)
    assert pref.tag_sets == [{}] and pref.max_staleness == -1 and pref.hedge is None
    assert pref.document == {"mode": mongos_mode} and pref.min_wire_version == 0
    assert read_pref_mode_from_name(mongos_mode) == mode
    assert make_read_preference(mode) == pref == make_read_preference(mongos_mode)


def test_namespace():
    assert [p.mode for p in (ReadPreference.PRIMARY, ReadPreference.PRIMARY_PREFERRED, ReadPreference.SECONDARY,
                             ReadPreference.SECONDARY_PREFERRED, ReadPreference.NEAREST)] == [0, 1, 2, 3, 4]


def test_full_document_and_accessors_return_copies():
    pref = Nearest([{"dc": "ny"}, {}], max_staleness=120, hedge={"enabled": True})
    assert pref.document == {"mode": "nearest", "tags": [{"dc": "ny"}, {}], "maxStalenessSeconds": 120,
                             "hedge": {"enabled": True}}
    assert pref.min_wire_version == 5
    pref.tag_sets[0]["dc"] = "sf"
    pref.hedge["enabled"] = False
    assert pref.tag_sets == [{"dc": "ny"}, {}] and pref.hedge == {"enabled": True}
    assert repr(pref) == "Nearest(tag_sets=[{'dc': 'ny'}, {}], max_staleness=120, hedge={'enabled': True})"


def test_explicit_empty_tag_set_sends_no_tags():
    assert Secondary([{}]).document == {"mode": "secondary"} and Secondary([{}]) == Secondary()


def test_equality_hashing_pickling():
    a, b = SecondaryPreferred([{"a": "1"}], 90), SecondaryPreferred([{"a": "1"}], 90)
    assert a == b and hash(a) == hash(b) and a != Secondary([{"a": "1"}], 90) and a != SecondaryPreferred()
    for pref in (a, Primary(), Nearest(hedge={"enabled": False})):
        assert pickle.loads(pickle.dumps(pref)) == pref


def test_hash_is_remembered_but_not_pickled_or_copied():
    a = Nearest([{"dc": "ny"}], 120)
    first = hash(a)
    assert hash(a) == first == hash(Nearest([{"dc": "ny"}], 120)) == hash(copy.copy(a))
    state = pickle.dumps(a)
    assert b"_hash" not in state  # a string's hash differs in another process: it must be computed there
    assert hash(pickle.loads(state)) == first
    # Equal preferences hash equal whichever was hashed first.
    assert {Nearest([{"dc": "ny"}], 120): 1}[pickle.loads(state)] == 1


@pytest.mark.parametrize("build", [
    lambda: make_read_preference(0, [{"dc": "ny"}]),
    lambda: make_read_preference("primary", None, 90),
    lambda: make_read_preference(0, None, -1, {"enabled": True}),
    lambda: Secondary([]),
    lambda: Secondary({"dc": "ny"}),
    lambda: Secondary(["dc:ny"]),
    lambda: Secondary(max_staleness=0),
    lambda: Secondary(max_staleness=-2),
    lambda: Secondary(max_staleness=1.5),
    lambda: Secondary(hedge=True),
    lambda: make_read_preference(5),
    lambda: make_read_preference(True),
    lambda: read_pref_mode_from_name("Secondary"),
])
def test_invalid_read_preferences(build):
    with pytest.raises(ConfigurationError):
        build()


def test_small_max_staleness_is_left_to_server_selection():
    # mongos and Single topologies accept it; the 90 s floor is a replica-set/URI rule.
    assert Secondary(max_staleness=1).max_staleness == 1


def test_read_concern():
    assert ReadConcern().document == {} and ReadConcern().is_server_default and ReadConcern().ok_for_legacy
    assert ReadConcern("local").ok_for_legacy and not ReadConcern("majority").ok_for_legacy
    assert ReadConcern("anything").document == {"level": "anything"}
    assert ReadConcern("local") == ReadConcern("local") != ReadConcern()
    assert {ReadConcern("local"), ReadConcern("local")} == {ReadConcern("local")}
    with pytest.raises(ConfigurationError):
        ReadConcern(1)


def test_write_concern():
    assert WriteConcern().is_server_default and WriteConcern().acknowledged and WriteConcern().document == {}
    wc = WriteConcern(w="majority", wtimeout=100, j=True)
    assert wc.document == {"w": "majority", "wtimeout": 100, "j": True} and wc.acknowledged
    wc.document["w"] = 0
    assert wc.document["w"] == "majority"
    assert not WriteConcern(w=0).acknowledged and not WriteConcern(w=0, j=False).acknowledged
    assert WriteConcern(fsync=True).document == {"fsync": True}
    assert WriteConcern(w=1) == WriteConcern(w=1) != WriteConcern(w=2)
    assert repr(WriteConcern(w=1, j=False)) == "WriteConcern(w=1, j=False)"


@pytest.mark.parametrize("kwargs", [
    {"w": -1}, {"w": 1.5}, {"w": True}, {"wtimeout": -1}, {"wtimeout": 1.0}, {"j": "yes"}, {"fsync": 1},
    {"w": 0, "j": True}, {"w": 0, "fsync": True},
])
def test_invalid_write_concerns(kwargs):
    with pytest.raises(ConfigurationError):
        WriteConcern(**kwargs)


def test_server_api():
    api = ServerApi(ServerApiVersion.V1)
    assert api.document == {"apiVersion": "1"} and api.strict is None and api.deprecation_errors is None
    api = ServerApi("1", strict=False, deprecation_errors=True)
    assert api.document == {"apiVersion": "1", "apiStrict": False, "apiDeprecationErrors": True}
    assert api == ServerApi("1", False, True) and hash(api) == hash(ServerApi("1", False, True))
    for bad in (lambda: ServerApi("2"), lambda: ServerApi(1), lambda: ServerApi("1", strict="yes")):
        with pytest.raises(ConfigurationError):
            bad()
    with pytest.raises(AttributeError):
        api.version = "2"
