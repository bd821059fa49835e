"""Spawning mongocryptd (Client Side Encryption spec, "Spawning mongocryptd").

mongocryptd is MongoDB Enterprise's query analysis daemon; automatic encryption asks it to mark the
fields a command must encrypt unless the crypt_shared library is loaded. It is started detached, with
``--idleShutdownTimeoutSecs=60`` unless the arguments set one, and its output discarded. A missing
executable is an error that says what is needed instead of a server selection timeout later.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Sequence

from greenmongo.errors import EncryptionError, ServerSelectionTimeoutError

_HOW = ("automatic encryption needs MongoDB Enterprise's mongocryptd (on PATH, or mongocryptd_spawn_path) or "
        "the crypt_shared library (crypt_shared_lib_path); for explicit encryption and automatic decryption "
        "only, use bypass_auto_encryption=True")


def spawn_arguments(path: str, args: Sequence[str]) -> list[str]:
    """The command line: ``path``, the user's arguments, and the idle shutdown default."""
    arguments = [path or "mongocryptd", *args]
    if not any(str(arg).startswith("--idleShutdownTimeoutSecs") for arg in args):
        arguments.append("--idleShutdownTimeoutSecs=60")
    return arguments


class Spawner:
    """Starts mongocryptd on demand (each call starts one; a running one makes the new one exit)."""

    def __init__(self, path: str, args: Sequence[str]) -> None:
        self.arguments = spawn_arguments(path, args)
        self.spawned = 0

    def spawn(self) -> None:
        executable = self.arguments[0]
        if os.sep not in executable and shutil.which(executable) is None:
            raise EncryptionError(ServerSelectionTimeoutError(
                f"mongocryptd could not be started: {executable!r} was not found on PATH; {_HOW}"))
        try:
            # Detached in its own session: it outlives this process (it shuts down when idle).
            subprocess.Popen(self.arguments, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        except OSError as exc:
            raise EncryptionError(ServerSelectionTimeoutError(
                f"mongocryptd could not be started ({exc.strerror or type(exc).__name__}): {_HOW}")) from None
        self.spawned += 1
