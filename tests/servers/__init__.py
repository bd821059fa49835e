"""Servers the tests talk to: the SecantusDB subprocess and (later) scripted OP_MSG servers."""
