"""routellm-mmlu (../shared/data/pools/routellm-mmlu): 57 per-subject CSVs of True/False outcomes, imported with one
command as a wide outcome table, and benched on the route env.

Expected figures are computed here from the CSV files with the standard library (csv), never from the importer:
SOURCES.md's Mixtral 0.6808, GPT-4 0.8058, at least one correct 0.8586 over 14,042 questions of 57 subjects.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest

from coba_cli.main import main
from pools.store import load_pool

WEAK, STRONG = "mistralai/Mixtral-8x7B-Instruct-v0.1", "gpt-4-1106-preview"


def _source_rows(folder: Path) -> list[tuple[str, int, dict[str, str]]]:
    """(subject, row, cells) of every data row of every file, read with the csv module."""
    out = []
    for path in sorted(folder.glob("*.csv")):
        with open(path, encoding="utf-8", newline="") as fh:
            for k, row in enumerate(csv.DictReader(fh)):
                out.append((path.stem.removeprefix("mmlu_"), k, row))
    return out


@pytest.fixture(scope="module")
def mmlu(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list]:
    folder = shared_dir / "data" / "pools" / "routellm-mmlu" / "responses"
    out = tmp_path_factory.mktemp("mmlu") / "pool"
    assert main(["pools", "import", str(folder), "--format", "wide", "--out", str(out)]) == 0
    return folder, out, _source_rows(folder)


def test_one_command_imports_every_question_subject_and_model(mmlu) -> None:
    folder, out, rows = mmlu
    pool = load_pool(out)
    assert len(rows) == 14042 and len(pool.items) == 14042
    assert len({s for s, _, _ in rows}) == 57
    assert pool.items["subject"].nunique() == 57
    assert set(pool.items["dataset"]) == {"mmlu"}  # one dataset: the subjects are categories (items.subject)
    assert list(pool.models["name"]) == [WEAK, STRONG]
    by_key = {(f"{s}/{k}"): r for s, k, r in rows}
    items = pool.items.set_index("item_id")
    for key in ("abstract_algebra/0", "virology/165", "world_religions/170"):
        assert items.loc[key, "problem"] == by_key[key]["prompt"]
    assert pool.items["gold"].isna().all()  # the files hold no gold answer
    assert (pool.candidates["extraction_status"] == "outcome").all()  # nor any answer


def test_reference_figures_reproduced_from_the_pool(mmlu) -> None:
    _, out, rows = mmlu
    weak = np.array([r[WEAK] == "True" for _, _, r in rows])
    strong = np.array([r[STRONG] == "True" for _, _, r in rows])
    assert round(weak.mean(), 4) == 0.6808 and round(strong.mean(), 4) == 0.8058  # SOURCES.md
    assert round((weak | strong).mean(), 4) == 0.8586
    pool = load_pool(out)
    c = pool.candidates.merge(pool.episodes, on="episode_id")
    by_model = c.groupby("generator")["correct"].mean()
    assert by_model[WEAK] == pytest.approx(weak.mean(), abs=1e-12)
    assert by_model[STRONG] == pytest.approx(strong.mean(), abs=1e-12)
    both = c.pivot(index="item_id", columns="generator", values="correct").astype(bool)
    assert both.any(axis=1).mean() == pytest.approx((weak | strong).mean(), abs=1e-12)


def test_prices_from_the_shipped_list_and_tokens_marked_estimated(mmlu) -> None:
    _, out, _ = mmlu
    pool = load_pool(out)
    prices = pool.manifest["prices_usd_per_million_tokens"]
    assert prices == {WEAK: {"input": 0.24, "output": 0.24}, STRONG: {"input": 24.7, "output": 24.7}}  # SOURCES.md
    assert "shipped price list" in pool.manifest["provenance"]["prices"][STRONG]
    assert pool.candidates["tokens_estimated"].all()
    assert pool.candidates["graded_score"].isna().all()  # True/False only: no graded score


def test_route_bench_in_dollars_prints_cpt_and_apgr_with_the_random_router_at_one_half(mmlu, tmp_path: Path,
                                                                                        capsys) -> None:
    _, out, _ = mmlu
    code = main(["bench", "--pool", str(out), "--env", "route", "--cost", "usd", "--no-figures", "--out",
                 str(tmp_path / "bench"), "--policies", "route_pool_oracle", "--no-progress"])
    assert code == 0
    printed = capsys.readouterr().out
    line = re.search(r"random router: CPT\(50%\) (\S+)%\s+CPT\(80%\) (\S+)%\s+APGR (\S+)", printed)
    assert line is not None, printed
    assert abs(float(line.group(3)) - 0.5) <= 0.02
    assert re.search(r"oracle router: CPT\(50%\) \S+%\s+CPT\(80%\) \S+%\s+APGR \S+", printed)
    results = json.loads((tmp_path / "bench" / "results.json").read_text())
    assert results["routing"]["model_routing"]["weak"] == WEAK
