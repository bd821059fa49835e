"""The client-side encryption engine: libmongocrypt (through PyPI ``pymongocrypt``) driven by greenmongo.

libmongocrypt is a state machine that asks its driver for I/O: key vault reads and writes, collection
information, command markings from mongocryptd, KMS HTTP exchanges. Here every one of those runs on
greenmongo's own clients and gevent sockets (``io.py``, ``kms.py``), driven by our own loop
(``state_machine.py``); pymongocrypt contributes only its cffi binding and context wrappers.
``binding.py`` imports it lazily so greenmongo works without the ``encryption`` extra.
"""
