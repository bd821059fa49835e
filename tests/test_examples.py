"""The examples run as a user would run them (a separate process, no MONGODB_URI)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.server
def test_quickstart_starts_its_own_server_and_runs() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MONGODB_URI"}
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "started a throwaway SecantusDB" in proc.stdout
    assert "100 greenlets inserted 100 documents; the first three: [0, 1, 2]; 50 marked" in proc.stdout
