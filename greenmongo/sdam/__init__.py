"""Server Discovery and Monitoring, server selection and max staleness: the pure core.

Nothing here does I/O, starts greenlets or imports gevent. The Topology and
its monitor greenlets (I/O layer) feed check outcomes and errors in and apply
the decisions that come out:

* ``ServerDescription(address, hello, round_trip_time)`` from each check;
* ``plan_update(description, server)`` -> ``TopologyUpdate`` (new description,
  servers added/removed, pools to mark ready or clear, checks to request);
* ``decide_application_error`` / ``decide_check_failure`` for errors;
* ``select_servers`` then ``choose_server`` for each operation;
* ``events.opening_events`` / ``update_events`` / ``closing_events`` for listeners.
"""

from greenmongo.sdam.address import Address, format_address, parse_address
from greenmongo.sdam.errors import (
    ApplicationError,
    CheckFailureDecision,
    ErrorDecision,
    decide_application_error,
    decide_check_failure,
)
from greenmongo.sdam.rtt import RoundTripTimes
from greenmongo.sdam.selection import choose_server, select_servers, suitable_servers
from greenmongo.sdam.server_description import ServerDescription, compare_topology_versions
from greenmongo.sdam.server_type import SERVER_TYPE, ServerType
from greenmongo.sdam.settings import TopologySettings
from greenmongo.sdam.topology_description import TopologyDescription
from greenmongo.sdam.topology_type import TOPOLOGY_TYPE, TopologyType
from greenmongo.sdam.update import (
    TopologyUpdate,
    apply_server_description,
    apply_srv_hosts,
    plan_update,
)

__all__ = [
    "Address", "format_address", "parse_address",
    "ApplicationError", "CheckFailureDecision", "ErrorDecision", "decide_application_error",
    "decide_check_failure", "RoundTripTimes", "choose_server", "select_servers", "suitable_servers",
    "ServerDescription", "compare_topology_versions", "SERVER_TYPE", "ServerType", "TopologySettings",
    "TopologyDescription", "TOPOLOGY_TYPE", "TopologyType", "TopologyUpdate",
    "apply_server_description", "apply_srv_hosts", "plan_update",
]
