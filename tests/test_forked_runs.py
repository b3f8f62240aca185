"""``eval.forked_runs``: forked replay workers end on SIGTERM as plain processes do, even under the command's
SIGTERM handler (``Pool.terminate`` ends idle workers with SIGTERM; a worker that unwinds instead may block on
the pool's queue lock and its parent then waits for it forever)."""

from __future__ import annotations

import signal

from coba_cli.errors import _sigterm_raises
from eval.forked_runs import run_each


def _disposition(policy: str, pool: object, *, progress: object = None) -> tuple[str, bool]:
    """What a worker sees: its policy and whether SIGTERM has the default action there."""
    return policy, signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_forked_workers_take_sigterms_default_action_under_the_commands_handler():
    with _sigterm_raises():
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL  # the command's handler is on
        runs, workers = run_each(_disposition, ["a", "b", "c"], None, {}, workers=2, make_bar=lambda: None)
    assert workers == 2
    assert runs == [("a", True), ("b", True), ("c", True)]
