"""docs/CONTRIBUTING.md's recipes, step by step: a policy, a routing policy and a verifier role.

Each test does what its recipe's numbered steps say, then checks the result against values worked out by hand
(a policy that samples exactly n candidates makes n calls per item; a routing policy that samples only the
smallest generator's candidates names that generator in every SAMPLE; a role that serves V1 is the one CoBa
judges with). The importer, controller-kind and cost-measure recipes are followed by tests/test_import_formats.py,
tests/test_controller_kinds.py and tests/test_costs.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from agents.configured import ConfiguredPolicy, register
from agents.routing_base import RoutePolicy
from coba_cli.main import main as coba
from pools.default import resolve_pool


# Step 1 of "Add a policy": a ConfiguredPolicy with declared defaults, registered under its kind (importing this
# test module is step 2, what agents/registry.py's import of a policy module does).
@register("contrib_first_n")
class FirstN(ConfiguredPolicy):
    """SAMPLE ``n`` candidates, then STOP (answer frequency picks)."""

    defaults: ClassVar[dict[str, Any]] = {"n": 2}
    n: int

    def configure(self) -> None:
        """One candidate at least; the fusion rank at STOP."""
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        self.selection = "fusion"

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Any) -> int:
        """SAMPLE until ``n`` are revealed."""
        if evidence.n_revealed < self.n and action_mask[self.sample_id]:
            return self.sample_id
        return self.stop_id


# Step 1 of "Add a routing policy": a RoutePolicy naming its generator by size through a generator parameter.
@register("contrib_only_one")
class OnlyOne(RoutePolicy):
    """SAMPLE ``n`` candidates of generator ``which`` ("cheapest", "largest" or a name), then STOP."""

    defaults: ClassVar[dict[str, Any]] = {"n": 2, "which": "cheapest"}
    generator_params: ClassVar[tuple[str, ...]] = ("which",)
    n: int
    which: str

    def configure(self) -> None:
        """The newest answered candidate at STOP."""
        self.selection = "last"

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Any) -> int:
        """SAMPLE the chosen generator until it has ``n`` candidates revealed."""
        g = self.gen["which"]
        sample = self.layout.sample_action(g)
        if evidence.gen_revealed[g] < self.n and action_mask[sample]:
            return sample
        return self.stop_id


def _spec_file(tmp_path: Path, entries: str) -> Path:
    """Step 3 of both recipes in a YAML file of the test's own (agents/policies.yaml takes the same entries)."""
    path = tmp_path / "mine.yaml"
    path.write_text("policies:\n" + entries)
    return path


def test_add_a_policy(tmp_path: Path) -> None:
    specs = _spec_file(tmp_path, "  first_three: {kind: contrib_first_n, label: First three, group: baseline, "
                                 "params: {n: 3}}\n")
    out = tmp_path / "bench"
    assert coba(["bench", "--pool", "tiny", "--policies", f"greedy,{specs}", "--no-figures", "--no-progress",
                 "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    mine = results["policies"]["first_three"]
    assert mine["label"] == "First three" and mine["description"]["params"] == {"n": 3}
    assert mine["macro"]["calls"] == 3.0  # tiny has N = 8 >= 3 candidates per episode: exactly three samples
    records = pd.read_parquet(out / "episodes.parquet")
    assert set(records.loc[records.policy == "first_three", "actions"]) == {"S S S STOP"}


def test_add_a_routing_policy(tmp_path: Path) -> None:
    models = resolve_pool("tiny").models
    generators = set(models.loc[models.role.str.contains("generator"), "name"])
    cheapest = min(generators, key=lambda g: float(models.set_index("name").loc[g, "params_b"]))
    specs = _spec_file(tmp_path, "  cheapest_two: {kind: contrib_only_one, label: Cheapest two, group: routing, "
                                 "params: {n: 2, which: cheapest}}\n")
    out = tmp_path / "bench"
    assert coba(["bench", "--pool", "tiny", "--env", "route", "--policies", f"{specs},route_cascade",
                 "--no-figures", "--no-progress", "--out", str(out)]) == 0
    records = pd.read_parquet(out / "episodes.parquet")
    mine = records[records.policy == "cheapest_two"]
    assert len(mine) == records.loc[records.policy == "route_cascade"].shape[0] > 0  # one record per item, as hers
    assert set(mine["actions"]) == {f"SAMPLE_{cheapest} SAMPLE_{cheapest} STOP"}
    # A replay bench leaves a routing policy out, with the reason.
    out2 = tmp_path / "bench2"
    assert coba(["bench", "--pool", "tiny", "--policies", f"greedy,{specs}", "--no-figures", "--no-progress",
                 "--out", str(out2)]) == 0
    assert not json.loads((out2 / "results.json").read_text())["policies"]["cheapest_two"]["applicable"]


# "Add a verifier role", step 1 (one VerifierRole entry), done to a copy of pools/schema.py in a fresh process: a
# pairwise judge that may serve only V1, after every built-in role (preference 3), with V1's fusion weight.
ROLE_ENTRY = '    VerifierRole("pairwise_judge", "pairwise judge", "V1", (("V1", 3),)),\n'
NEW_ROLE_RUN = r'''
import sys, types
from pathlib import Path

path = Path(sys.argv[1]) / "pools" / "schema.py"
source = path.read_text()
anchor = "VERIFIER_ROLE_TABLE: tuple[VerifierRole, ...] = (\n"
assert source.count(anchor) == 1
module = types.ModuleType("pools.schema")
module.__file__ = str(path)
sys.modules["pools.schema"] = module  # before the package imports it: every layer sees the edited table
exec(compile(source.replace(anchor, anchor + sys.argv[2]), str(path), "exec"), module.__dict__)

sys.path.insert(0, sys.argv[1])
from agents.registry import make_policy
from coba_env import CoBaEnv, compile_pool
from coba_env.rules.roles import ROLE_NAMES
from tests.conftest import make_synthetic_pool

pool = make_synthetic_pool(verifiers={"PJ": ("Pairwise-3B", 3.0, "pairwise_judge"),
                                      "V3": ("Qwen3-14B", 14.8, "strong_verifier")})
env = CoBaEnv(compile_pool(pool))
roles = env.config.roles
# V1: cheap_judge 0, reward_model 1, strong_verifier 2, pairwise_judge 3 -> the strong verifier serves V1 here ...
assert roles.slot("V1") == env.pool.tiers.index("V3") and roles.slot("V3") == env.pool.tiers.index("V3")
alone = make_synthetic_pool(verifiers={"PJ": ("Pairwise-3B", 3.0, "pairwise_judge")})
env = CoBaEnv(compile_pool(alone))
# ... and the pairwise judge where it is the only outcome verifier; it serves nothing else.
assert env.config.roles.slot("V1") == 0 and env.config.roles.slot("V3") is None
assert ROLE_NAMES["pairwise_judge"] == "pairwise judge"
light = make_policy("coba_light")
assert light.applicable(env) == (True, ""), light.applicable(env)
print("ok")
'''


def test_add_a_verifier_role(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", NEW_ROLE_RUN, str(repo), ROLE_ENTRY], capture_output=True,
                          text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().splitlines()[-1] == "ok", done.stdout[-2000:] + done.stderr[-3000:]
