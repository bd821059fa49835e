"""The MongoDB wire protocol as pure functions on bytes: no sockets, no greenlets.

``header`` (the 16-byte header and its validation), ``op_msg`` (OP_MSG),
``legacy`` (OP_QUERY/OP_REPLY for the legacy hello), ``compression``
(OP_COMPRESSED), ``crc32c``, ``batching`` (write batch splitting) and
``command_errors`` (an ``ok: 0`` reply to the right exception).
"""
