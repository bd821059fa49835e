"""Limits shared by the encoder and decoder."""

#: Deep enough for anything a server stores (it caps nesting near 200); beyond it we refuse, so a
#: reference cycle or a depth bomb fails with a clear error instead of exhausting the stack.
MAX_NESTING_DEPTH = 400
