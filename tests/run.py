"""The whole suite as CI runs it (README's test command): ``python -m tests.run [pytest args]``.

Two passes, unpatched and monkey-patched (``GREENMONGO_TEST_PATCHED=1``; the root conftest.py says
what the second skips). Everything but the ``quiet`` tests runs first, both passes at once:

* the unpatched pass over ``GREENMONGO_TEST_WORKERS`` (2) pytest-xdist workers (``--dist
  loadgroup``: a module of tests/ stays on one worker, spec cases go one by one): most of the suite
  waits on servers, failpoints and deadlines, so the workers and the other pass overlap well on two
  cores;
* the patched pass in one process beside it (xdist's workers cannot run monkey-patched: execnet
  needs real threads).

Then the ``quiet`` tests (root conftest.py ``_QUIET_MODULES``: they time the hub, fairness, deadline
overshoot, or a workload against PyMongo's), unpatched and then patched, with nothing else running.

Each session judges its own skips (tests/plugins/skip_ledger.py) and watches its own hub
(tests/plugins/hub_watchdog.py); under xdist the controller gathers its workers' findings
(tests/plugins/distributed.py). The output of sessions that run side by side is printed whole when
each ends. Every part runs even after a failure; the exit status is the first non-zero one.
``pytest`` alone still runs a whole pass in one process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from typing import IO

UNPATCHED = {"GREENMONGO_TEST_PATCHED": "0"}
PATCHED = {"GREENMONGO_TEST_PATCHED": "1"}
NO_TESTS = 5  # pytest's exit status when nothing is selected (arguments naming no quiet test, say)


class Part:
    def __init__(self, title: str, env: dict[str, str], args: list[str], extra: list[str]) -> None:
        self.title = title
        self.command = [sys.executable, "-m", "pytest", *args, *extra]
        self.env = {**os.environ, **env}
        self.started = self.elapsed = 0.0
        self.status: int = -1
        self.process: subprocess.Popen | None = None
        self.log: IO[bytes] | None = None

    def header(self) -> str:
        return f"\n===== {self.title}: {' '.join(self.command[1:])}"

    def start(self, captured: bool) -> None:
        self.started = time.monotonic()
        if captured:
            self.log = tempfile.TemporaryFile()
        else:
            print(self.header(), flush=True)
        self.process = subprocess.Popen(self.command, env=self.env, stdout=self.log, stderr=subprocess.STDOUT
                                        if self.log else None)

    def wait(self) -> None:
        assert self.process is not None
        status = self.process.wait()
        self.elapsed = time.monotonic() - self.started
        self.status = 0 if status == NO_TESTS else status
        if self.log is not None:
            print(self.header(), flush=True)
            self.log.seek(0)
            sys.stdout.buffer.write(self.log.read())
            sys.stdout.flush()
            self.log.close()


def main(extra: list[str]) -> int:
    workers = int(os.environ.get("GREENMONGO_TEST_WORKERS", "2"))
    spread = ["-n", str(workers), "--dist", "loadgroup"] if workers > 1 else []
    side_by_side = [Part("unpatched", UNPATCHED, [*spread, "-m", "not quiet"], extra),
                    Part("patched", PATCHED, ["-m", "not quiet"], extra)]
    alone = [Part("unpatched, quiet", UNPATCHED, ["-m", "quiet"], extra),
             Part("patched, quiet", PATCHED, ["-m", "quiet"], extra)]
    print(f"===== tests/run.py: {' | '.join(part.title for part in side_by_side)} side by side, then "
          f"{', then '.join(part.title for part in alone)}", flush=True)
    for part in side_by_side:
        part.start(captured=True)
    running = {part.process.pid: part for part in side_by_side if part.process is not None}
    while running:
        # Whichever ends first (not reaped here: its Popen.wait does that), so each part's time is its own.
        ended = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
        done = running.pop(ended.si_pid, None) if ended is not None else None
        if done is not None:
            done.wait()
    for part in alone:
        part.start(captured=False)
        part.wait()
    print("\n===== tests/run.py")
    for part in side_by_side + alone:
        print(f"{part.title:<18} exit {part.status:>2}  {part.elapsed:7.1f} s")
    print(f"{'wall time':<18}          {sum(p.elapsed for p in alone) + max(p.elapsed for p in side_by_side):7.1f} s")
    return next((part.status for part in side_by_side + alone if part.status != 0), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
