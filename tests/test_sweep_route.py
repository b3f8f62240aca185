"""``coba sweep --env route``: the route env's families (the threshold routers over their threshold) and routing
policies as points, each point's macro accuracy equal to the policy's own episodes replayed one by one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from agents.registry import make_policy
from agents.runner import replay
from coba_cli.main import main
from coba_env import CoBaEnv, compile_pool
from pools.default import resolve_pool
from train.sweep import THRESHOLD_GRID


def macro_accuracy(policy, compiled) -> float:
    """Independently: the policy on every route episode (``agents.runner``), accuracy averaged per dataset."""
    env = CoBaEnv(compiled, grouping="item", lam=0.0, **policy.env_kwargs())
    correct = [r["correct"] for r in replay(policy, env)]
    datasets = env.config.pool.dataset
    return 100 * float(np.mean([np.mean([c for c, d in zip(correct, datasets, strict=True) if d == ds])
                                for ds in dict.fromkeys(datasets.tolist())]))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "route"
    assert main(["sweep", "--env", "route", "--pool", "tiny", "--out", str(out), "--no-progress"]) == 0
    return pd.read_csv(out / "frontier.csv"), out


def test_a_route_sweep_traces_the_threshold_routers_and_places_the_routing_policies(sweep):
    table, out = sweep
    sizes = table.groupby("family").size().to_dict()
    assert sizes == {"route_threshold_judge": len(THRESHOLD_GRID), "route_threshold_agreement": len(THRESHOLD_GRID),
                     "route_cascade": 1, "model_switch": 1}
    compiled = compile_pool(resolve_pool("tiny"))
    rows = table.set_index("policy")
    for name, policy in (("route_cascade", make_policy("route_cascade")),
                         ("judge_t0", make_policy("route_threshold_judge", threshold=0.0)),
                         ("agreement_t1.01", make_policy("route_threshold_agreement", threshold=1.01))):
        assert rows.loc[name, "acc"] == pytest.approx(macro_accuracy(policy, compiled)), name
    assert (out / "frontier.md").is_file() and (out / "episodes.csv").is_file()


def test_a_replay_sweep_keeps_its_families(tmp_path):
    assert main(["sweep", "--pool", "tiny", "--out", str(tmp_path / "s"), "--no-progress"]) == 0
    table = pd.read_csv(tmp_path / "s" / "frontier.csv")
    assert set(table["family"]) == {"coba", "best_of_n"}
    assert "coba_n8_k4" in set(table["policy"]) and "bon4" in set(table["policy"])


@pytest.mark.parametrize(("env", "policies", "message"), [
    ("route", "coba", "--env route: none of the selected policies (coba_n2_k0, coba_n2_k1, coba_n4_k0, coba_n4_k2, "
                      "coba_n8_k2, ...) runs on the route env; expected at least one routing policy or route oracle"),
    ("replay", "route_threshold_judge", "--env replay: none of the selected policies (judge_t0, judge_t0.1, "
                                        "judge_t0.2, judge_t0.3, judge_t0.4, ...) runs on the replay env; expected "
                                        "at least one policy written for one generator per episode"),
])
def test_a_sweep_of_nothing_that_runs_on_the_env_exits_2(env, policies, message, tmp_path, capsys):
    code = main(["sweep", "--env", env, "--pool", "tiny", "--policies", policies, "--out", str(tmp_path / "s"),
                 "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err
    assert not (tmp_path / "s").exists()
