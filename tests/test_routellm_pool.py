"""The RouteLLM GSM8K importer (``coba pools import --format routellm``).

A two-question file of the source's shape is worked out by hand; the real two-model pool
(../shared/data/pools/routellm-gsm8k) must reproduce the figures SOURCES.md computes from the source's labels:
Mixtral 0.6384, GPT-4 0.8567, both correct 0.5663, at least one correct 0.9287, with the project's grader
agreeing with those labels on at least 99% of the 2,638 responses.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from coba_cli.main import main
from pools.importers import import_pool
from pools.store import load_pool

WEAK, STRONG = "mistralai/Mixtral-8x7B-Instruct-v0.1", "gpt-4-1106-preview"
COLUMNS = ["prompt", WEAK, STRONG, f"{WEAK}_response", f"{STRONG}_response"]
TEST = [
    {"question": "Ducks lay 16 eggs; 7 are used. Each sells for $2. How much per day?",
     "answer": "16 - 7 = <<16-7=9>>9\n9 * 2 = <<9*2=18>>18\n#### 18"},
    {"question": "A robe takes 2 bolts of blue and half that of white. How many bolts?",
     "answer": "2 / 2 = <<2/2=1>>1\n2 + 1 = <<2+1=3>>3\n#### 3"},
    {"question": "Unused question with a comma in its gold answer", "answer": "...\n#### 1,200"},
]
ROWS = [
    # The source's labels: question 0 both right; question 1 the weak model wrong, the strong one right.
    [TEST[1]["question"], "False", "True", "It takes 2 + 1/2 = 2.5 bolts.\n#### 2.5", "So 2 + 1 = 3 bolts."],
    # The weak response ends in the gold number but the source labelled it False: a disagreement.
    [TEST[0]["question"], "False", "True", "9 eggs * $2 = $18\n#### 18", "She makes 9 * $2 = $18 every day."],
]


def _write(tmp_path: Path, rows=ROWS, test=TEST, columns=COLUMNS) -> Path:
    src = tmp_path / "gsm8k_responses.csv"
    with open(src, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        writer.writerows(rows)
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(t) + "\n" for t in test), encoding="utf-8")
    return src


def test_hand_made_pair_imports_with_source_labels_prices_and_estimates(tmp_path: Path) -> None:
    pool = import_pool(str(_write(tmp_path)), "routellm")
    items = pool.items.set_index("item_id")
    assert sorted(items.index) == ["0", "1"]  # the questions' lines in test.jsonl
    assert items.loc["1", "gold"] == "3" and items.loc["0", "gold"] == "18"
    episodes = pool.episodes
    assert episodes["generator"].tolist() == [WEAK, STRONG, WEAK, STRONG]
    assert episodes["item_id"].tolist() == ["1", "1", "0", "0"]
    c = pool.candidates
    assert c["correct"].tolist() == [False, True, False, True]  # the source's labels, kept
    assert c["tokens_estimated"].all()
    assert (c["prompt_tokens"].iloc[0] == c["prompt_tokens"].iloc[1])  # one prompt per question
    assert (c["prompt_tokens"] > 8 * 10).all()  # eight worked examples precede the question
    agreement = pool.manifest["provenance"]["grader_agreement"]
    assert (agreement["compared"], agreement["agree"]) == (4, 3)
    [disagreement] = agreement["disagreements"]
    assert (disagreement["item_id"], disagreement["generator"], disagreement["label"], disagreement["grader"]) == \
        ("0", WEAK, False, True)
    assert pool.manifest["prices_usd_per_million_tokens"] == {WEAK: {"input": 0.24, "output": 0.24},
                                                              STRONG: {"input": 24.7, "output": 24.7}}
    assert dict(zip(pool.models["name"], pool.models["params_b"], strict=True)) == {WEAK: 46.7, STRONG: 0.0}
    assert pool.manifest["provenance"]["params_b_unknown"] == [STRONG]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"columns": ["question", WEAK, STRONG, f"{WEAK}_response", f"{STRONG}_response"]}, "no 'prompt' column"),
        ({"columns": ["prompt", WEAK, STRONG, f"{WEAK}_response", "x_response"]},
         f"model column '{STRONG}' has no '{STRONG}_response' column"),
        ({"rows": [[TEST[0]["question"], "yes", "True", "a", "b"]]},
         rf"gsm8k_responses.csv, line 2, field '{re.escape(WEAK)}'.*expected True or False, got 'yes'"),
        ({"rows": [["What is 1 + 1?", "True", "True", "2", "2"]]},
         r"line 2, field 'prompt'.*not a question of the GSM8K test split"),
        ({"test": [{"question": "q", "answer": "no marker"}]},
         r"test.jsonl, line 1, field 'answer'.*expected an answer ending in '#### <number>'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys, kwargs: dict, message: str) -> None:
    src = _write(tmp_path, **kwargs)
    assert main(["pools", "import", str(src), str(tmp_path / "pool"), "--format", "routellm"]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "pool").exists()


def test_missing_gold_file_names_the_option(tmp_path: Path, capsys) -> None:
    src = _write(tmp_path)
    (tmp_path / "test.jsonl").unlink()
    assert main(["pools", "import", str(src), str(tmp_path / "pool"), "--format", "routellm"]) == 2
    assert "test.jsonl: no such file (the GSM8K test split with the gold answers; pass --gold)" in \
        capsys.readouterr().err


@pytest.fixture(scope="module")
def real_pool(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    src = shared_dir / "data" / "pools" / "routellm-gsm8k" / "gsm8k_responses.csv"
    dest = tmp_path_factory.mktemp("routellm") / "pool"
    assert main(["pools", "import", str(src), str(dest), "--format", "routellm"]) == 0
    return load_pool(dest)


def test_real_pool_reproduces_the_source_figures(real_pool) -> None:
    c = real_pool.candidates.merge(real_pool.episodes, on="episode_id")
    assert len(real_pool.items) == 1319 and len(c) == 2638
    per_model = c.groupby("generator")["correct"].mean()
    assert per_model[WEAK] == pytest.approx(0.6384, abs=5e-5)
    assert per_model[STRONG] == pytest.approx(0.8567, abs=5e-5)
    per_item = c.pivot(index="item_id", columns="generator", values="correct").astype(bool)
    assert (per_item[WEAK] & per_item[STRONG]).mean() == pytest.approx(0.5663, abs=5e-5)
    assert (per_item[WEAK] | per_item[STRONG]).mean() == pytest.approx(0.9287, abs=5e-5)


DOC = Path(__file__).resolve().parents[1] / "docs" / "ROUTELLM_GSM8K.md"


def _documented_disagreements() -> dict[tuple[str, str], str]:
    """(item_id, model) -> verdict, from the table of docs/ROUTELLM_GSM8K.md (read by hand, one row each)."""
    model = {"Mixtral": WEAK, "GPT-4": STRONG}
    rows = re.findall(r"^\| (\d+) \| (Mixtral|GPT-4) \| (?:right|wrong) \| (?:right|wrong) \| .*? \| (.+) \|$",
                      DOC.read_text(encoding="utf-8"), flags=re.M)
    return {(item, model[name]): verdict for item, name, verdict in rows}


def test_real_pool_grader_agreement_prices_and_estimated_tokens(real_pool) -> None:
    provenance = real_pool.manifest["provenance"]
    agreement = provenance["grader_agreement"]
    assert agreement["compared"] == 2638
    assert len(agreement["disagreements"]) == agreement["compared"] - agreement["agree"]
    # Every disagreement is listed with a verdict in the docs, and nothing else is.
    documented = _documented_disagreements()
    assert set(documented) == {(d["item_id"], d["generator"]) for d in agreement["disagreements"]}
    # By those verdicts the grader is wrong on at most 1% of the responses (the source's label on the rest).
    grader_wrong = sum(v.startswith("grader wrong") for v in documented.values())
    assert all(v.startswith(("grader wrong", "source wrong")) for v in documented.values())
    assert 1 - grader_wrong / agreement["compared"] >= 0.99
    assert real_pool.candidates["tokens_estimated"].all()
    assert provenance["estimated"]["output_tokens"] == 2638
    assert real_pool.manifest["prices_usd_per_million_tokens"][STRONG] == {"input": 24.7, "output": 24.7}
    assert real_pool.manifest["prices_usd_per_million_tokens"][WEAK] == {"input": 0.24, "output": 0.24}


def test_gold_option_reads_the_test_split_from_elsewhere_and_only_for_routellm(tmp_path: Path, capsys) -> None:
    src = _write(tmp_path)
    elsewhere = tmp_path / "gsm8k-test.jsonl"
    (tmp_path / "test.jsonl").rename(elsewhere)
    assert main(["pools", "import", str(src), str(tmp_path / "pool"), "--format", "routellm", "--gold",
                 str(elsewhere)]) == 0
    assert load_pool(tmp_path / "pool").items.set_index("item_id").loc["1", "gold"] == "3"
    assert main(["pools", "import", str(src), str(tmp_path / "other"), "--format", "jsonl", "--gold",
                 str(elsewhere)]) == 2
    assert "--gold only apply to --format routellm" in capsys.readouterr().err


def test_a_price_option_overrides_one_model_and_keeps_the_importers_other_prices(tmp_path: Path) -> None:
    src = _write(tmp_path)
    assert main(["pools", "import", str(src), str(tmp_path / "pool"), "--format", "routellm",
                 "--price", f"{STRONG}=10,30"]) == 0
    assert load_pool(tmp_path / "pool").manifest["prices_usd_per_million_tokens"] == {
        WEAK: {"input": 0.24, "output": 0.24},  # the importer's (the RouteLLM paper's) price, kept
        STRONG: {"input": 10.0, "output": 30.0}}  # --price wins for the model it names
