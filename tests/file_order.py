"""Under pytest-xdist, the costliest test files first, so that no long file starts last on one worker.

``--dist loadfile`` hands whole files to workers in collection order (with ``--no-loadscope-reorder``; the default
reorders by number of tests, not by time). A file that takes a minute and starts last keeps one core busy
while the other idles; handing out the longest first (the LPT rule) keeps both busy to the end.
``tests/file_costs.txt`` holds each costly file's seconds from one ``--durations=0`` run (only their order
matters); files not listed follow in their usual order. Refresh the table with
``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m pytest -n 2 --dist loadfile --no-loadscope-reorder
--durations=0 > durations.txt`` (as scripts/test.sh runs it) then
``python -m tests.file_order durations.txt > tests/file_costs.txt``.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import pytest

COSTS_FILE = Path(__file__).with_name("file_costs.txt")
#: Files under this many seconds are left out of the table (their order hardly matters).
LISTED_FROM_S = 3.0


def file_costs(path: Path = COSTS_FILE) -> dict[str, float]:
    """``{test file path relative to the repository: seconds}`` from the table (``SECONDS PATH`` per line)."""
    costs = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            seconds, name = line.split()
            costs[name] = float(seconds)
    return costs


def costliest_files_first(items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place: files by descending cost, each file's tests in their own order."""
    costs = file_costs()
    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(item.nodeid.split("::")[0], len(first_seen))
    items.sort(key=lambda item: (-costs.get(name := item.nodeid.split("::")[0], 0.0), first_seen[name]))


def costs_from_durations(text: str) -> Counter[str]:
    """Seconds per test file summed over setup, call and teardown from pytest's ``--durations=0`` lines."""
    totals: Counter[str] = Counter()
    for match in re.finditer(r"^\s*([\d.]+)s (?:setup|call|teardown)\s+([^\s:]+)", text, re.MULTILINE):
        totals[match[2]] += float(match[1])
    return totals


if __name__ == "__main__":
    totals = costs_from_durations(Path(sys.argv[1]).read_text(encoding="utf-8"))
    print("# seconds per test file (setup + call + teardown), from pytest --durations=0: see tests/file_order.py")
    for name, seconds in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0])):
        if seconds >= LISTED_FROM_S:
            print(f"{seconds:.1f} {name}")
