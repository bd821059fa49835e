"""The topology's I/O half: monitor greenlets, server selection waits, SRV polling, load-balanced mode.

The decisions are made by the pure core in ``greenmongo.sdam``; this package
runs the greenlets and applies them. The operation executor's entry points:

* ``Topology.select_server(read_preference, is_write=..., deprioritized=..., deadline=...)``
  -> :class:`Server` (its operation count incremented; call ``server.end_operation()``);
* ``with server.checkout(deadline) as conn:`` (establishment errors reach SDAM);
* ``server.handle_error(exc, conn, reply=...)`` for errors on a connection;
* ``Topology.close()`` stops every greenlet.
"""

from greenmongo.topology.monitor import Monitor, MonitorSettings, streaming_enabled
from greenmongo.topology.rtt_monitor import RttMonitor
from greenmongo.topology.server import Server
from greenmongo.topology.srv_poller import SrvPoller
from greenmongo.topology.topology import Topology

__all__ = ["Monitor", "MonitorSettings", "RttMonitor", "Server", "SrvPoller", "Topology", "streaming_enabled"]
