"""Print how many hostile-input cases the test suite has per ``coba`` command (tests/hostile_cases.py),
plus the other hostile tests (interruptions, the importer's property test).

    PYTHONPATH=. python scripts/count_hostile_cases.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.hostile_cases import case_counts  # noqa: E402

#: The hostile tests that are not command-line cases: edges of a run, crafted model files, the env inside its own
#: spaces, and valid input that was refused or mishandled (issue 39).
EDGE_FILES = ("tests/test_hostile_edges.py", "tests/test_hostile_model_files.py", "tests/test_hostile_env_spaces.py",
              "tests/test_hostile_accepted.py")


def _edge_tests() -> int:
    """How many test cases the hostile test files beside the command cases collect (``EDGE_FILES``; parametrized
    cases counted one by one)."""
    import subprocess

    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-o", "addopts=", "-p", "no:randomly",
                           *EDGE_FILES], cwd=Path(__file__).resolve().parents[1],
                          capture_output=True, text=True, check=False)
    return sum(1 for line in done.stdout.splitlines() if "::" in line)


def main() -> int:
    """Print the per-command counts and the total."""
    counts = case_counts()
    width = max(map(len, counts))
    for command, n in counts.items():
        print(f"{command:<{width}}  {n:>3}")
    print(f"{'total':<{width}}  {sum(counts.values()):>3}")
    print("plus: bench interruptions 8 (4 stages with a previous result, 3 without, 1 real SIGINT), "
          "1 hypothesis property (60 damaged JSONL files per run)")
    edges = _edge_tests()
    print(f"plus: {edges} edge tests in {', '.join(EDGE_FILES)} (a file appearing during the run, a second process on "
          "the same destination, SIGTERM, kill -9, crafted model files per command, a trickling server, names that "
          "look like paths, observations inside the observation space, plugins, signals after the result, file-size "
          "limits, valid input that was refused)")
    print(f"hostile total: {sum(counts.values()) + edges}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
