"""Everything that waits on the gevent hub outside sockets, pools and topology greenlets.

``waiting`` is the one module for deadline waits, interruptible waits, backoff sleeps and the
hub-ownership check (psycopg 3 keeps all of its waiting in one ``waiting.py`` the same way).
"""
