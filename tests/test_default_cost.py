"""Every command that takes ``--cost`` defaults the same way (issue 39 item 5): p_tokens on a pool that sizes every
model it calls, else the first measure the pool supports, said in one line (``coba_env.costs.default_cost_model``).

The pool is RouteLLM's hand-made pair (``tests/test_routellm_pool``): GPT-4 has no published size, so the pool gives
it params_b 0 and p_tokens would count its calls as free. ``coba solve`` and ``coba serve`` are not here: an
endpoint without a size is refused (``URL,MODEL,PARAMS_B``), so their calls are always sized and p_tokens stays.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from coba_cli.main import main
from pools.store import load_pool


@pytest.fixture(scope="module")
def unsized_pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.test_routellm_pool import _write

    folder = tmp_path_factory.mktemp("unsized")
    assert main(["pools", "import", str(_write(folder)), "--out", str(folder / "pool"), "--format", "routellm"]) == 0
    return folder / "pool"


def _expected(pool_dir: Path) -> tuple[str, str]:
    """The measure and the line, worked out from the pool's own model table: a model of size 0 rules p_tokens out,
    and tokens, the first measure, needs only the token counts every candidate row holds."""
    pool = load_pool(pool_dir)
    unsized = sorted(pool.models.loc[pool.models["params_b"].astype(float) <= 0, "name"])
    assert unsized and (pool.candidates["output_tokens"] > 0).all()
    return "tokens", (f"note: --cost not given: the pool gives {', '.join(unsized)} no size (params_b 0), so p_tokens "
                      "cannot weigh its calls; costs are measured in tokens, the first measure the pool supports")


def _bench(pool: Path, out: Path) -> list[str]:
    return ["bench", "--pool", str(pool), "--policies", "greedy", "--out", str(out), "--no-figures", "--no-progress",
            "--resamples", "20"]


def _bench_measure(out: Path, stdout: str) -> str:
    return json.loads((out / "results.json").read_text())["meta"]["cost_model"]


def _sweep(pool: Path, out: Path) -> list[str]:
    return ["sweep", "--pool", str(pool), "--env", "route", "--policies", "route_threshold_agreement", "--out",
            str(out), "--no-figures", "--no-progress"]


def _sweep_measure(out: Path, stdout: str) -> str:
    """The measure whose per-item column equals the frontier's cost column (the table names tokens total_tokens)."""
    rows = list(csv.DictReader((out / "frontier.csv").open()))
    columns = {"total_tokens": "tokens", "p_tokens": "p_tokens", "calls": "calls", "latency_s": "latency"}
    same = [name for column, name in columns.items() if all(r["cost"] == r[column] for r in rows)]
    assert len(same) == 1, rows
    return same[0]


def _train(pool: Path, out: Path) -> list[str]:
    return ["train", "knn_router", "--pool", str(pool), "--out", str(out), "--no-progress"]


def _train_measure(out: Path, stdout: str) -> str:
    return json.loads((out / "controller.json").read_text())["cost_model"]


def _calibrate(pool: Path, out: Path) -> list[str]:
    return ["calibrate", "route_threshold_agreement", "--pool", str(pool), "--target", "accuracy=0.5", "--k", "2"]


def _calibrate_measure(out: Path, stdout: str) -> str:
    line = next(x for x in stdout.splitlines() if x.startswith("calibration folds"))
    return line.split(", mean ")[1].split()[0]


@pytest.mark.parametrize("command, measure_used", [(_bench, _bench_measure), (_sweep, _sweep_measure),
                                                   (_train, _train_measure), (_calibrate, _calibrate_measure)],
                         ids=["bench", "sweep", "train", "calibrate"])
def test_without_cost_every_command_takes_the_first_measure_the_pool_supports_and_says_so(
        unsized_pool, tmp_path, capsys, command, measure_used) -> None:
    expected, line = _expected(unsized_pool)
    capsys.readouterr()
    assert main(command(unsized_pool, tmp_path / "out")) == 0
    got = capsys.readouterr()
    assert [x for x in got.err.splitlines() if x.startswith("note: --cost")] == [line]
    assert measure_used(tmp_path / "out", got.out) == expected


@pytest.mark.parametrize("command", ["bench", "sweep", "train", "calibrate"])
def test_every_cost_option_states_the_default(command, capsys) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"] if command != "train" else ["train", "mlp", "--help"])
    assert "the first measure the pool supports, said in one line" in " ".join(capsys.readouterr().out.split())
