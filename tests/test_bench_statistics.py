"""Statistics in every view of a bench: 95% intervals of every macro figure (terminal, report.md, results.json, the
frontier figures' error bars), the paired tests' reference (``--reference``, and the default rule), and the
terminal table's layout (full names, upper bounds first, units from ``coba_env.costs.COST_TABLE``, one format per
column). Expected values come from an independent bootstrap (a pandas loop over resampled records) and from the
figures' own data."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from matplotlib.container import ErrorbarContainer

from coba_cli.main import main
from coba_env.costs import COST_TABLE
from eval import figures, metrics
from eval.analysis import default_reference
from eval.bootstrap import paired_matrix
from eval.intervals import bootstrap_intervals
from eval.tables import PolicyInfo

#: A policy with a name longer than the 27 characters the terminal used to cut names at.
LONG_NAME = "my_rather_long_policy_name_that_is_not_cut_anywhere"
POLICIES = "greedy,coba_strong,bon4_majority,pool_oracle"


@pytest.fixture(scope="module")
def tiny_bench(tmp_path_factory):
    root = tmp_path_factory.mktemp("stats")
    spec = root / "mine.yaml"
    spec.write_text(f"policies:\n  {LONG_NAME}:\n    kind: best_of_n\n    label: Long\n    params: {{n: 2}}\n")
    out = root / "bench"
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["bench", "--pool", "tiny", "--policies", f"{POLICIES},{spec}", "--out", str(out),
                     "--no-progress", "--resamples", "400"]) == 0
    return json.loads((out / "results.json").read_text()), out, buf.getvalue()


def independent_intervals(records: pd.DataFrame, policies: list[str], resamples: int, seed: int) -> pd.DataFrame:
    """The percentile interval of every macro metric, recomputed with ``eval.metrics.macro`` on each resample of
    the paired units (drawn as ``numpy.random.default_rng(seed).integers(0, n, (B, n))``, the paired tests' draw)."""
    units = paired_matrix(records, policies, "item").units
    n = len(units)
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    keyed = records.set_index(["dataset", "item_id"])
    per_unit = [keyed.loc[[tuple(units.iloc[u])]] for u in range(n)]
    samples = []
    for row in idx:
        drawn = pd.concat([per_unit[u].assign(_copy=k) for k, u in enumerate(row)]).reset_index()
        drawn["item_id"] = drawn["item_id"] + "#" + drawn["_copy"].astype(str)  # each draw is its own item
        samples.append(metrics.macro(drawn).loc[policies])
    stacked = pd.concat(samples, keys=range(resamples), names=["b", "policy"])
    columns = ["acc", *[m.metric for m in COST_TABLE if m.metric in stacked.columns]]
    low = stacked[columns].groupby(level="policy").quantile(0.025)
    high = stacked[columns].groupby(level="policy").quantile(0.975)
    return pd.concat({"low": low, "high": high}, axis=1).loc[policies]


def test_intervals_equal_an_independent_bootstrap_on_the_paired_tests_resamples():
    from agents.registry import make_policy
    from coba_env.compiled import compile_pool
    from eval.runner import run_policies
    from pools.default import resolve_pool

    names = ["greedy", "coba_strong", "pool_oracle"]
    records = run_policies([make_policy(n) for n in names], compile_pool(resolve_pool("tiny")), progress=False).records
    spans = bootstrap_intervals(records, names, resamples=60, seed=3)
    expected = independent_intervals(records, names, resamples=60, seed=3)
    for metric in ["acc", "total_tokens", "p_tokens", "calls", "latency_s"]:
        for name in names:
            assert spans.of(name, metric) == pytest.approx(
                (expected.loc[name, ("low", metric)], expected.loc[name, ("high", metric)]), rel=1e-9), (name, metric)
    assert spans.n_units == 24 and spans.resamples == 60


def test_results_json_and_report_show_every_macro_figure_with_its_interval(tiny_bench):
    results, out, _ = tiny_bench
    main_md = (out / "report.md").read_text().split("## Main results (macro)")[1].split("\n## ")[0]
    main_md = main_md.replace("**", "")  # the best accuracy is in bold
    for name in results["meta"]["ran"]:
        entry = results["policies"][name]
        ci = entry["ci95"]
        assert set(ci) == {"acc", "total_tokens", "p_tokens", "calls", "latency_s"}
        assert all(lo <= hi for lo, hi in ci.values())
        acc = entry["macro"]["acc"]
        assert f"| {entry['label']} | {acc:.2f} [{ci['acc'][0]:.2f}, {ci['acc'][1]:.2f}] |" in main_md, name
        assert set(entry["ci95_per_dataset"]) == {"math500", "aime2024"}
    csv = pd.read_csv(out / "tables" / "main.csv").set_index("policy")
    assert csv.loc["greedy", "acc_low"] == pytest.approx(results["policies"]["greedy"]["ci95"]["acc"][0])
    assert "interval" in results["bootstrap"]["intervals"]


def test_the_terminal_table_names_in_full_upper_bounds_first_units_and_intervals(tiny_bench):
    results, _, printed = tiny_bench
    lines = printed.splitlines()
    head, units, rule = lines[0], lines[1], lines[2]
    present = [m for m in COST_TABLE if m.metric in results["policies"]["greedy"]["macro"]]
    for m in present:  # every measure of the table, by its label, with its unit (maybe scaled: "k tokens")
        assert m.label in head and m.unit in units, m.name
    assert "%" in units and set(rule) == {"-"}
    # Upper bounds first and marked, then a rule, then the others by accuracy.
    assert lines[3].startswith("pool_oracle (upper bound)")
    body = [line for line in lines[3:] if line and not line.startswith((" ", "-"))]
    names = [line.split()[0] for line in body[: len(results["meta"]["ran"])]]
    assert names[0] == "pool_oracle" and LONG_NAME in names  # not cut at 27 characters
    others = names[1:]
    accs = [results["policies"][n]["macro"]["acc"] for n in others]
    assert accs == sorted(accs, reverse=True)
    # Under each row: the interval of each column, in that column's format.
    greedy = lines.index(next(line for line in lines if line.startswith("greedy ")))
    values, spans = lines[greedy].split()[1:], re.findall(r"\[([^\]]+)\]", lines[greedy + 1])
    ci = results["policies"]["greedy"]["ci95"]
    assert spans[0] == f"{ci['acc'][0]:.2f}, {ci['acc'][1]:.2f}" and values[0] == \
        f"{results['policies']['greedy']['macro']['acc']:.2f}"
    # One format per column: every value of a column has the same number of decimals.
    rows = [line.split()[-len(present) - 1:] for line in body[: len(names)]]
    for k in range(len(present) + 1):
        decimals = {len(r[k].split(".")[1]) if "." in r[k] else 0 for r in rows}
        assert len(decimals) == 1, (k, rows)
    assert any(line.startswith("paired bootstrap, coba_strong (the default) minus each policy") for line in lines)


def test_reference_greedy_changes_the_paired_tests(tmp_path, capsys):
    out = tmp_path / "b"
    assert main(["bench", "--pool", "tiny", "--policies", POLICIES, "--reference", "greedy", "--out", str(out),
                 "--no-progress", "--no-figures", "--resamples", "200"]) == 0
    printed = capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    boot = results["bootstrap"]
    assert boot["reference"] == "greedy" and boot["reference_rule"] == "asked for (--reference)"
    assert set(boot["vs_reference"]) == {"coba_strong", "bon4_majority", "pool_oracle"}
    assert boot["vs_reference"]["coba_strong"]["diff"] == pytest.approx(-boot["pairwise"]["coba_strong"]["greedy"]["diff"])
    assert "paired bootstrap, greedy (asked for) minus each policy" in printed
    table = (out / "tables" / "bootstrap.md").read_text()
    assert "| Greedy / fixed long - CoBa-Routed-Strong |" in table


@pytest.mark.parametrize(("ran", "grouping", "expected"), [
    (["greedy", "coba_strong", "pool_oracle"], "pair", "coba_strong"),     # the paper's reference when it ran
    (["greedy", "bon4_majority", "pool_oracle"], "pair", "bon4_majority"),  # else the most accurate, no oracle
    (["route_cascade", "model_switch", "greedy", "route_pool_oracle"], "item", "model_switch"),  # best routing
    (["route_cascade", "model_switch2", "route_pool_oracle"], "item", "route_cascade"),  # tie: the cheaper
    (["greedy"], "pair", None),                                               # nothing to compare
])
def test_default_reference_rule(ran, grouping, expected):
    acc = {"greedy": 70.0, "coba_strong": 80.0, "bon4_majority": 75.0, "pool_oracle": 95.0, "route_cascade": 80.0,
           "model_switch": 85.0, "model_switch2": 80.0, "route_pool_oracle": 99.0}
    cost = {"route_cascade": 10.0, "model_switch2": 20.0}
    mac = pd.DataFrame({"acc": [acc[n] for n in ran], "p_tokens": [cost.get(n, 1.0) for n in ran]}, index=ran)
    group = {"greedy": "baseline", "coba_strong": "coba", "bon4_majority": "baseline"}
    info = {n: PolicyInfo(n, "oracle" if "oracle" in n else group.get(n, "routing")) for n in ran}
    assert default_reference(mac, info, ran, grouping, "p_tokens") == expected


def bars_of(ax) -> dict[str, tuple[list, list]]:
    """Each point's drawn error bars: name -> (x segment ends, y segment ends), from the figure's own data."""
    out = {}
    for container in ax.containers:
        if not isinstance(container, ErrorbarContainer) or not container.get_label().startswith("_ci95:"):
            continue
        names = container.get_label().split(":", 1)[1].split(",")
        x_bars, y_bars = container.lines[2]
        for name, xs, ys in zip(names, x_bars.get_segments(), y_bars.get_segments(), strict=True):
            out[name] = (sorted(p[0] for p in xs), sorted(p[1] for p in ys))
    return out


def test_the_frontier_figures_draw_each_interval_as_error_bars(tiny_bench):
    """Checked on the figures' data: each bar spans exactly the interval results.json holds (both axes); the PNG
    files are written (and were looked at)."""
    import matplotlib.pyplot as plt

    results, out, _ = tiny_bench
    ran = results["meta"]["ran"]
    info = {n: PolicyInfo(results["policies"][n]["label"], results["policies"][n]["group"]) for n in ran}
    mac = pd.DataFrame({n: results["policies"][n]["macro"] for n in ran}).T
    spans = pd.DataFrame({n: {f"{m}_{end}": results["policies"][n]["ci95"][m][k] for m in ("acc", "p_tokens")
                              for k, end in enumerate(("low", "high"))} for n in ran}).T
    fig = figures.frontier(mac, info, "p_tokens", spans=spans)
    drawn = bars_of(fig.axes[0])
    assert set(drawn) == set(ran)
    for name in ran:
        ci = results["policies"][name]["ci95"]
        (x0, x1), (y0, y1) = drawn[name]
        assert (x0, x1) == pytest.approx(ci["p_tokens"]) and (y0, y1) == pytest.approx(ci["acc"]), name
    plt.close(fig)
    per_ds = pd.DataFrame([{"policy": n, "dataset": d, **results["policies"][n]["per_dataset"][d]}
                           for n in ran for d in ("math500", "aime2024")]).set_index(["policy", "dataset"])
    ds_spans = pd.DataFrame([{"policy": n, "dataset": d, **{f"{m}_{end}": results["policies"][n]["ci95_per_dataset"][d][m][k]
                                                            for m in ("acc", "p_tokens") for k, end in enumerate(("low", "high"))}}
                             for n in ran for d in ("math500", "aime2024")]).set_index(["policy", "dataset"])
    fig = figures.small_multiples(per_ds, info, ["math500", "aime2024"], "p_tokens", spans=ds_spans)
    (x0, x1), (y0, y1) = bars_of(fig.axes[1])["greedy"]
    assert (y0, y1) == pytest.approx(results["policies"]["greedy"]["ci95_per_dataset"]["aime2024"]["acc"])
    plt.close(fig)
    for stem in ("frontier", "per_dataset_frontiers"):  # the bench draws them: its SVGs hold the bars' groups
        assert (out / "figures" / f"{stem}.png").stat().st_size > 10_000
        svg = (out / "figures" / f"{stem}.svg").read_text()
        assert 'id="ci95-x-' in svg and 'id="ci95-y-' in svg, stem


@pytest.mark.parametrize(("env", "policies", "message"), [
    ("replay", "bon16_majority", "no requested policy can run on this pool (bon16_majority: Best-of-16 majority "
                                 "needs 16 candidates per episode; the env allows N_max = 8)"),
    ("replay", "bon16_majority,self_eval_weighted", "no requested policy can run on this pool (bon16_majority: "),
])
def test_a_bench_where_no_requested_policy_can_run_exits_2_with_one_line(env, policies, message, tmp_path, capsys):
    out = tmp_path / "b"
    code = main(["bench", "--pool", "tiny", "--env", env, "--policies", policies, "--out", str(out),
                 "--no-figures", "--no-progress"])
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert message in err
    assert not out.exists() and captured.out == ""


def test_the_reports_pool_section_shows_each_verifiers_auroc_from_the_pools_labels(tiny_bench):
    """report.md's verifier table: each verifier's AUROC equals sklearn's roc_auc_score over the pool's own scores
    and correctness labels (merged here from its tables, not through ``pools.verifier_quality``)."""
    from sklearn.metrics import roc_auc_score

    from pools.default import resolve_pool

    results, out, _ = tiny_bench
    pool = resolve_pool("tiny")
    scored = pool.verifications.dropna(subset=["score"]).merge(
        pool.candidates[["episode_id", "candidate", "correct"]], on=["episode_id", "candidate"])
    section = "| Verifier |" + (out / "report.md").read_text().split("| Verifier |")[1].split("\n\n")[0]
    rows = {cells[0]: cells for cells in ([c.strip() for c in line.strip("|").split("|")]
                                          for line in section.splitlines()[2:])}
    assert set(rows) == set(pool.tiers)
    for tier, part in scored.groupby("tier"):
        expected = roc_auc_score(part["correct"].astype(int), part["score"])
        assert rows[tier][4] == f"{expected:.3f}", tier
        assert results["meta"]["pool"]["verifiers"][tier]["auroc"] == pytest.approx(expected, abs=1e-12)
