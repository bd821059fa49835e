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


def test_driverbench_smoke_runs_every_task_for_both_drivers(tmp_path: Path) -> None:
    """bench/driverbench.py --smoke: every spec task, the composites, the raw floor and the greenlet scenarios."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import driverbench
    finally:
        sys.path.remove(str(ROOT / "bench"))
    figures_file = tmp_path / "driverbench.json"
    proc = subprocess.run([sys.executable, "bench/driverbench.py", "--smoke", "--json", str(figures_file)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and figures_file.exists(), proc.stdout[-2000:] + proc.stderr[-3000:]
    figures = json.loads(figures_file.read_text())
    expected = set(driverbench.BSON_TASKS) | set(driverbench.SINGLE) | set(driverbench.MULTI) | {
        f"{task}/{mode}" for task in driverbench.PARALLEL for mode in ("greenlets", "processes")}
    for peer in driverbench.PEERS:
        scores = driverbench.scores(figures, peer)
        assert set(scores) == expected, (peer, expected ^ set(scores))
        assert all(score > 0 for score in scores.values()), scores
        composites = driverbench.composites(scores)
        assert all(value is not None and value > 0 for value in composites.values()), composites
    canned = figures["canned"]
    assert set(canned["floor"]["tasks"]) == {"FindOneById", "SmallDocInsertOne"}
    for peer in driverbench.PEERS:
        scenarios = canned[peer]["concurrency"]
        assert [scenario["greenlets"] for scenario in scenarios] == [1, 200]
        assert all(scenario["fairness"] >= 1.0 for scenario in scenarios), scenarios
        memory = scenarios[-1]["memory"]
        assert memory["waiting"] > 0 and memory["traced_bytes_per_waiter"] > 0, memory
    assert "DriverBench" in proc.stdout and "Targets" in proc.stdout, proc.stdout[-2000:]


def test_app_bench_smoke_both_drivers_answer_every_request(tmp_path: Path) -> None:
    """bench/app_bench.py --smoke: gunicorn's gevent worker with --preload (a client forked from the master),
    8 connections on maxPoolSize=2, wrk or, without it, the bench's own gevent load generator."""
    figures_file = tmp_path / "app.json"
    proc = subprocess.run([sys.executable, "bench/app_bench.py", "--smoke", "--json", str(figures_file)],
                          cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert figures_file.exists(), proc.stdout[-2000:] + proc.stderr[-3000:]
    figures = json.loads(figures_file.read_text())
    runs = {run["driver"]: run for run in figures["runs"]}
    assert set(runs) == {"greenmongo", "pymongo"}, figures
    greenmongo = runs["greenmongo"]
    # The worker used the client its master created, without falling back to connect=False, and answered.
    assert greenmongo["client_inherited_from_master"] and not greenmongo["connect_false"], greenmongo
    assert greenmongo["requests"] > 0 and greenmongo["errors"] == 0, greenmongo
    assert runs["pymongo"]["requests"] > 0, runs["pymongo"]
    assert "gm/pm" in proc.stdout, proc.stdout[-2000:]
    # The control (GET /ping, no database) ran for both, and the driver's share of each run's CPU is printed.
    controls = {run["driver"]: run for run in figures["controls"]}
    assert set(controls) == {"greenmongo", "pymongo"}, figures["controls"]
    assert all(run["requests"] > 0 and run["errors"] == 0 for run in controls.values()), controls
    assert "the drivers' share" in proc.stdout, proc.stdout[-2000:]


def test_server_pacing_runs_both_drivers_with_and_without_a_spin(tmp_path: Path) -> None:
    """bench/server_pacing.py: each driver against a fresh SecantusDB, with no client-side spin and with one."""
    figures_file = tmp_path / "pacing.json"
    proc = subprocess.run([sys.executable, "bench/server_pacing.py", "--greenlets", "2", "--spins", "0,50",
                           "--ops", "40", "--json", str(figures_file)],
                          cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0 and figures_file.exists(), proc.stdout[-2000:] + proc.stderr[-3000:]
    runs = json.loads(figures_file.read_text())
    assert [(run["driver"], run["spin_us"]) for run in runs] == [
        ("greenmongo", 0.0), ("greenmongo", 50.0), ("pymongo", 0.0), ("pymongo", 50.0)], runs
    assert all(run["finds_per_s"] > 0 and run["server_cpu_us_per_find"] >= 0 for run in runs), runs
