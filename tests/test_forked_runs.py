"""``eval.forked_runs``: forked replay workers end on SIGTERM as plain processes do, even under the command's
SIGTERM handler (``Pool.terminate`` ends idle workers with SIGTERM; a worker that unwinds instead may block on
the pool's queue lock and its parent then waits for it forever)."""

from __future__ import annotations

import signal

import pytest

from coba_cli.errors import _sigterm_raises
from eval.forked_runs import ordered_map, run_each


def _disposition(policy: str, pool: object, *, progress: object = None) -> tuple[str, bool]:
    """What a worker sees: its policy and whether SIGTERM has the default action there."""
    return policy, signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_forked_workers_take_sigterms_default_action_under_the_commands_handler():
    with _sigterm_raises():
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL  # the command's handler is on
        runs, workers = run_each(_disposition, ["a", "b", "c"], None, {}, workers=2, make_bar=lambda: None)
    assert workers == 2
    assert runs == [("a", True), ("b", True), ("c", True)]


def _square_and_disposition(item: int, offset: int) -> tuple[int, int, bool]:
    """A chunk worker's view: its result for ``item``, its pid, whether SIGTERM has the default action there."""
    import os

    return item * item + offset, os.getpid(), signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_ordered_map_gives_results_in_item_order_from_workers_forked_once():
    import os

    with _sigterm_raises(), ordered_map(_square_and_disposition, range(6), (10,), workers=2) as results:
        got = list(results)
    assert [value for value, _, _ in got] == [10, 11, 14, 19, 26, 35]  # i * i + 10, in order
    pids = {pid for _, pid, _ in got}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2  # two workers at most, none of them this process
    assert all(default for _, _, default in got)
    with ordered_map(_square_and_disposition, range(3), (0,), workers=1) as results:
        assert [(v, pid) for v, pid, _ in results] == [(0, os.getpid()), (1, os.getpid()), (4, os.getpid())]


_ORPHAN_SCRIPT = """
import os, sys, time
from eval.forked_runs import ordered_map

def slow(item, folder):
    open(os.path.join(folder, f"started-{os.getpid()}"), "w").close()
    time.sleep(2)
    open(os.path.join(folder, f"late-{item}"), "w").close()  # what a worker outliving its parent would write
    return item

with ordered_map(slow, range(4), (sys.argv[1],), workers=2) as results:
    list(results)
"""


def test_ordered_maps_workers_end_with_a_parent_killed_by_sigkill(tmp_path):
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    parent = subprocess.Popen([sys.executable, "-c", _ORPHAN_SCRIPT, str(tmp_path)], cwd=root,
                              env={**os.environ, "PYTHONPATH": str(root)})
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("started-*"))) < 2:
        assert parent.poll() is None and time.monotonic() < deadline, "the workers never started"
        time.sleep(0.01)
    parent.kill()  # SIGKILL: no handler, no Pool.terminate
    parent.wait()
    time.sleep(3)  # past the 2 s a surviving worker would need to finish its item
    assert not list(tmp_path.glob("late-*"))


def _killed_on(item: int, victim: int) -> int:
    """A task whose worker is killed (as by the out-of-memory killer) on item ``victim``."""
    import os
    import time

    if item == victim:
        time.sleep(1.0)  # the other worker's earlier items reach the parent before the death is seen
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.2)
    return item


def test_ordered_map_stops_with_one_error_when_a_worker_is_killed():
    got = []
    with pytest.raises(ChildProcessError, match=r"^a worker process ended abruptly \(a signal such as the "
                                                r"out-of-memory killer's or a kill, or an exit\) before its task "
                                                r"was done$"):
        with ordered_map(_killed_on, range(6), (2,), workers=2) as results:
            got.extend(results)
    assert got == [0, 1]  # the items before the killed one, in order; then the error, not a wait for ever


def _fails_on(item: int, victim: int) -> int:
    if item == victim:
        raise ValueError(f"item {item}: bad")
    return item


def test_ordered_map_raises_a_tasks_own_error_in_the_parent():
    with pytest.raises(ValueError, match=r"^item 3: bad$"):
        with ordered_map(_fails_on, range(6), (3,), workers=2) as results:
            list(results)


def _killed_on_policy(policy: str, pool: object, *, progress: object = None) -> str:
    """A per-policy replay whose worker is killed (as by the out-of-memory killer) on policy "b"."""
    import os

    if policy == "b":
        os.kill(os.getpid(), signal.SIGKILL)
    return policy


def test_run_each_stops_with_one_error_when_a_worker_is_killed():
    with pytest.raises(ChildProcessError, match=r"^a worker process ended abruptly \(a signal such as"):
        run_each(_killed_on_policy, ["a", "b", "c"], None, {}, workers=2, make_bar=lambda: None)


def _mark(item: int, folder: str) -> int:
    """A slow task that leaves a file per item it ran."""
    import time
    from pathlib import Path

    time.sleep(0.3)
    Path(folder, f"ran-{item}").touch()
    return item


def test_ordered_map_left_early_ends_the_queued_tasks(tmp_path):
    import time

    with ordered_map(_mark, range(20), (str(tmp_path),), workers=2) as results:
        for _ in results:
            break  # every item was queued at once; leaving must not run them all
    time.sleep(1.0)  # what a worker left alive would still have run
    ran = len(list(tmp_path.glob("ran-*")))
    assert 1 <= ran <= 6  # the first results (two workers, ~0.3 s each), never all 20
