"""``coba bench``: the runner's records, Pareto dominance, the end-to-end report on a small pool, the CLI."""

from __future__ import annotations

import argparse
import json
import random

import numpy as np
import pandas as pd
import pytest

from agents.base import Policy
from coba_cli import bench_cmd
from coba_cli.errors import run_guarded
from coba_env.compiled import compile_pool
from eval import pareto
from eval.bench import BenchInputError, run_bench
from eval.runner import replay_policy, run_policies, run_policy
from tests.factory import Cand, Ep, build_pool

MODELS = {"G": 10.0, "H": 5.0, "J1": 2.0, "J2": 4.0, "J3": 20.0}


def small_pool(n: int = 16, tiers: tuple[str, ...] = ("V1", "V3"), seed: int = 0, profile: str | None = None):
    """2 datasets (3 and 2 items) x 2 generators, N candidates with V1 / V3 scores on every candidate."""
    rng = random.Random(seed)
    eps = []
    for ds, n_items in (("d1", 3), ("d2", 2)):
        for i in range(n_items):
            for gen in ("G", "H"):
                p = rng.uniform(0.3, 0.9)
                cands = []
                for _ in range(n):
                    ok = rng.random() < p
                    scores = {t: min(1.0, max(0.0, rng.gauss(0.75 if ok else 0.35, 0.2))) for t in tiers}
                    cands.append(Cand("1" if ok else str(rng.randint(2, 4)), ok, output_tokens=rng.randint(200, 3000),
                                      latency_s=rng.uniform(1, 20), scores=scores))
                eps.append(Ep(cands, dataset=ds, item_id=f"{ds}-{i}", generator=gen))
    pool = build_pool(eps, models=MODELS)
    pool.models.loc[pool.models["name"] == "H", "role"] = "generator"
    pool.refresh_manifest()
    if profile is not None:
        pool.manifest["provenance"] = {"profile": profile}
    return pool


class FirstThenStop(Policy):
    """SAMPLE once, then STOP (greedy)."""

    name, label, group = "first", "First candidate", "baseline"

    def act(self, observation, action_mask, evidence):
        return self.sample_id if evidence.n_revealed == 0 else self.stop_id


class NeedsV2(Policy):
    """Requires the V2 tier, which the test pools lack."""

    name, label = "needs_v2", "Needs V2"
    requires_tiers = ("V2",)

    def act(self, observation, action_mask, evidence):
        return self.stop_id


# ---------------------------------------------------------------- runner

def test_run_policy_records_greedy_by_hand():
    eps = [Ep([Cand("7", True, prompt_tokens=100, output_tokens=1000, latency_s=10.0), Cand("8", False)]),
           Ep([Cand("8", False), Cand("7", True)], item_id="i1")]
    compiled = compile_pool(build_pool(eps))
    frame = run_policy(FirstThenStop(), compiled)
    # The pool has no verifier, so no verifier-call column (docs/BENCH.md, "Episode records").
    assert list(frame.columns) == ["policy", "episode_id", "dataset", "generator", "item_id", "actions", "n_actions",
                                   "n_samples", "selected_candidate", "selected_answer", "correct", "tokens",
                                   "p_tokens", "calls", "latency", "reward", "oracle_available"]
    first = frame.iloc[0]
    assert first["actions"] == "S STOP"
    assert (first["n_samples"], first["n_actions"]) == (1, 1)
    assert first["tokens"] == 1100 and first["p_tokens"] == 11000 and first["calls"] == 1 and first["latency"] == 10
    assert first["correct"] and first["selected_answer"] == "7" and first["reward"] == 1.0
    second = frame.iloc[1]
    assert not second["correct"] and second["oracle_available"]  # allocation error: a correct one was in the pool


def test_not_applicable_policy_gives_empty_frame_with_reason():
    compiled = compile_pool(small_pool(n=4))
    frame = run_policy(NeedsV2(), compiled)
    assert frame.empty and "V2" in frame.attrs["not_applicable"]
    run = replay_policy(NeedsV2(), compiled)
    assert not run.applicable


def test_forked_workers_match_one_process():
    from agents.registry import make_policy

    if "fork" not in __import__("multiprocessing").get_all_start_methods():
        pytest.skip("fork is not available")
    compiled = compile_pool(small_pool())
    names = ["coba_strong", "bon4_majority", "greedy"]
    one = run_policies(names, compiled, workers=1, progress=False).records
    two = run_policies([make_policy(n) for n in names], compiled, workers=2, progress=False).records
    pd.testing.assert_frame_equal(one, two)


# ---------------------------------------------------------------- Pareto

POINTS = {"cheap": (0.5, 40.0), "a": (1.0, 50.0), "b": (2.0, 60.0), "c": (3.0, 55.0), "d": (2.0, 58.0),
          "e": (4.0, 60.0)}


def test_pareto_front_and_dominance():
    front = [p.name for p in pareto.pareto_front(POINTS)]
    assert front == ["cheap", "a", "b"]
    dom = pareto.dominance(POINTS)
    assert dom["b"] == ["c", "d", "e"]  # same cost as d with more accuracy; same accuracy as e, cheaper
    assert dom["a"] == [] and dom["c"] == []
    assert pareto.dominated_by(POINTS)["c"] == ["b", "d"]
    assert pareto.dominates(pareto.Point("x", 1, 1), pareto.Point("y", 1, 1)) is False


# ---------------------------------------------------------------- end to end

EXPECTED_TABLES = ["main", "pooled", "per_dataset", "per_dataset_p_tokens", "per_generator", "ablation", "highcost",
                   "allocation", "oracle_gap", "oracle_gap_by_dataset", "bootstrap", "pairwise"]
EXPECTED_FIGURES = ["frontier", "per_dataset_frontiers", "per_dataset_heatmap", "action_allocation", "cost_savings"]
BENCH_POLICIES = ["greedy", "coba_light", "coba_balanced", "coba_strong", "bon4_majority", "bon16_majority",
                  "self_eval_weighted", "process_outcome_evaluator", "pool_oracle"]


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    pool = small_pool()
    results = run_bench(pool, [*BENCH_POLICIES, NeedsV2()], out_dir=out, progress=False, workers=1,
                        resamples=300, quiet=True)
    return out, results


def test_bench_writes_every_file(bench):
    out, results = bench
    for name in ("report.md", "results.json", "episodes.parquet", "episodes.csv.gz"):
        assert (out / name).is_file(), name
    for stem in EXPECTED_TABLES:
        for ext in ("md", "csv", "tex"):
            assert (out / "tables" / f"{stem}.{ext}").is_file(), f"{stem}.{ext}"
    for stem in EXPECTED_FIGURES:
        for ext in ("png", "svg"):
            path = out / "figures" / f"{stem}.{ext}"
            assert path.is_file() and path.stat().st_size > 1000, f"{stem}.{ext}"
    assert not list(out.rglob("*.tmp")), "temporary files left behind"
    on_disk = json.loads((out / "results.json").read_text())
    assert on_disk == json.loads(json.dumps(results))
    assert set(on_disk) == {"meta", "policies", "pareto", "bootstrap", "paper", "files"}


def test_bench_results_json_content(bench):
    out, results = bench
    pol = results["policies"]
    assert set(pol) == {*BENCH_POLICIES, "needs_v2"}
    assert pol["needs_v2"]["applicable"] is False and "V2" in pol["needs_v2"]["not_applicable"]
    assert results["meta"]["not_applicable"] == {"needs_v2": pol["needs_v2"]["not_applicable"]}
    for name in BENCH_POLICIES:
        entry = pol[name]
        assert entry["applicable"] is True
        assert set(entry["macro"]) >= {"acc", "total_tokens", "calls", "p_tokens", "latency_s"}
        assert set(entry["per_dataset"]) == {"d1", "d2"} and set(entry["per_generator"]) == {"G", "H"}
        assert set(entry["allocation"]) == {"overall", "d1", "d2"}
        assert set(entry["oracle_gap"]) == {"overall", "d1", "d2"}
    # Macro accuracy recomputed from the written per-episode records.
    eps = pd.read_parquet(out / "episodes.parquet")
    assert len(eps) == len(BENCH_POLICIES) * 10  # 5 items x 2 generators
    strong = eps[eps.policy == "coba_strong"]
    macro = strong.groupby(["dataset", "generator"])["correct"].mean().mean() * 100
    assert pol["coba_strong"]["macro"]["acc"] == pytest.approx(macro)
    assert pol["pool_oracle"]["group"] == "oracle"
    # The oracle is never on a front and is listed as an excluded upper bound.
    assert "pool_oracle" not in results["pareto"]["front"]
    assert results["pareto"]["excluded_upper_bounds"] == ["pool_oracle"]
    boot = results["bootstrap"]
    assert boot["reference"] == "coba_strong" and boot["unit"] == "item" and boot["n_units"] == 5
    assert set(boot["vs_reference"]) == set(BENCH_POLICIES) - {"coba_strong"}
    assert results["paper"]["status"] == "skipped"
    gz = pd.read_csv(out / "episodes.csv.gz")
    assert len(gz) == len(eps)


def test_bench_report_mentions_everything(bench):
    out, _ = bench
    text = (out / "report.md").read_text()
    for stem in EXPECTED_FIGURES:
        assert f"figures/{stem}.png" in text
    assert "Not applicable" in text and "needs_v2" in text
    assert "No paper comparison" in text
    assert "upper bound" in text
    tex = (out / "tables" / "main.tex").read_text()
    assert r"\toprule" in tex and r"\bottomrule" in tex and r"\midrule" in tex


def test_bench_paper_comparison(tmp_path, monkeypatch):
    targets = {"main_table": {"columns": ["acc", "p_tokens"], "rows": {"greedy": [50.0, 1000.0],
                                                                       "coba_strong": [60.0, 2000.0]}},
               "per_dataset_accuracy": {"columns": ["d1", "d2"], "rows": {"greedy": [40.0, 45.0]}},
               "paired_bootstrap_per_example": {"coba_strong_minus_greedy": {"diff": 3.0, "ci": [1.0, 5.0],
                                                                             "p": "<.001"}},
               "claims": {"coba_strong_vs_greedy_p_tokens_saving": 0.5},
               "setup": {"evaluations": 20, "unique_examples": 5, "pairs": 4}}
    path = tmp_path / "targets.json"
    path.write_text(json.dumps(targets))
    monkeypatch.setenv("COBA_PAPER_TARGETS", str(path))
    out = tmp_path / "out"
    results = run_bench(small_pool(profile="paper"), ["greedy", "coba_strong"], out_dir=out, progress=False,
                        figures=False, workers=1, resamples=100, quiet=True)
    paper = results["paper"]
    assert paper["source"] == "`targets.json` (from $COBA_PAPER_TARGETS)"  # the file's name, not its path
    assert paper["main_table"]["greedy"]["acc"]["paper"] == 50.0
    assert paper["main_table"]["greedy"]["acc"]["ours"] == pytest.approx(results["policies"]["greedy"]["macro"]["acc"])
    assert paper["paired_bootstrap"]["coba_strong_minus_greedy"]["b"] == "greedy"
    assert paper["claims"]["coba_strong_vs_greedy_p_tokens_saving"]["ours"] is not None
    text = (out / "report.md").read_text()
    assert "Comparison with the paper" in text and "`targets.json`" in text and str(tmp_path) not in text
    assert (out / "tables" / "paper_main.md").is_file()
    assert not (out / "figures").exists()

    monkeypatch.setenv("COBA_PAPER_TARGETS", str(tmp_path / "missing.json"))
    results = run_bench(small_pool(profile="paper"), ["greedy"], out_dir=out, progress=False, figures=False,
                        quiet=True)
    assert results["paper"]["status"] == "not_found"
    assert "could not be read from `missing.json`" in (out / "report.md").read_text()


def test_bench_prints_summary(tmp_path, capsys):
    run_bench(small_pool(), "greedy,coba_light", out_dir=tmp_path, progress=False, figures=False)
    printed = capsys.readouterr().out
    assert "coba_light" in printed and "report:" in printed and str(tmp_path / "report.md") in printed


@pytest.mark.parametrize("policies, match", [
    ("greedy,nonsense", "unknown policy nonsense; known policies: greedy"),
    (["nope", "nada"], "unknown policies nope, nada"),
    ("", "no policy named"),
    ("greedy,greedy", None),
    ("missing.yaml", "policy spec file 'missing.yaml' does not exist"),
])
def test_bench_rejects_bad_policies(tmp_path, policies, match):
    if match is None:  # a repeated name is collapsed, not an error
        run_bench(small_pool(n=4), policies, out_dir=tmp_path, progress=False, figures=False, quiet=True)
        return
    with pytest.raises(BenchInputError, match=match):
        run_bench(small_pool(n=4), policies, out_dir=tmp_path, progress=False, figures=False, quiet=True)


def test_bench_policy_spec_file(tmp_path):
    spec = tmp_path / "mine.yaml"
    spec.write_text("policies:\n  coba_n6:\n    kind: coba\n    label: CoBa N6\n"
                    "    params: {n_max: 6, strong_routes: 3}\n  greedy: {}\n")
    results = run_bench(small_pool(), str(spec), out_dir=tmp_path / "o", progress=False, figures=False, quiet=True)
    assert set(results["policies"]) == {"coba_n6", "greedy"}
    assert results["policies"]["coba_n6"]["label"] == "CoBa N6"


def test_bench_rejects_bad_cost_model(tmp_path):
    with pytest.raises(BenchInputError, match="unknown cost model 'dollars'"):
        run_bench(small_pool(n=4), "greedy", cost_model="dollars", out_dir=tmp_path, quiet=True)


# ---------------------------------------------------------------- CLI

def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="coba")
    bench_cmd.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["bench", *argv])
    return run_guarded(args.func, args)


def test_cli_runs_on_a_pool_directory(tmp_path, capsys):
    from pools.store import save_pool

    pool_dir = save_pool(small_pool(n=4), tmp_path / "pool")
    code = _cli(["--pool", str(pool_dir), "--policies", "greedy,bon4_majority", "--out", str(tmp_path / "o"),
                 "--no-figures", "--no-progress", "--resamples", "50"])
    assert code == 0
    assert (tmp_path / "o" / "report.md").is_file()
    assert "report:" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--policies", "greedy,bogus"], "unknown policy bogus; known policies:"),
    (["--policies", " , "], "no policy named"),  # --workers 0 is refused by argparse (tests/hostile_cases.py)
])
def test_cli_bad_input_exits_2(tmp_path, capsys, argv, message):
    code = _cli([*argv, "--out", str(tmp_path / "o"), "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("coba: error:") and message in err


def test_cli_bad_pool_path_exits_2(tmp_path, capsys):
    code = _cli(["--pool", str(tmp_path / "no-such-pool"), "--policies", "greedy", "--out", str(tmp_path / "o")])
    assert code == 2
    assert "coba: error:" in capsys.readouterr().err


def test_cli_registered_in_main_parser(tmp_path, capsys):
    from coba_cli import main

    assert "coba_cli.bench_cmd" in main.SUBCOMMAND_MODULES
    code = main.main(["bench", "--policies", "nonsense", "--out", str(tmp_path)])
    assert code == 2 and "unknown policy nonsense" in capsys.readouterr().err


def test_records_have_no_nan_costs(bench):
    out, _ = bench
    eps = pd.read_parquet(out / "episodes.parquet")
    assert np.isfinite(eps[["tokens", "p_tokens", "calls", "latency", "reward"]].to_numpy()).all()


def test_bench_on_the_tiny_pool_marks_policies_that_need_more_candidates(tmp_path, monkeypatch):
    monkeypatch.setenv("COBA_CACHE_DIR", str(tmp_path / "cache"))
    results = run_bench("tiny", "all", out_dir=tmp_path / "o", progress=False, figures=False, quiet=True,
                        resamples=100)
    pol = results["policies"]
    assert results["meta"]["pool"]["provenance"]["profile"] == "tiny"
    assert pol["bon16_majority"]["applicable"] is False
    assert "16 candidates" in pol["bon16_majority"]["not_applicable"]
    assert pol["coba_strong"]["applicable"] is True
    assert "bon16_majority" in (tmp_path / "o" / "report.md").read_text()
    assert "bon16_majority" not in pd.read_parquet(tmp_path / "o" / "episodes.parquet")["policy"].unique()
