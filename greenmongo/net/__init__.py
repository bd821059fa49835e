"""The only socket code: connect, TLS, SOCKS5, cooperative DNS, Connection, handshake."""
