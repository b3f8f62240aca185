"""One rule for "this pool has prices": cost model usd needs a price for every model the episodes call.

The hand-made pool: dataset d1 is answered by generator A, dataset d2 by generator B (two items each, two
candidates per item, 100 prompt + 50 output tokens per call, no verifiers). With A priced at $1/M input and
$2/M output, one call of A costs (100 * 1 + 50 * 2) / 1e6 = $0.0002.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from coba_cli.main import main
from coba_env import compile_pool
from coba_env.env import CoBaEnv
from coba_env.vector_env import CoBaVectorEnv
from pools.prices import PRICES_KEY
from pools.store import load_pool
from tests.conftest import write_jsonl


def _records() -> list[dict]:
    out = []
    for dataset, generator in (("d1", "A"), ("d2", "B")):
        for i in range(2):
            for k in range(2):
                out.append({"dataset": dataset, "item_id": str(i), "problem": f"{dataset} {i}?", "gold": "1",
                            "generator": generator, "generator_params_b": 2.0, "candidate": k,
                            "text": "So the answer is \\boxed{1}.", "prompt_tokens": 100, "output_tokens": 50,
                            "latency_s": 1.0})
    return out


@pytest.fixture
def pools(tmp_path: Path) -> dict[str, Path]:
    """The pool imported three ways: A priced, no prices, and both generators priced."""
    src = write_jsonl(tmp_path / "src.jsonl", _records())
    out = {}
    for name, prices in (("a_priced", ["--price", "A=1,2"]), ("unpriced", []),
                         ("priced", ["--price", "A=1,2", "--price", "B=3"])):
        out[name] = tmp_path / name
        assert main(["pools", "import", str(src), str(out[name]), *prices]) == 0
    return out


def test_a_subset_calling_only_priced_models_runs_in_dollars(pools: dict[str, Path], tmp_path: Path, capsys) -> None:
    code = main(["bench", "--pool", str(pools["a_priced"]), "--datasets", "d1", "--cost", "usd", "--policies",
                 "greedy", "--out", str(tmp_path / "out"), "--no-figures", "--no-progress", "--resamples", "20"])
    assert code == 0, capsys.readouterr().err
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["policies"]["greedy"]["macro"]["usd"] == pytest.approx(2e-4)  # one call of A


@pytest.mark.parametrize(("pool", "args", "unpriced"), [
    ("a_priced", ["bench", "--cost", "usd", "--policies", "greedy", "--no-figures", "--no-progress"], "B"),
    ("unpriced", ["bench", "--cost", "usd", "--policies", "greedy", "--no-figures", "--no-progress"], "A, B"),
    ("unpriced", ["sweep", "--cost", "usd", "--policies", "best_of_n", "--lambdas", "0.1", "--no-progress"], "A, B"),
    ("a_priced", ["sweep", "--cost", "usd", "--policies", "best_of_n", "--lambdas", "0.1", "--no-progress"], "B"),
    ("unpriced", ["train", "mlp", "--cost", "usd", "--no-progress"], "A, B"),
])
def test_usd_on_a_pool_without_every_price_is_one_line(pools: dict[str, Path], tmp_path: Path, capsys, pool: str,
                                                       args: list[str], unpriced: str) -> None:
    code = main([*args, "--pool", str(pools[pool]), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert re.search(rf"needs a price for every model the pool calls; it has none for {unpriced} ", err), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("make", [lambda p: CoBaEnv(p, cost_model="usd"),
                                  lambda p: CoBaVectorEnv(2, p, cost_model="usd")])
@pytest.mark.parametrize(("pool", "unpriced"), [("unpriced", "A, B"), ("a_priced", "B")])
def test_envs_refuse_usd_naming_the_unpriced_models(pools: dict[str, Path], make, pool: str, unpriced: str) -> None:
    compiled = compile_pool(load_pool(pools[pool]))
    with pytest.raises(ValueError, match=rf"cost model 'usd' needs a price .* none for {unpriced} "):
        make(compiled)


def test_envs_accept_usd_where_every_called_model_is_priced(pools: dict[str, Path]) -> None:
    a_only = compile_pool(load_pool(pools["a_priced"]))
    d1 = CoBaEnv(a_only, cost_model="usd", datasets="d1")  # the d1 episodes call A only
    d1.reset(options={"episode": 0})
    d1.step(0)
    *_, info = d1.step(d1.layout.stop_action)
    assert info["costs"]["usd"] == pytest.approx(2e-4)
    priced = compile_pool(load_pool(pools["priced"]))
    assert priced.usd_priced and not a_only.usd_priced
    assert load_pool(pools["priced"]).manifest[PRICES_KEY]["B"] == {"input": 3.0, "output": 3.0}
