"""Skip ledger: a skipped test fails the run unless spec/skip_ledger.py allows it, and an allowance that
no longer matches anything fails it too.

Every skip is recorded (a skip marker or ``skipif``, ``pytest.skip`` in a fixture or in the test,
``importorskip`` in a module), with the message pytest reports. At the end of the session each skip
must match an entry of ``spec.skip_ledger.LEDGER`` (node id pattern and skip message); the rest are
listed and the exit status becomes non-zero. An entry is *stale* when its test file was collected
whole (no ``-k``/``-m``/``--deselect`` removed any of the file's tests, no ``file.py::node`` argument
narrowed it), every collected test its pattern names ran, and none of them skipped with its message:
then it fails the run too. Runs of a subset therefore judge only the entries they fully exercised.
``environment`` entries (no spec data locally, no C extension, your own server) may go unused.

Two kinds of skip are not the ledger's business and are counted apart: the patched pass's
"covered by the unpatched pass" skips (the root conftest marks those items with
``mark_covered_by_unpatched_pass``; their tests do not count as run for staleness) and xfails
(spec/unified/known_failures.py, strict: an unexpected pass already fails).

``--skip-ledger-dump=PATH`` writes what the run saw as JSON; ``python -m spec ledger PATH`` judges
such a dump against the current ledger without rerunning the tests.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

import pytest

from spec.skip_ledger import ENVIRONMENT, LEDGER, Allowed
from tests.plugins import distributed

ONE_PASS_REASON = ("one pass: covered by the unpatched pass (subprocesses / no gevent I/O / "
                   "same I/O paths as the suites the patched pass runs)")
_COVERED_KEY = pytest.StashKey[bool]()


def mark_covered_by_unpatched_pass(item: pytest.Item) -> None:
    """Skip ``item`` in the patched pass as covered by the unpatched one (counted apart, never a ledger case)."""
    item.add_marker(pytest.mark.skip(reason=ONE_PASS_REASON))
    item.stash[_COVERED_KEY] = True


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _node_regex(pattern: str) -> re.Pattern:
    """``*`` matches anything (including ``/``, ``::`` and brackets); every other character is literal."""
    return re.compile("".join(".*" if part == "*" else re.escape(part) for part in re.split(r"(\*)", pattern)) + r"\Z")


@dataclass
class RunRecord:
    """What one session saw, enough to judge it against a ledger (and to dump as JSON)."""

    collected: list[str] = field(default_factory=list)
    """Node ids that were to run (after deselection)."""
    narrowed_files: set[str] = field(default_factory=set)
    """Files not collected whole: some tests deselected, or named by ``file.py::node`` arguments."""
    ran: set[str] = field(default_factory=set)
    """Node ids that got a setup report."""
    covered: set[str] = field(default_factory=set)
    """Node ids the patched pass skips as covered by the unpatched pass."""
    skips: dict[str, str] = field(default_factory=dict)
    """Node id -> skip message (collection-time skips under the module's node id)."""
    xfailed: int = 0
    xfail_not_run: int = 0
    xpassed: int = 0
    xpassed_strict: int = 0

    def to_json(self) -> dict:
        return {"collected": self.collected, "narrowed_files": sorted(self.narrowed_files), "ran": sorted(self.ran),
                "covered": sorted(self.covered), "skips": self.skips, "xfailed": self.xfailed,
                "xfail_not_run": self.xfail_not_run, "xpassed": self.xpassed, "xpassed_strict": self.xpassed_strict}

    def merge(self, other: "RunRecord") -> None:
        """Add what another process of the same session saw (pytest-xdist: every worker collects every
        test and runs its share)."""
        known = set(self.collected)
        self.collected.extend(nodeid for nodeid in other.collected if nodeid not in known)
        self.narrowed_files |= other.narrowed_files
        self.ran |= other.ran
        self.covered |= other.covered
        for nodeid, message in other.skips.items():
            self.skips.setdefault(nodeid, message)
        self.xfailed += other.xfailed
        self.xfail_not_run += other.xfail_not_run
        self.xpassed += other.xpassed
        self.xpassed_strict += other.xpassed_strict

    @classmethod
    def from_json(cls, data: dict) -> "RunRecord":
        return cls(collected=list(data["collected"]), narrowed_files=set(data["narrowed_files"]),
                   ran=set(data["ran"]), covered=set(data["covered"]), skips=dict(data["skips"]),
                   xfailed=data["xfailed"], xfail_not_run=data["xfail_not_run"], xpassed=data["xpassed"],
                   xpassed_strict=data["xpassed_strict"])


@dataclass
class Judgement:
    allowed: dict[int, list[str]]
    """Ledger index -> the skipped node ids it allowed."""
    unlisted: list[tuple[str, str]]
    """(node id, skip message) of skips no active entry allows."""
    stale: list[int]
    """Ledger indexes whose tests were fully exercised but none skipped as the entry says."""
    unjudged: int
    """Active entries this run could not judge (their file was not collected whole, or not all ran)."""
    covered: int
    """Patched-pass skips of tests the unpatched pass covers."""

    @property
    def ok(self) -> bool:
        return not self.unlisted and not self.stale


def judge(record: RunRecord, ledger: Sequence[Allowed]) -> Judgement:
    active = [(index, entry) for index, entry in enumerate(ledger) if entry.is_active()]
    node_patterns = {index: _node_regex(entry.nodes) for index, entry in active}
    reason_patterns = {index: re.compile(entry.reason) for index, entry in active}

    allowed: dict[int, list[str]] = {}
    unlisted: list[tuple[str, str]] = []
    covered = 0
    for nodeid, message in record.skips.items():
        if nodeid in record.covered and message == ONE_PASS_REASON:
            covered += 1
            continue
        for index, _ in active:
            if node_patterns[index].match(nodeid) and reason_patterns[index].search(message):
                allowed.setdefault(index, []).append(nodeid)
                break
        else:
            unlisted.append((nodeid, message))

    masked_files = {file_of(nodeid) for index, entry in active if entry.masks_file for nodeid in allowed.get(index, ())}
    collected_files = {file_of(nodeid) for nodeid in record.collected}
    stale, unjudged = [], 0
    for index, entry in active:
        if index in allowed or entry.category == ENVIRONMENT:  # conditions of a local run: may skip, or not
            continue
        entry_file = file_of(entry.nodes)
        whole = (entry_file in collected_files and entry_file not in record.narrowed_files
                 and entry_file not in masked_files and "*" not in entry_file)
        targets = [nodeid for nodeid in record.collected if node_patterns[index].match(nodeid)]
        if whole and all(nodeid in record.ran and nodeid not in record.covered for nodeid in targets):
            stale.append(index)
        else:
            unjudged += 1
    return Judgement(allowed, unlisted, stale, unjudged, covered)


def describe(judgement: Judgement, record: RunRecord, ledger: Sequence[Allowed]) -> list[str]:
    """The terminal section: counts, then every unlisted skip and stale entry."""
    by_category: dict[str, int] = defaultdict(int)
    for index, nodeids in judgement.allowed.items():
        by_category[ledger[index].category] += len(nodeids)
    allowed_total = sum(by_category.values())
    lines = [f"skips: {len(record.skips)} ({allowed_total} allowed by the ledger, {len(judgement.unlisted)} not "
             f"allowed, {judgement.covered} patched-pass skips covered by the unpatched pass)"]
    for category in sorted(by_category):
        lines.append(f"  {category}: {by_category[category]}")
    lines.append(f"xfails (spec/unified/known_failures.py, strict): {record.xfailed} failed as expected, "
                 f"{record.xfail_not_run} not run, {record.xpassed_strict} passed unexpectedly (failures), "
                 f"{record.xpassed} non-strict xpasses")
    lines.append(f"ledger entries: {len(judgement.allowed)} matched, {len(judgement.stale)} stale, "
                 f"{judgement.unjudged} not judged by this run")
    if judgement.unlisted:
        lines.append("")
        lines.append(f"SKIPS NOT IN THE LEDGER ({len(judgement.unlisted)}; allow them in spec/skip_ledger.py "
                     "with an honest reason, or fix what skips):")
        by_message: dict[str, list[str]] = defaultdict(list)
        for nodeid, message in judgement.unlisted:
            by_message[message].append(nodeid)
        for message, nodeids in sorted(by_message.items()):
            lines.append(f"  {message}")
            lines.extend(f"      {nodeid}" for nodeid in sorted(nodeids))
    if judgement.stale:
        lines.append("")
        lines.append(f"STALE LEDGER ENTRIES ({len(judgement.stale)}; their tests ran and none skipped that way: "
                     "remove or correct them in spec/skip_ledger.py):")
        for index in judgement.stale:
            entry = ledger[index]
            lines.append(f"  [{entry.category}] nodes={entry.nodes!r} reason={entry.reason!r}")
            lines.append(f"      {entry.why}")
    return lines


def skip_message(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        message = str(longrepr[2])
    else:
        message = str(longrepr)
    return message[len("Skipped: "):] if message.startswith("Skipped: ") else message


class SkipLedger:
    """The pytest side: fills a RunRecord from hooks, judges it at session end. Under pytest-xdist each
    worker fills its own and hands it over; the controller judges the merged record."""

    def __init__(self, ledger: Sequence[Allowed] = LEDGER, dump_path: Optional[str] = None,
                 role: str = distributed.SINGLE) -> None:
        self.ledger = ledger
        self.dump_path = dump_path
        self.role = role
        self.record = RunRecord()
        self.judgement: Optional[Judgement] = None
        self.workers_down = 0

    @property
    def _recording(self) -> bool:
        return self.role != distributed.CONTROLLER  # the controller merges its workers' records instead

    def pytest_deselected(self, items: Iterable[pytest.Item]) -> None:
        if self._recording:
            self.record.narrowed_files.update(file_of(distributed.plain_nodeid(item.nodeid)) for item in items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not self._recording:
            return
        config = session.config
        for arg in config.args:
            if "::" in arg:  # ``file.py::node`` collects only part of the file
                path = (config.invocation_params.dir / arg.split("::", 1)[0]).resolve()
                try:
                    self.record.narrowed_files.add(path.relative_to(config.rootpath).as_posix())
                except ValueError:
                    pass
        plain = distributed.plain_nodeid
        self.record.collected = [plain(item.nodeid) for item in session.items]
        self.record.covered = {plain(item.nodeid) for item in session.items if item.stash.get(_COVERED_KEY, False)}

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if self._recording and report.skipped:
            self.record.skips[report.nodeid] = skip_message(report)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self._recording:
            return
        nodeid = distributed.plain_nodeid(report.nodeid)
        if report.when == "setup":
            self.record.ran.add(nodeid)
        wasxfail = getattr(report, "wasxfail", None)
        if wasxfail is not None:
            if report.skipped and wasxfail.startswith("[NOTRUN]"):
                self.record.xfail_not_run += 1
            elif report.skipped:
                self.record.xfailed += 1
            elif report.passed:
                self.record.xpassed += 1
        elif report.failed and isinstance(report.longrepr, str) and report.longrepr.startswith("[XPASS(strict)]"):
            self.record.xpassed_strict += 1
        elif report.skipped:
            self.record.skips.setdefault(nodeid, skip_message(report))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: object, error: object) -> None:
        record = distributed.handed_over(node, "skip_ledger")
        if record is not None:
            self.record.merge(RunRecord.from_json(record))
            self.workers_down += 1

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.role == distributed.WORKER:
            distributed.hand_over(session.config, "skip_ledger", self.record.to_json())
            return  # a worker's share of the session is not the session: the controller judges
        self.judgement = judge(self.record, self.ledger)
        if self.dump_path:
            with open(self.dump_path, "w", encoding="utf-8") as fh:
                json.dump(self.record.to_json(), fh, indent=1, sort_keys=True)
        if not self.judgement.ok and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.judgement is None or not (self.record.collected or self.record.skips):
            return
        terminalreporter.section("skip ledger", red=not self.judgement.ok)
        for line in describe(self.judgement, self.record, self.ledger):
            terminalreporter.write_line(line)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--skip-ledger-dump", default=None, metavar="PATH",
                     help="write the skips and the tests that ran to PATH as JSON (python -m spec ledger PATH "
                          "judges it against spec/skip_ledger.py)")


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("greenmongo-skip-ledger"):
        config.pluginmanager.register(SkipLedger(dump_path=config.getoption("--skip-ledger-dump"),
                                                 role=distributed.role(config)), "greenmongo-skip-ledger")
