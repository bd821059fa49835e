"""Which $readPreference the executor sends (Server Selection spec, "Passing read preference")."""

from __future__ import annotations

import pytest

from greenmongo.engine.executor import read_preference_field
from greenmongo.options.read_preferences import Nearest, ReadPreference, Secondary
from greenmongo.sdam.server_type import ServerType
from greenmongo.sdam.topology_type import TopologyType

PRIMARY = ReadPreference.PRIMARY
SECONDARY_TAGGED = Secondary(tag_sets=[{"dc": "ny"}])


@pytest.mark.parametrize("topology_type,server_type,read_preference,is_write,expected", [
    # Writes never carry a read preference.
    (TopologyType.ReplicaSetWithPrimary, ServerType.RSPrimary, SECONDARY_TAGGED, True, None),
    # Direct connection to a non-mongos: primaryPreferred lets a secondary answer.
    (TopologyType.Single, ServerType.RSSecondary, PRIMARY, False, {"mode": "primaryPreferred"}),
    (TopologyType.Single, ServerType.Standalone, SECONDARY_TAGGED, False,
     {"mode": "secondary", "tags": [{"dc": "ny"}]}),
    # Direct connection to a mongos: the user's preference, omitted when primary.
    (TopologyType.Single, ServerType.Mongos, PRIMARY, False, None),
    (TopologyType.Single, ServerType.Mongos, Nearest(), False, {"mode": "nearest"}),
    # Replica sets, sharded clusters and load balancers: sent unless primary.
    (TopologyType.ReplicaSetWithPrimary, ServerType.RSSecondary, SECONDARY_TAGGED, False,
     {"mode": "secondary", "tags": [{"dc": "ny"}]}),
    (TopologyType.ReplicaSetWithPrimary, ServerType.RSPrimary, PRIMARY, False, None),
    (TopologyType.Sharded, ServerType.Mongos, Nearest(), False, {"mode": "nearest"}),
    (TopologyType.LoadBalanced, ServerType.LoadBalancer, PRIMARY, False, None),
])
def test_read_preference_field(topology_type, server_type, read_preference, is_write, expected) -> None:
    assert read_preference_field(topology_type, server_type, read_preference, is_write) == expected
