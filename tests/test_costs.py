"""The cost-row helpers of coba_env.costs: one record per row, named by COST_MEASURES."""

from __future__ import annotations

import numpy as np
import pytest

from coba_env.costs import COST_MEASURES, cost_record, sum_costs


@pytest.mark.parametrize("row", [[1.0, 2.0, 3.0, 4.0, 5.0], (0.5, 250.0, 1.0, 0.01, 1e-6), np.arange(5.0)])
def test_cost_record_names_every_measure_in_order(row):
    record = cost_record(row)
    assert list(record) == list(COST_MEASURES) == ["tokens", "p_tokens", "calls", "latency", "usd"]
    assert list(record.values()) == list(row)


def test_cost_record_is_a_new_dict_each_time():
    row = [1.0, 2.0, 3.0, 4.0, 5.0]
    first, second = cost_record(row), cost_record(row)
    first["tokens"] = 9.0
    assert second["tokens"] == 1.0


@pytest.mark.parametrize("row", [[], [1.0, 2.0, 3.0, 4.0], [1.0] * 6])
def test_cost_record_refuses_a_row_of_another_length(row):
    with pytest.raises(ValueError, match=r"one value per measure \['tokens', 'p_tokens', 'calls', 'latency', 'usd'\]"):
        cost_record(row)


def test_sum_costs_adds_rows_in_order():
    """Hand-worked: 0.1 + 0.2 + 0.3 in that order is 0.6000000000000001, not 0.6."""
    rows = [[0.1, 1.0, 1.0, 0.0, 0.0], [0.2, 2.0, 1.0, 0.0, 0.0], [0.3, 3.0, 1.0, 0.0, 0.0]]
    total = sum_costs((0.0,) * 5, rows)
    assert total == (0.6000000000000001, 6.0, 3.0, 0.0, 0.0)


# -------------------------------------------------------------------------------------------------- the table
#: docs/CONTRIBUTING.md "Add a cost measure", step 1: one entry in coba_env.costs.COST_TABLE (here: energy as
#: 0.001 Wh per parameter-weighted token, so each call's value is its p_tokens x 0.001, computed independently).
ENERGY_ENTRY = ('    CostMeasure("energy", "energy_wh", "Wh", "Energy", "energy per item, Wh",\n'
                '                lambda c: c.tokens * c.params_b * 0.001, per_item="Wh per item"),\n')

NEW_MEASURE_RUN = r'''
import sys, types
from pathlib import Path

path = Path(sys.argv[1]) / "coba_env" / "costs.py"
source = path.read_text()
anchor = "COST_TABLE: tuple[CostMeasure, ...] = (\n"
assert source.count(anchor) == 1
module = types.ModuleType("coba_env.costs")
module.__file__ = str(path)
sys.modules["coba_env.costs"] = module  # before the package imports it: every layer sees the edited table
exec(compile(source.replace(anchor, anchor + sys.argv[2]), str(path), "exec"), module.__dict__)

import numpy as np
from coba_env import CoBaEnv, compile_pool
from coba_env.costs import COST_MEASURES, call_costs
from coba_env.vector_env import CoBaVectorEnv
from pools.default import resolve_pool

assert COST_MEASURES == ("energy", "tokens", "p_tokens", "calls", "latency", "usd"), COST_MEASURES
pool = compile_pool(resolve_pool("tiny"))
assert pool.gen_cost.shape[-1] == pool.ver_cost.shape[-1] == 6
assert np.array_equal(pool.gen_cost[..., 0], pool.gen_cost[..., 2] * 0.001)
assert np.array_equal(pool.ver_cost[..., 0], pool.ver_cost[..., 2] * 0.001)
assert call_costs(100, 50, 2.0, 0.5)[0] == 150 * 2.0 * 0.001
for grouping in ("pair", "item"):
    env = CoBaEnv(pool, grouping=grouping, cost_model="energy", lam=0.5, budget=2.0)
    venv = CoBaVectorEnv(1, pool, grouping=grouping, cost_model="energy", lam=0.5, budget=2.0)
    _, info = env.reset(options={"episode": 0})
    _, vinfo = venv.reset(options={"episodes": [0]})
    rewards, total = [], 0.0
    for _ in range(3):
        legal = np.flatnonzero(info["action_mask"])
        a = int(legal[0]) if legal[0] != env.layout.stop_action else int(legal[-1])
        _, reward, done, _, info = env.step(a)
        _, vreward, _, _, vinfo = venv.step(np.array([a]))
        assert vreward[0] == reward
        rewards.append(reward)
    _, reward, done, _, info = env.step(env.layout.stop_action)
    _, _, _, _, vinfo = venv.step(np.array([env.layout.stop_action]))
    trace = info["trace"].to_list()
    assert done and list(info["costs"]) == list(COST_MEASURES)
    energy = sum(step["cost"]["p_tokens"] * 0.001 for step in trace)
    assert abs(info["costs"]["energy"] - energy) < 1e-12 and info["costs"]["energy"] > 0
    assert abs(sum(rewards) + 0.5 * energy / 2.0) < 1e-12  # the reward charges the new measure
    assert np.array_equal(vinfo["final_costs"][0], np.array(list(info["costs"].values())))
    if grouping == "item":
        spend = info["spend_by_generator"]
        assert all(list(s) == list(COST_MEASURES) for s in spend.values())
        assert abs(sum(s["energy"] for s in spend.values()) - sum(
            step["cost"]["energy"] for step in trace if step["action"].startswith("SAMPLE"))) < 1e-12

# The bench: the episode records, results.json's metrics and units, and the report's tables carry it too.
import json
import pandas as pd
from coba_cli.main import main as coba
out = Path.cwd() / "bench"
assert coba(["bench", "--pool", "tiny", "--policies", "coba_light,bon4_majority", "--cost", "energy",
             "--no-figures", "--no-progress", "--out", str(out)]) == 0
records = pd.read_parquet(out / "episodes.parquet")
assert np.allclose(records["energy"], records["p_tokens"] * 0.001, rtol=1e-12, atol=0)
results = json.loads((out / "results.json").read_text())
assert results["meta"]["units"]["energy_wh"] == "Wh per item"
light = results["policies"]["coba_light"]
assert abs(light["macro"]["energy_wh"] - light["macro"]["p_tokens"] * 0.001) < 1e-9 * light["macro"]["p_tokens"]
header = (out / "tables" / "main.md").read_text().splitlines()[0]
assert header.split("|")[-2].strip() == "Energy ↓", header  # after Total Tok., Calls, P-Tok., Latency: a new measure comes last
print("ok")
'''


def test_a_new_cost_measure_is_one_table_entry(tmp_path):
    """The documented step alone (one COST_TABLE entry with its fill rule) puts a new measure into the compiled
    pool, both groupings' costs, rewards and final info, the vector env's final costs, live call costs, and a
    bench's episode records, results.json (metric and unit) and report tables."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", NEW_MEASURE_RUN, str(repo), ENERGY_ENTRY], capture_output=True,
                          text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().splitlines()[-1] == "ok", done.stdout[-2000:] + done.stderr[-3000:]


def test_the_table_generates_every_measures_names():
    from coba_env.compiled import as_compiled
    from coba_env.costs import COST_TABLE, measure, supported_measures

    assert COST_MEASURES == tuple(m.name for m in COST_TABLE)
    assert [m.metric for m in COST_TABLE] == ["total_tokens", "p_tokens", "calls", "latency_s", "usd"]
    assert measure("latency").label == "Latency" and measure("usd").needs_prices
    with pytest.raises(ValueError, match=r"unknown cost model 'watts'; expected one of \['tokens', 'p_tokens', "
                                         r"'calls', 'latency', 'usd'\]"):
        measure("watts")
    assert [m.name for m in supported_measures(as_compiled("tiny"))] == ["tokens", "p_tokens", "calls", "latency"]
