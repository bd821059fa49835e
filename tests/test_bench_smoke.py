"""The hand-run benchmark scripts still run: each once, briefly, in a subprocess (their figures are not judged
here; what they check of the driver's correctness is)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.one_pass


def test_soak_runs_briefly_and_keeps_its_promises(tmp_path: Path) -> None:
    figures_file = tmp_path / "soak.json"
    proc = subprocess.run(
        [sys.executable, "bench/soak.py", "--minutes", "0.15", "--greenlets", "30", "--stepdown-every", "4",
         "--warmup", "1", "--think-ms", "20", "--json", str(figures_file)],
        cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert figures_file.exists(), proc.stdout[-2000:] + proc.stderr[-3000:]
    figures = json.loads(figures_file.read_text())
    assert figures["operations"] > 100 and figures["outcomes"].get("ok", 0) > 0, figures
    assert figures["problems"] == [], figures["problems"]
    assert figures["stepdowns"].get("ok", 0) >= 1, figures["stepdowns"]
    assert figures["after_faults"] == {"ok": 50}, figures["after_faults"]
    assert figures["lanes_stuck"] == 0 and figures["pools_not_at_rest"] == [], figures
    assert figures["leaked_greenlets"] == 0 and figures["sessions_not_returned"] == 0, figures
    assert not any(kind.startswith("wrong") for kind in figures["outcomes"]), figures["outcomes"]
