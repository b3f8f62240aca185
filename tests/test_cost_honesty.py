"""Costs that say when they are guessed, dollars from per-model prices, and policies fitted to the pool's N.

Pools are hand-made canonical JSONL files. Expected accuracies and dollar costs are worked out by hand
from the answers and token counts written below.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from coba_cli.main import main
from eval.cost_notes import ESTIMATE_MARK, UNSIZED_MARK, CostEstimates, cost_estimates
from eval.figures import frontier
from eval.tables import PolicyInfo
from pools.store import load_pool
from tests.conftest import write_jsonl

# Five items x five candidates (answers in sampling order) with gold answers; one dataset, one generator.
ANSWERS = {
    "2": ["3", "2", "2", "3", "2"],  # best-of-4: 3 and 2 tie, the first seen (3) wins -> wrong; best-of-5: 2
    "5": ["5", "5", "1", "1", "1"],  # best-of-4: 5 (tie, first seen) -> right; best-of-5: 1 -> wrong
    "7": ["7", "7", "7", "7", "7"],  # right for every policy
    "9": ["1", "2", "3", "4", "5"],  # wrong for every policy
    "4": ["1", "4", "4", "1", "4"],  # best-of-4: 1 (tie, first seen) -> wrong; best-of-5: 4
}
# Greedy (first candidate): 3, 5, 7, 1, 1 -> 2/5 = 40 %; best-of-4: 2/5 = 40 %; best-of-5: 3/5 = 60 %.


def _records(*, tokens: bool, n: int = 5) -> list[dict]:
    out = []
    for i, (gold, answers) in enumerate(ANSWERS.items()):
        for k, answer in enumerate(answers[:n]):
            rec = {"dataset": "toy", "item_id": str(i), "problem": f"Problem {i}?", "gold": gold, "generator": "gen",
                   "generator_params_b": 2.0, "candidate": k, "text": f"So the answer is \\boxed{{{answer}}}."}
            if tokens:
                rec.update(prompt_tokens=100, output_tokens=50, latency_s=1.0)
            out.append(rec)
    return out


def _import(tmp_path: Path, name: str, records: list[dict], *extra: str) -> Path:
    dest = tmp_path / name
    assert main(["pools", "import", str(write_jsonl(tmp_path / f"{name}.jsonl", records)), str(dest), *extra]) == 0
    return dest


def _bench(pool: Path, out: Path, *extra: str) -> int:
    return main(["bench", "--pool", str(pool), "--out", str(out), "--no-figures", "--no-progress", "--resamples",
                 "50", *extra])


def test_estimated_costs_are_marked_in_the_terminal_and_the_main_table(tmp_path: Path, capsys) -> None:
    pool = _import(tmp_path, "estimated", _records(tokens=False))  # no token counts, no latencies in the file
    capsys.readouterr()
    assert _bench(pool, tmp_path / "out", "--policies", "main") == 0
    out = capsys.readouterr().out
    head = next(line for line in out.splitlines() if line.startswith("policy"))
    assert re.search(r"Total Tok\.~ +P-Tok\.~ +Calls +Latency~$", head)  # calls are counted, never estimated
    footnotes = [line for line in out.splitlines() if line.startswith(f"{ESTIMATE_MARK} estimated:")]
    assert len(footnotes) == 1 and "token counts of 25/25 candidates estimated from their text" in footnotes[0]
    assert "latencies by rule" in footnotes[0]
    report = (tmp_path / "out" / "report.md").read_text()
    main_table = report[report.index("## Main results"):report.index("## Comparison with the paper")]
    assert "Total Tok.~" in main_table and "P-Tok.~" in main_table and "Latency~" in main_table
    assert main_table.count(f"{ESTIMATE_MARK} estimated: token counts of 25/25") == 1


def test_counted_costs_carry_no_mark(tmp_path: Path, capsys) -> None:
    pool = _import(tmp_path, "counted", _records(tokens=True))
    capsys.readouterr()
    assert _bench(pool, tmp_path / "out", "--policies", "greedy") == 0
    out = capsys.readouterr().out
    assert ESTIMATE_MARK not in out and "estimated" not in out


def test_frontier_axis_carries_the_mark(tmp_path: Path) -> None:
    mac = pd.DataFrame({"acc": [40.0, 60.0], "p_tokens": [300.0, 1500.0]}, index=["greedy", "bon5_majority"])
    info = {"greedy": PolicyInfo("Greedy", "baseline"), "bon5_majority": PolicyInfo("Best-of-5", "baseline")}
    estimated = cost_estimates(load_pool(_import(tmp_path, "estimated", _records(tokens=False))))
    counted = cost_estimates(load_pool(_import(tmp_path, "counted", _records(tokens=True))))
    assert estimated.metrics == {"total_tokens", "p_tokens", "latency_s"} and counted == CostEstimates()
    marked = frontier(mac, info, "p_tokens", estimates=estimated)
    assert marked.axes[0].get_xlabel().startswith("parameter-weighted tokens per item (log scale) ~ estimated")
    assert ESTIMATE_MARK not in frontier(mac, info, "p_tokens", estimates=counted).axes[0].get_xlabel()
    assert ESTIMATE_MARK not in frontier(mac.rename(columns={"p_tokens": "calls"}), info, "calls",
                                         estimates=estimated).axes[0].get_xlabel()  # calls are never estimated


def test_five_sample_pool_shows_best_of_5_and_self_consistency_at_5(tmp_path: Path, capsys) -> None:
    pool = _import(tmp_path, "n5", _records(tokens=True))
    capsys.readouterr()
    assert _bench(pool, tmp_path / "out") == 0  # every policy, no spec file
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line and line.split()[0] in
            ("greedy", "bon4_majority", "bon5_majority", "self_consistency@5") and not line.startswith(" ")}
    # (indented lines: the paired tests' differences under the table)
    assert float(rows["bon5_majority"][1]) == pytest.approx(60.0)
    assert float(rows["self_consistency@5"][1]) == pytest.approx(60.0)
    assert float(rows["bon4_majority"][1]) == pytest.approx(40.0)
    assert float(rows["greedy"][1]) == pytest.approx(40.0)
    report = (tmp_path / "out" / "report.md").read_text()
    assert "Best-of-5 majority" in report and "Self-consistency@5" in report


def test_one_sample_pool_says_the_sampling_policies_coincide(tmp_path: Path, capsys) -> None:
    pool = _import(tmp_path, "n1", _records(tokens=True, n=1))
    capsys.readouterr()
    assert _bench(pool, tmp_path / "out") == 0
    out = capsys.readouterr().out
    assert len([line for line in out.splitlines() if line.startswith("N = 1:") and "coincide" in line]) == 1
    assert "N = 1:" in (tmp_path / "out" / "report.md").read_text()


def test_usd_from_prices(tmp_path: Path, capsys) -> None:
    pool = _import(tmp_path, "priced", _records(tokens=True), "--price", "gen=1,2")
    capsys.readouterr()
    assert _bench(pool, tmp_path / "out", "--policies", "greedy,bon4_majority", "--cost", "usd") == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    # One call: 100 prompt tokens at $1/M + 50 output tokens at $2/M = $0.0002.
    assert results["policies"]["greedy"]["macro"]["usd"] == pytest.approx(2e-4)
    assert results["policies"]["bon4_majority"]["macro"]["usd"] == pytest.approx(8e-4)
    head = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("policy"))
    assert head.split()[-1] == "USD"  # the terminal table's last column
    episodes = pd.read_parquet(tmp_path / "out" / "episodes.parquet")
    assert episodes.loc[episodes["policy"] == "greedy", "usd"].tolist() == pytest.approx([2e-4] * 5)


def test_pool_without_prices_has_no_usd_and_says_so(tmp_path: Path, capsys) -> None:
    pool = _import(tmp_path, "unpriced", _records(tokens=True))
    capsys.readouterr()
    assert _bench(pool, tmp_path / "out", "--policies", "greedy") == 0
    out = capsys.readouterr().out
    assert "usd: no dollar cost, the pool has no prices" in out
    assert "usd" not in pd.read_parquet(tmp_path / "out" / "episodes.parquet").columns
    assert "usd" not in json.loads((tmp_path / "out" / "results.json").read_text())["policies"]["greedy"]["macro"]


@pytest.mark.parametrize(("params", "extra", "message"), [
    (2.0, ["--cost", "usd"], r"--cost usd: cost model .usd. needs a price for every model the pool calls; it has none for gen"),
    (0.0, ["--cost", "p_tokens"], r"--cost p_tokens weighs tokens by model parameters, but the pool gives gen params_b 0"),
])
def test_cost_models_the_pool_cannot_price_are_refused(tmp_path: Path, capsys, params: float, extra: list[str],
                                                       message: str) -> None:
    pool = _import(tmp_path, "p", [{**r, "generator_params_b": params} for r in _records(tokens=True)])
    capsys.readouterr()
    assert _bench(pool, tmp_path / "out", "--policies", "greedy", *extra) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and len(err.strip().splitlines()) == 1


def test_p_tokens_of_a_model_without_a_size_is_marked_not_meaningful(tmp_path: Path, capsys) -> None:
    """RouteLLM's GPT-4 has no public size (params_b 0): its calls would count as free in p_tokens."""
    from tests.test_routellm_pool import STRONG, _write

    assert main(["pools", "import", str(_write(tmp_path)), str(tmp_path / "pool"), "--format", "routellm"]) == 0
    capsys.readouterr()
    assert _bench(tmp_path / "pool", tmp_path / "out", "--policies", "greedy", "--cost", "usd") == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(line for line in lines if line.startswith("policy")).split()
    assert head[2:8] == ["Total", "Tok." + ESTIMATE_MARK, "P-Tok." + UNSIZED_MARK, "Calls", "Latency" + UNSIZED_MARK,
                         "USD" + ESTIMATE_MARK]
    [note] = [line for line in lines if f"{UNSIZED_MARK} not meaningful:" in line]
    assert f"{UNSIZED_MARK} not meaningful: {STRONG} has no published size (params_b 0)" in note
    report = (tmp_path / "out" / "report.md").read_text()
    assert f"| P-Tok.{UNSIZED_MARK} ↓ | Latency{UNSIZED_MARK} ↓ |" in report
    # Benched on the generator that has a size only, nothing is marked not meaningful.
    pool = load_pool(tmp_path / "pool")
    sized = [m for m in pool.models["name"] if m != STRONG]
    assert cost_estimates(pool, sized).unsized == frozenset()
    assert cost_estimates(pool, [STRONG]).unsized == {"p_tokens", "latency_s"}  # latencies by rule, from the size
    assert cost_estimates(pool, sized).mark("p_tokens") == ESTIMATE_MARK  # estimated tokens, but meaningful


def test_a_pool_whose_models_all_have_sizes_has_no_unsized_mark(tmp_path: Path, capsys) -> None:
    pool = _import(tmp_path, "sized", _records(tokens=True))  # gen: 2 billion parameters
    capsys.readouterr()
    assert _bench(pool, tmp_path / "out", "--policies", "greedy") == 0
    out = capsys.readouterr().out
    assert "not meaningful" not in out and UNSIZED_MARK not in next(ln for ln in out.splitlines() if ln.startswith("policy"))
