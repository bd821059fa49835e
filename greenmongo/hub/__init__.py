"""How greenmongo's greenlets wait, stop and call listeners on the gevent hub.

* ``waiting`` - the one module for waiting outside socket I/O: deadline waits, the pool's bounded
  wait-queue wait, unreferenced waits for background greenlets, backoff sleeps, the
  hub-ownership check, and :class:`~greenmongo.hub.waiting.Interruptible`, the one way a greenlet
  is interrupted from the hub (psycopg 3 keeps all of its waiting in one ``waiting.py`` the same way);
* ``worker`` - :class:`~greenmongo.hub.worker.BackgroundWorker`, the lifecycle every monitor, RTT
  monitor, SRV poller and pool maintainer shares;
* ``publisher`` - :class:`~greenmongo.hub.publisher.OrderedPublisher`, listener and log calls in
  order, one at a time, never under a lock.
"""
