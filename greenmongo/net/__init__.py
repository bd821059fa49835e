"""The only socket code: connect, TLS, SOCKS5, cooperative DNS, Connection, handshake.

``open_connection(address, ConnectionSettings(...))`` is the factory the pool
uses; it returns a handshaken (and, given an authenticator, authenticated)
``Connection``.
"""
