"""Hand-built pools for tests: a few episodes written out literally, so expected values can be worked by hand."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from pools.store import Pool


@dataclass
class Cand:
    """One candidate: its answer (None = no answer), correctness, tokens, latency, and scores per tier."""

    answer: str | None
    correct: bool = False
    prompt_tokens: int = 100
    output_tokens: int = 1000
    latency_s: float = 10.0
    cap_hit: bool = False
    scores: dict[str, float | None] = field(default_factory=dict)  # None = row with NaN score


@dataclass
class Ep:
    """One episode: dataset, item, generator and its candidates in sampling order."""

    cands: Sequence[Cand]
    dataset: str = "d1"
    item_id: str = "i0"
    generator: str = "G"
    gold: str = "1"


MODELS = {"G": 10.0, "J1": 2.0, "J2": 4.0, "J3": 20.0}
TIER_MODEL = {"V1": "J1", "V2": "J2", "V3": "J3"}
VERIFY_PROMPT, VERIFY_OUTPUT, VERIFY_LATENCY = 50, 5, 1.0


def build_pool(episodes: Sequence[Ep], *, models: dict[str, float] | None = None) -> Pool:
    """Build a Pool from literal episodes. Verifier calls cost 50 prompt + 5 output tokens and 1 s."""
    models = dict(models or MODELS)
    n = max(len(ep.cands) for ep in episodes)  # N: the most candidates of an episode (others may hold fewer)
    items, eps, cands, vers = [], [], [], []
    seen_items = set()
    for e, ep in enumerate(episodes):
        if (ep.dataset, ep.item_id) not in seen_items:
            seen_items.add((ep.dataset, ep.item_id))
            items.append({"dataset": ep.dataset, "item_id": ep.item_id, "problem": f"problem {ep.item_id}",
                          "gold": ep.gold, "level": None, "subject": None, "task": None, "metadata": None})
        eps.append({"episode_id": e, "dataset": ep.dataset, "item_id": ep.item_id, "generator": ep.generator})
        keys: dict[str, int] = {}
        for j, c in enumerate(ep.cands):
            if c.answer is None:
                cl = -1
            else:
                cl = keys.setdefault(c.answer, len(keys))
            cands.append({
                "episode_id": e, "candidate": j, "text": None, "raw_answer": c.answer, "answer_key": c.answer,
                "cluster": cl, "correct": c.correct, "prompt_tokens": c.prompt_tokens,
                "output_tokens": c.output_tokens, "tokens_estimated": False, "latency_s": c.latency_s,
                "finish_reason": "length" if c.cap_hit else "stop", "cap_hit": c.cap_hit,
                "extraction_status": "none" if c.answer is None else "boxed", "incomplete_boxed": False,
                "repetition_score": 0.0,
            })
            for tier, s in c.scores.items():
                vers.append({"episode_id": e, "candidate": j, "tier": tier, "model": TIER_MODEL[tier],
                             "score": math.nan if s is None else float(s), "prompt_tokens": VERIFY_PROMPT,
                             "output_tokens": VERIFY_OUTPUT, "latency_s": VERIFY_LATENCY})
    generators = {ep.generator for ep in episodes}
    role = {name: ("generator" if name in generators else "verifier") for name in models}
    pool = Pool(
        items=pd.DataFrame(items),
        models=pd.DataFrame([{"name": k, "params_b": v, "role": role[k]} for k, v in models.items()]),
        episodes=pd.DataFrame(eps),
        candidates=pd.DataFrame(cands),
        verifications=pd.DataFrame(vers, columns=["episode_id", "candidate", "tier", "model", "score",
                                                  "prompt_tokens", "output_tokens", "latency_s"]),
        manifest={"n_candidates": n, "generation": {"max_output_tokens": 4000}},
    )
    pool.refresh_manifest()
    return pool
