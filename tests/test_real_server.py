"""End to end against a real OpenAI-compatible server: llama.cpp's, serving SmolLM2-135M-Instruct
(the ``llama_server`` fixture of tests/llama_server.py; needs the ``server-test`` extra, never skipped).

Through the ``coba`` CLI: generate 4 samples for 4 Reasoning Gym problems, score them with the same model
as the V1 judge, build and validate the pool, replay it with ``coba bench``. A recording proxy between
the pipeline and the server keeps the server's own answers, so the test checks that every token count
in the pool is the server's reported ``usage``. An unreachable endpoint ends with exit status 2 after
bounded retries and leaves the journal as it was.
"""

from __future__ import annotations

import json
import math
import re
import socket
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import yaml

from coba_cli.main import main as coba
from pools.generation.journal import JOURNAL_NAME, read_journal
from pools.grading import reasoning_gym_scorer
from pools.store import load_pool
from tests.fake_openai_server import RecordingProxy
from tests.llama_server import MODEL, PARAMS_B

N = 4
MAX_TOKENS = 48
# Two easy Reasoning Gym tasks, two items each: 4 problems (short prompts keep the judge calls cheap).
RGYM_SMALL = {"seed": 11, "size_per_task": 2, "tasks": {
    "chain_sum": {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2},
    "basic_arithmetic": {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2},
}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


YES_WORDS, NO_WORDS = ("yes", "true", "correct"), ("no", "false", "incorrect")  # as in v1_judge.yaml


def _letters(text: str) -> str:
    return re.sub(r"[^a-z]", "", text.lower())


def _v1_score(answer: dict) -> float | None:
    """The V1 score of a recorded chat answer, by the rule v1_judge.yaml documents.

    P(yes) / (P(yes) + P(no)) over the first token's top log-probs; without a yes/no word among them, the
    reply's first word: yes -> 1, no -> 0; otherwise no score.
    """
    choice = answer["choices"][0]
    content = ((choice.get("logprobs") or {}).get("content")) or []
    yes = no = 0.0
    for top in content[0]["top_logprobs"] if content else []:
        word = _letters(top["token"])
        if word in YES_WORDS:
            yes += math.exp(top["logprob"])
        elif word in NO_WORDS:
            no += math.exp(top["logprob"])
    if yes + no > 0:
        return yes / (yes + no)
    words = (choice["message"]["content"] or "").split()
    first = _letters(words[0]) if words else ""
    return 1.0 if first in YES_WORDS else 0.0 if first in NO_WORDS else None


def test_generate_judge_build_bench_on_llama_cpp(llama_server: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    work, dest, bench_out = tmp_path / "work", tmp_path / "pool", tmp_path / "bench"
    rgym = tmp_path / "rgym_small.yaml"
    rgym.write_text(yaml.safe_dump(RGYM_SMALL))
    calls = ["--concurrency", "2", "--timeout", "120", "--max-attempts", "2", "--backoff", "0.5", "--no-progress"]

    with RecordingProxy(llama_server) as proxy:
        # --n-per-request 4: llama.cpp ignores n, which is detected; the rest is asked one sample at a time.
        assert coba(["pools", "generate", str(work), "--endpoint", f"{proxy.url}/v1,{MODEL}", "--dataset",
                     "reasoning_gym", "--rgym-config", str(rgym), "--n", str(N), "--n-per-request", str(N),
                     "--temperature", "0.8", "--max-tokens", str(MAX_TOKENS), "--seed", "1", *calls]) == 0
        gen_exchanges = list(proxy.exchanges)
        assert coba(["pools", "verify", str(work), "--tier", "V1", "--endpoint", f"{proxy.url}/v1",
                     "--model", MODEL, *calls, "--out", str(dest)]) == 0
        judge_exchanges = proxy.exchanges[len(gen_exchanges):]

    # 16 samples in 16 answered requests: the first one or two (in flight before the server's answer showed
    # that it ignores n: at most --concurrency of them) asked for n=4, every later one for a single sample.
    asked = [body.get("n") for _, body, _, _ in gen_exchanges]
    assert len(gen_exchanges) == 16 and all(status == 200 for _, _, status, _ in gen_exchanges)
    assert 1 <= asked.count(N) <= 2 and asked.count(None) == 16 - asked.count(N)
    assert all(len(answer["choices"]) == 1 for *_, answer in gen_exchanges)
    assert len(judge_exchanges) == 16

    # The pool validates on load and holds 4 episodes x 4 candidates, each scored once by V1.
    pool = load_pool(dest)
    assert coba(["pools", "validate", str(dest)]) == 0
    assert (len(pool.episodes), pool.n_candidates, len(pool.candidates)) == (4, N, 16)
    assert pool.tiers == ["V1"] and len(pool.verifications) == 16
    assert pool.models.set_index("name")["params_b"].to_dict() == {MODEL: PARAMS_B}
    cands = pool.candidates.merge(pool.episodes, on="episode_id")
    assert Counter(cands["item_id"]) == {f"{t}-11-{i}": N for t in RGYM_SMALL["tasks"] for i in range(2)}

    # Token counts are the server's usage, candidate by candidate (matched by text), never estimated.
    served = sorted((a["choices"][0]["message"]["content"], a["usage"]["prompt_tokens"],
                     a["usage"]["completion_tokens"], a["choices"][0]["finish_reason"])
                    for *_, a in gen_exchanges)
    stored = sorted(zip(cands["text"], cands["prompt_tokens"], cands["output_tokens"], cands["finish_reason"],
                        strict=True))
    assert stored == served
    assert not cands["tokens_estimated"].any()
    assert (cands["output_tokens"] <= MAX_TOKENS).all()
    assert (cands["cap_hit"] == (cands["finish_reason"] == "length")).all()  # finish reasons: the server's
    assert (cands.loc[cands["cap_hit"], "output_tokens"] == MAX_TOKENS).all()
    judged = sorted((a["usage"]["prompt_tokens"], a["usage"]["completion_tokens"]) for *_, a in judge_exchanges)
    verifs = pool.verifications
    assert sorted(zip(verifs["prompt_tokens"], verifs["output_tokens"], strict=True)) == judged
    assert (verifs["output_tokens"] <= 1).all()  # max_tokens 1: the judge's one-token verdict

    # V1 scores: P(yes) from the first token's top log-probabilities the server sent, recomputed here.
    expected = [_v1_score(a) for *_, a in judge_exchanges]
    assert sum(p is not None for p in expected) >= 8, "most judge answers should carry a yes/no log-probability"
    assert sorted(verifs["score"].dropna()) == pytest.approx(sorted(p for p in expected if p is not None))
    assert verifs["score"].isna().sum() == expected.count(None)

    # Grading: each task's own score_answer on the extracted answer.
    items = pool.items.set_index("item_id")
    for row in cands.itertuples():
        item = items.loc[row.item_id]
        entry = {"question": item["problem"], "answer": item["gold"], "metadata": json.loads(item["metadata"])}
        scorer = reasoning_gym_scorer(item["task"], entry)
        expected_correct = not pd.isna(row.raw_answer) and bool(scorer(row.raw_answer))
        assert bool(row.correct) == expected_correct, (row.item_id, row.raw_answer)

    # Replay with `coba bench`: greedy = candidate 0's correctness, the pool oracle = any correct candidate.
    assert coba(["bench", "--pool", str(dest), "--policies", "greedy,bon4_majority,pool_oracle", "--out",
                 str(bench_out), "--no-figures", "--no-progress", "--resamples", "50"]) == 0
    results = json.loads((bench_out / "results.json").read_text())["policies"]
    by_episode = cands.groupby("episode_id")
    first_correct = by_episode.apply(lambda g: bool(g.loc[g["candidate"] == 0, "correct"].iloc[0])).mean()
    any_correct = by_episode["correct"].any().mean()
    assert results["greedy"]["macro"]["acc"] == pytest.approx(first_correct)
    assert results["pool_oracle"]["macro"]["acc"] == pytest.approx(any_correct)
    assert 0.0 <= results["bon4_majority"]["macro"]["acc"] <= any_correct
    assert results["greedy"]["macro"]["total_tokens"] > 0

    # An unreachable endpoint: a clear error after the bounded retries, exit 2, nothing written lost.
    journal = work / JOURNAL_NAME
    before = journal.read_bytes()
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    capsys.readouterr()
    assert coba(["pools", "verify", str(work), "--tier", "V2", "--endpoint", f"{dead},{MODEL}", "--max-attempts",
                 "3", "--backoff", "0.01", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "cannot connect" in err and "(after 3 attempts)" in err and "run the same command again" in err
    assert journal.read_bytes() == before
    assert len(read_journal(work).scores) == 16
