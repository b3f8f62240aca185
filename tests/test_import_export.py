"""Canonical JSONL: import fills in what is missing, export writes everything, round trips are exact."""

from __future__ import annotations

import json
import math
import re

import pandas as pd
import pytest

from coba_cli.main import main
from pools.export import LINE_ORDER, export_jsonl, pool_lines
from pools.importers import import_jsonl, import_pool
from pools.prices import PRICES_KEY
from pools.schema import TABLES
from pools.store import load_pool
from pools.tokens import estimate_latency_s, estimate_tokens
from tests.conftest import small_jsonl_records, write_jsonl


def _line(**fields):
    """A complete canonical line: defaults for every field, overridden by ``fields``, in LINE_ORDER (an optional
    field such as ``generator_price`` only when given)."""
    base = {
        "dataset": "math", "item_id": "m1", "problem": "What is $1 + 1$?", "gold": "2", "level": "Level 1",
        "subject": "Prealgebra", "task": None, "metadata": None, "generator": "gen-a", "generator_params_b": 7.0,
        "candidate": 0, "text": "So \\boxed{2}.", "answer": "2", "answer_key": "2", "cluster": 0, "correct": True,
        "prompt_tokens": 40, "output_tokens": 120, "tokens_estimated": False, "latency_s": 2.5,
        "finish_reason": "stop", "cap_hit": False, "extraction_status": "boxed", "incomplete_boxed": False,
        "repetition_score": 0.0, "scores": {},
    }
    base.update(fields)
    return {k: base[k] for k in LINE_ORDER if k in base}


def _judge(score, **extra):
    return {"score": score, "model": "judge-8b", "params_b": 8.0, "prompt_tokens": 300, "output_tokens": 2,
            "latency_s": 0.25, **extra}


def _strong(score):
    return {"score": score, "model": "gen-b", "params_b": 14.0, "prompt_tokens": 512, "output_tokens": 1,
            "latency_s": 1.125}


#: Hand-written canonical lines: 2 items, 2 generators (gen-b also verifies), N = 2, a null score, V2 on
#: one candidate only, an unknown label, a candidate without an answer, metadata, unicode, a cap hit.
FULL_LINES = [
    _line(candidate=0, scores={"V1": _judge(0.75), "V3": _strong(0.875)}),
    _line(candidate=1, text="Maybe 3 … I think \\boxed{3", answer=None, answer_key=None, cluster=-1, correct=False,
          output_tokens=4096, tokens_estimated=True, latency_s=51.2, finish_reason="length", cap_hit=True,
          extraction_status="none", incomplete_boxed=True, repetition_score=0.625,
          scores={"V1": _judge(None), "V2": {**_judge(0.5), "model": "prm-7b", "params_b": 7.0}}),
    _line(dataset="aime", item_id="a1", problem="Find $x$ if $2x = 50$.", gold="025", level=None, subject=None,
          metadata={"contest": "AIME", "year": 2024}, generator="gen-b", generator_params_b=14.0,
          text="x = 25, so \\boxed{25}", answer="25", answer_key="25", correct=None,
          scores={"V1": _judge(0.0625), "V3": _strong(1.0)}),
    _line(dataset="aime", item_id="a1", problem="Find $x$ if $2x = 50$.", gold="025", level=None, subject=None,
          metadata={"contest": "AIME", "year": 2024}, generator="gen-b", generator_params_b=14.0, candidate=1,
          text="\\boxed{24}", answer="24", answer_key="24", cluster=1, correct=False, scores={}),
]


def test_hand_written_jsonl_round_trips_byte_identical(tmp_path):
    src = tmp_path / "full.jsonl"
    src.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in FULL_LINES), encoding="utf-8")
    pool = import_jsonl(src)
    assert pool_lines(pool) == FULL_LINES
    out = export_jsonl(pool, tmp_path / "out.jsonl")
    assert out.read_bytes() == src.read_bytes()
    # what the tables hold
    assert pool.candidates["correct"].tolist()[2] is pd.NA
    assert math.isnan(pool.verifications.query("tier == 'V1' and candidate == 1")["score"].iloc[0])
    assert pool.models.set_index("name")["role"].to_dict() == {
        "gen-a": "generator", "judge-8b": "verifier", "gen-b": "generator+verifier", "prm-7b": "verifier"}
    assert json.loads(pool.items.set_index("item_id").loc["a1", "metadata"]) == {"contest": "AIME", "year": 2024}
    assert pool.manifest["tiers"] == ["V1", "V2", "V3"]


def test_import_fills_answers_clusters_labels(tmp_path, small_jsonl):
    pool = import_jsonl(small_jsonl)
    c = pool.candidates
    assert pool.n_candidates == 3 and len(pool.episodes) == 6
    first = c[c["episode_id"] == 0]
    assert first["raw_answer"].tolist() == ["2", "3", "2"]
    assert first["extraction_status"].tolist() == ["boxed", "boxed", "final_answer"]
    assert first["cluster"].tolist() == [0, 1, 0]
    assert first["correct"].tolist() == [True, False, True]
    half = c[c["episode_id"] == 2]  # \frac{1}{2} and 0.5 are one answer; a cut-off box is no answer
    assert half["cluster"].tolist() == [0, 0, -1]
    assert half["incomplete_boxed"].tolist() == [False, False, True]
    assert pool.manifest["provenance"]["labels"] == {"given": 0, "graded": 18, "unknown": 0}


def test_import_then_export_is_lossless(tmp_path, small_jsonl):
    pool = import_jsonl(small_jsonl)
    first = export_jsonl(pool, tmp_path / "first.jsonl")
    again = import_jsonl(first)
    for table in TABLES:
        pd.testing.assert_frame_equal(again.table(table), pool.table(table), obj=table)
    second = export_jsonl(again, tmp_path / "second.jsonl")
    assert second.read_bytes() == first.read_bytes()


def test_cli_import_export_import_export_is_byte_identical(tmp_path, small_jsonl):
    assert main(["pools", "import", str(small_jsonl), str(tmp_path / "p1")]) == 0
    assert main(["pools", "export", str(tmp_path / "p1"), str(tmp_path / "e1.jsonl")]) == 0
    assert main(["pools", "import", str(tmp_path / "e1.jsonl"), str(tmp_path / "p2")]) == 0
    assert main(["pools", "export", str(tmp_path / "p2"), str(tmp_path / "e2.jsonl")]) == 0
    assert (tmp_path / "e1.jsonl").read_bytes() == (tmp_path / "e2.jsonl").read_bytes()
    for table in TABLES:
        pd.testing.assert_frame_equal(load_pool(tmp_path / "p2").table(table), load_pool(tmp_path / "p1").table(table))


def test_missing_tokens_and_latency_are_estimated_and_flagged(small_jsonl):
    pool = import_jsonl(small_jsonl)
    records = small_jsonl_records()
    c = pool.candidates
    given = c["candidate"] == 0  # the fixture gives output_tokens and latency_s for candidate 0 only
    assert not c.loc[given, "tokens_estimated"].any()
    assert c.loc[~given, "tokens_estimated"].all()
    assert (c.loc[given, "output_tokens"] == 120).all()
    for rec, row in zip(records, c.itertuples(), strict=True):  # the fixture lists episodes in pool order
        if row.candidate == 0:
            continue
        assert row.output_tokens == estimate_tokens(rec["text"])
        assert row.latency_s == estimate_latency_s(row.prompt_tokens, row.output_tokens, rec["generator_params_b"])
    estimated = pool.manifest["provenance"]["estimated"]
    assert estimated["output_tokens"] == 12 and estimated["latency_s"] == 12
    assert estimated["verifier_prompt_tokens"] == 6  # the V2 entries give no tokens
    v2 = pool.verifications[pool.verifications["tier"] == "V2"]
    assert (v2["output_tokens"] == 0).all() and v2["score"].isna().all()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("Hello world", 3),  # 2 letter runs x 1.3 = 2.6 -> 3
        ("\\boxed{420}", 8),  # 1 letter run (1.3) + 3 digits + 3 symbols = 7.3 -> 8
        ("x = 12.5", 7),  # 1.3 + "=" + "." + 3 digits = 6.3 -> 7
    ],
)
def test_token_estimation_rule(text, expected):
    assert estimate_tokens(text) == expected


def test_reasoning_gym_items_are_graded_by_their_task_scorer(tmp_path):
    from pools.grading import make_reasoning_gym_items

    item = make_reasoning_gym_items(["basic_arithmetic"], size=1, seed=3)[0]
    base = {"dataset": "reasoning_gym", "item_id": item["item_id"], "problem": item["problem"],
            "gold": item["gold"], "task": item["task"], "metadata": item["metadata"], "generator": "g",
            "generator_params_b": 1.0, "prompt_tokens": 10, "output_tokens": 5}
    records = [{**base, "candidate": 0, "answer": item["gold"]},
               {**base, "candidate": 1, "answer": item["gold"] + "1"},
               {**base, "candidate": 2, "answer": f" {item['gold']} "}]
    pool = import_pool(str(write_jsonl(tmp_path / "rg.jsonl", records)), "jsonl")
    assert pool.candidates["correct"].tolist() == [True, False, True]
    assert pool.candidates["cluster"].tolist() == [0, 1, 0]  # literal clustering, whitespace aside


def _judged(price=None):
    entry = {"score": 0.9, "model": "judge-8b", "params_b": 8.0, "prompt_tokens": 50, "output_tokens": 5,
             "latency_s": 1.0}
    return {"V1": {**entry, "price": price} if price else entry}


def test_prices_travel_in_the_lines_and_round_trip(tmp_path):
    """A priced pool exports each model's price on its lines; import -> export -> import keeps the manifest's."""
    gen_price, judge_price = {"input": 1.5, "output": 6.0}, {"input": 0.2, "output": 0.2}
    lines = [_line(candidate=k, generator_price=gen_price, scores=_judged(judge_price)) for k in range(2)]
    src = tmp_path / "priced.jsonl"
    src.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    assert main(["pools", "import", str(src), str(tmp_path / "p1")]) == 0
    assert load_pool(tmp_path / "p1").manifest[PRICES_KEY] == {"gen-a": gen_price, "judge-8b": judge_price}
    assert main(["pools", "export", str(tmp_path / "p1"), str(tmp_path / "e1.jsonl")]) == 0
    assert (tmp_path / "e1.jsonl").read_bytes() == src.read_bytes()
    assert main(["pools", "import", str(tmp_path / "e1.jsonl"), str(tmp_path / "p2")]) == 0
    assert load_pool(tmp_path / "p2").manifest[PRICES_KEY] == {"gen-a": gen_price, "judge-8b": judge_price}


def test_price_given_on_import_is_exported_and_reimported(tmp_path, small_jsonl):
    assert main(["pools", "import", str(small_jsonl), str(tmp_path / "p1"), "--price", "gen-small=2,8"]) == 0
    assert main(["pools", "export", str(tmp_path / "p1"), str(tmp_path / "e1.jsonl")]) == 0
    assert main(["pools", "import", str(tmp_path / "e1.jsonl"), str(tmp_path / "p2")]) == 0
    assert load_pool(tmp_path / "p2").manifest[PRICES_KEY] == {"gen-small": {"input": 2.0, "output": 8.0}}


@pytest.mark.parametrize(("second", "message"), [
    ({"generator_price": {"input": 1.0, "output": 7.0}}, r"line 2, field 'generator_price': is \{'input': 1.0, "
     r"'output': 7.0\}; an earlier record priced model 'gen-a' at \{'input': 1.0, 'output': 6.0\}"),
    ({"generator_price": {"input": 1.0}}, r"line 2, field 'generator_price': is \{'input': 1.0\}; expected"),
    ({"generator_price": {"input": 1.0, "output": 1e308}}, r"output price 1e\+308; expected a number in 0\.\.10000"),
    ({"scores": _judged({"input": -1, "output": 0})}, r"field 'scores.V1.price': is input price -1; expected"),
])
def test_bad_prices_in_lines_are_one_line(tmp_path, capsys, second, message):
    lines = [_line(generator_price={"input": 1.0, "output": 6.0}), _line(candidate=1, **second)]
    src = tmp_path / "bad.jsonl"
    src.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert main(["pools", "import", str(src), str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "p").exists()
