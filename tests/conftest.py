"""Shared fixtures: the shared data folder, a small canonical JSONL, and a synthetic pool of any size."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pools.schema import PAPER_TIER_ROLES
from pools.store import Pool
from tests.file_order import costliest_files_first
from tests.llama_server import (  # noqa: F401  (the real-server fixtures, their mark and dead-server hook)
    llama_server,
    llama_server_process,
    pytest_runtest_makereport,
    second_llama_server_process,
)
from tests.llama_server import (
    pytest_collection_modifyitems as mark_real_server_tests,
)

REPO_ROOT = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the real-server tests; under pytest-xdist, hand out the costliest test files first."""
    mark_real_server_tests(config, items)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        costliest_files_first(items)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared`` relative to the repository root, where the real data lives (never copied into the repo)."""
    path = (REPO_ROOT / ".." / "shared").resolve()
    if not (path / "data").is_dir():
        pytest.fail(f"shared data folder not found at {path}/data: these tests read real data from "
                    "../shared/data relative to the repository root; check out the shared folder there")
    return path


# --------------------------------------------------------------------------------------------------
# A small canonical JSONL: 2 datasets, 2 generators, N = 3, tiers V1 and V3 (V2 on some lines only)
# --------------------------------------------------------------------------------------------------

SMALL_ITEMS = [
    {"dataset": "math", "item_id": "m1", "problem": "What is $1 + 1$?", "gold": "2"},
    {"dataset": "math", "item_id": "m2", "problem": "Simplify $\\frac{2}{4}$.", "gold": "\\frac{1}{2}"},
    {"dataset": "aime", "item_id": "a1", "problem": "Find the remainder of 2025 mod 7.", "gold": "2"},
]
SMALL_GENERATORS = {"gen-small": 1.5, "gen-big": 14.0}
SMALL_TEXTS = [
    ["We add: $1 + 1 = 2$. The answer is $\\boxed{2}$.", "So it is \\boxed{3}.", "The final answer is 2."],
    ["Half: $\\boxed{\\frac{1}{2}}$", "It equals $0.5$, i.e. \\boxed{0.5}.", "Thinking... \\boxed{\\frac{1"],
    ["2025 = 7 * 289 + 2, so \\boxed{2}.", "\\boxed{4}", "No idea."],
]


def small_jsonl_records() -> list[dict[str, Any]]:
    """Minimal canonical records (required fields, text, some scores); answers, clusters, labels computed."""
    records = []
    for i, item in enumerate(SMALL_ITEMS):
        for g, (generator, params) in enumerate(SMALL_GENERATORS.items()):
            for k, text in enumerate(SMALL_TEXTS[i]):
                scores = {"V1": {"score": round(0.2 + 0.3 * k, 2), "model": "judge-8b", "params_b": 8.0,
                                 "prompt_tokens": 300 + k, "output_tokens": 2, "latency_s": 0.25}}
                if g == 1 and k != 1:
                    scores["V2"] = {"score": None, "model": "prm-7b", "params_b": 7.0}
                scores["V3"] = {"score": 0.9 if k == 0 else 0.1, "model": "gen-big", "params_b": 14.0,
                                "prompt_tokens": 500, "output_tokens": 1, "latency_s": 1.5}
                rec = {**item, "generator": generator, "generator_params_b": params, "candidate": k,
                       "text": text, "prompt_tokens": 40 + i, "scores": scores}
                if k == 0:
                    rec.update(output_tokens=120, latency_s=3.0, finish_reason="stop")
                records.append(rec)
    return records


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    """Write ``records`` one JSON object per line."""
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture
def small_jsonl(tmp_path: Path) -> Path:
    """A small canonical JSONL file in a temporary folder."""
    return write_jsonl(tmp_path / "small.jsonl", small_jsonl_records())


# --------------------------------------------------------------------------------------------------
# A synthetic pool of the paper's size, built with numpy (no grading, no text model)
# --------------------------------------------------------------------------------------------------

#: Items per dataset in the paper: 1,043 items x 3 generators = 3,129 episodes.
PAPER_DATASETS = {"math500": 500, "aime2024": 30, "aime2025": 30, "amc2023": 40, "reasoning_gym": 443}
PAPER_GENERATORS = {"Qwen3-14B": 14.0, "Phi-4-reasoning": 14.7, "Qwen3-8B": 8.2}


#: The paper's verifiers: name -> (model, params_b, role).
PAPER_VERIFIERS: dict[str, tuple[str, float, str]] = {
    "V1": ("Qwen3-8B", 8.2, "cheap_judge"), "V2": ("Phi-4-reasoning", 14.7, "process_judge"),
    "V3": ("Qwen3-14B", 14.0, "strong_verifier")}


def make_synthetic_pool(datasets: dict[str, int] | None = None, generators: dict[str, float] | None = None,
                        n_candidates: int = 16, text_chars: int = 200, seed: int = 0,
                        verifiers: dict[str, tuple[str, float, str]] | None = None) -> Pool:
    """A valid pool with random answers, labels, tokens and verifier scores (process judges sparse, some NaN).

    ``verifiers``: name -> (model, params_b, role), default the paper's V1/V2/V3; roles of names that are not
    the paper's go into the manifest's ``verifier_roles``.
    """
    verifiers = PAPER_VERIFIERS if verifiers is None else verifiers
    datasets = PAPER_DATASETS if datasets is None else datasets
    generators = PAPER_GENERATORS if generators is None else generators
    rng = np.random.default_rng(seed)
    item_ds = np.repeat(list(datasets), list(datasets.values()))
    item_id = np.concatenate([[f"{d}-{i}" for i in range(n)] for d, n in datasets.items()])
    n_items = len(item_ds)
    items = pd.DataFrame({
        "dataset": item_ds, "item_id": item_id, "problem": [f"Problem {i}: compute x." for i in item_id],
        "gold": rng.integers(0, 4, n_items).astype(str), "level": pd.Series([None] * n_items, dtype="str"),
        "subject": "algebra", "task": pd.Series([None] * n_items, dtype="str"),
        "metadata": pd.Series([None] * n_items, dtype="str"),
    }).astype({"dataset": "str", "item_id": "str", "problem": "str", "gold": "str", "subject": "str"})
    gens = list(generators)
    e_item = np.tile(np.arange(n_items), len(gens))
    e_gen = np.repeat(np.arange(len(gens)), n_items)
    n_ep = len(e_item)
    episodes = pd.DataFrame({"episode_id": np.arange(n_ep, dtype=np.int64), "dataset": item_ds[e_item],
                             "item_id": item_id[e_item], "generator": np.array(gens)[e_gen]}
                            ).astype({"dataset": "str", "item_id": "str", "generator": "str"})

    n = n_candidates
    answers = rng.integers(-1, 4, size=(n_ep, n))  # -1 = no answer
    clusters = np.full_like(answers, -1)
    for e in range(n_ep):  # number clusters in order of first appearance
        seen: dict[int, int] = {}
        for k in range(n):
            if answers[e, k] >= 0:
                clusters[e, k] = seen.setdefault(int(answers[e, k]), len(seen))
    gold = items["gold"].astype(int).to_numpy()[e_item]
    flat_answers = answers.ravel()
    has_answer = flat_answers >= 0
    raw = np.where(has_answer, flat_answers.astype(str), None)
    output_tokens = rng.integers(50, 16_384, n_ep * n)
    finish = np.where(output_tokens >= 16_000, "length", "stop")
    filler = "x" * max(text_chars - 12, 0)
    candidates = pd.DataFrame({
        "episode_id": np.repeat(np.arange(n_ep, dtype=np.int64), n),
        "candidate": np.tile(np.arange(n, dtype=np.int64), n_ep),
        "text": pd.Series([f"{filler} \\boxed{{{a}}}" for a in raw], dtype="str"),
        "raw_answer": pd.Series(raw, dtype="str"),
        "answer_key": pd.Series(raw, dtype="str"),
        "cluster": clusters.ravel().astype(np.int64),
        "correct": pd.array(flat_answers == np.repeat(gold, n), dtype="boolean"),
        "prompt_tokens": rng.integers(50, 400, n_ep * n),
        "output_tokens": output_tokens,
        "tokens_estimated": False,
        "latency_s": output_tokens / 40.0,
        "finish_reason": pd.Series(finish, dtype="str"),
        "cap_hit": finish == "length",
        "extraction_status": pd.Series(np.where(has_answer, "boxed", "none"), dtype="str"),
        "incomplete_boxed": False,
        "repetition_score": rng.random(n_ep * n) * 0.2,
    })
    verifier = {name: spec[:2] for name, spec in verifiers.items()}
    parts = []
    for tier, (_, _, role) in verifiers.items():
        mask = np.ones(n_ep * n, bool) if role != "process_judge" else rng.random(n_ep * n) < 0.3
        idx = np.flatnonzero(mask)
        score = rng.random(len(idx))
        score[rng.random(len(idx)) < 0.05] = np.nan  # a call without a usable score
        parts.append(pd.DataFrame({
            "episode_id": candidates["episode_id"].to_numpy()[idx], "candidate": candidates["candidate"].to_numpy()[idx],
            "tier": tier, "model": verifier[tier][0], "score": score,
            "prompt_tokens": rng.integers(200, 4000, len(idx)), "output_tokens": rng.integers(1, 20, len(idx)),
            "latency_s": rng.random(len(idx)) * 2,
        }))
    verifications = pd.concat(parts, ignore_index=True).astype({"tier": "str", "model": "str"}) if parts else \
        pd.DataFrame({"episode_id": np.zeros(0, np.int64), "candidate": np.zeros(0, np.int64),
                      "tier": pd.Series([], dtype="str"), "model": pd.Series([], dtype="str"),
                      "score": np.zeros(0), "prompt_tokens": np.zeros(0, np.int64),
                      "output_tokens": np.zeros(0, np.int64), "latency_s": np.zeros(0)})
    verifier_params = dict(verifier.values())
    names = gens + [m for m in verifier_params if m not in generators]
    models = pd.DataFrame({
        "name": names, "params_b": [float(generators.get(m, verifier_params.get(m))) for m in names],
        "role": ["+".join(r for r, used in (("generator", m in generators), ("verifier", m in verifier_params))
                          if used) for m in names],
    }).astype({"name": "str", "role": "str"})
    pool = Pool(items=items, models=models, episodes=episodes, candidates=candidates, verifications=verifications,
                manifest={"n_candidates": n, "generation": {"temperature": 0.6, "top_p": 0.95},
                          "provenance": {"source": "tests/conftest.py make_synthetic_pool", "seed": seed},
                          **({"verifier_roles": roles} if (roles := {t: spec[2] for t, spec in verifiers.items()
                                                                     if PAPER_TIER_ROLES.get(t) != spec[2]}) else {}),
                          "tiers": list(verifiers)})
    pool.refresh_manifest()
    return pool
