"""The calibrated pool simulator: a profile and a seed in, a schema-exact ``Pool`` out.

``simulate_pool("paper")`` mirrors the CoBa paper's setup (five datasets, three generators, N = 16,
tiers V1-V3) and hits its per-dataset greedy / majority / oracle accuracy by construction. The
generative model lives in ``pools.simulate.model`` (its step 1 in ``pools.simulate.difficulty``); profiles in ``pools.simulate.profiles``;
parameters and what they were fit to in docs/SIMULATOR.md.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import ndtri

from pools.errors import PoolError
from pools.schema import LATER_COLUMNS, TABLES, TIERS
from pools.simulate import difficulty
from pools.simulate import model as m
from pools.simulate.model import SIMULATOR_VERSION
from pools.simulate.profiles import BUILTIN_PROFILES, Profile, load_profile, validate_profile
from pools.store import Pool

__all__ = [
    "BUILTIN_PROFILES",
    "SIMULATOR_VERSION",
    "Profile",
    "load_profile",
    "simulate_pool",
    "validate_profile",
]

_STAGES = ("items", "latent", "candidates", "audit", "latency", "verifiers")


def simulate_pool(profile: str | os.PathLike[str] | dict[str, Any] | Profile, seed: int = 0) -> Pool:
    """Generate the pool described by ``profile`` (built-in name, JSON path, dict) from ``seed``."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise PoolError(f"expected a non-negative integer seed, got {seed!r}", field="seed")
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    pr = prof.data
    # One independent stream per stage, so a change in one stage never shifts another stage's draws.
    rngs = dict(zip(_STAGES, (np.random.default_rng(s) for s in np.random.SeedSequence(int(seed)).spawn(6)),
                    strict=True))
    datasets, generators = list(pr["datasets"]), list(pr["generators"])
    ds = list(pr["datasets"].values())
    lay = m.make_layout(datasets, generators, [d["n_items"] for d in ds])
    n_cand, cap = pr["n_candidates"], pr["max_output_tokens"]
    prefixes = sorted({int(k) for d in ds for k in d["targets"]["majority"]})
    items = _items(rngs["items"], pr, lay)

    counts, pinned = _target_counts(pr, lay, prefixes)  # (D, G, S): greedy, majority@k..., oracle
    pair_rate = counts.reshape(lay.n_pairs, -1) / np.repeat(lay.n_items, len(generators))[:, None]
    lat = difficulty.build_latent(rngs["latent"], pr, lay, items["ease"], items["trap"], items["attractor_weights"],
                         pair_rate)
    # The paper gives majority accuracy per dataset only: split each dataset's majority@k total over
    # generators as the model expects it (a generator whose greedy errors are mostly token-cap hits
    # gains more from voting), so that the quotas ask for a typical draw, not a contrived one.
    expected = m.expected_outcomes(rngs["candidates"], lat, lay.ep_pair, lay.n_pairs, prefixes)
    for s in range(1, 1 + len(prefixes)):
        split = m.split_total(counts[..., s].sum(1), expected[:, s].reshape(counts.shape[:2]), counts[..., -1])
        counts[..., s] = np.where(pinned, counts[..., s], split)  # per-generator targets stay as given
    codes, log_len, deficit = m.match_quotas(rngs["candidates"], lat, lay.ep_pair,
                                             counts.reshape(lay.n_pairs, -1), prefixes)
    candidates = _candidates(rngs["audit"], pr, lay, items, codes, log_len)
    params = {name: float(v) for name, v in pr["models"].items()}
    gen_params = np.array([params[g] for g in generators])[lay.ep_generator]
    candidates["latency_s"] = m.latency_s(
        rngs["latency"], np.repeat(gen_params, n_cand), candidates["prompt_tokens"], candidates["output_tokens"],
        pr["latency"])
    verifications = _verifications(rngs["verifiers"], pr, lay, items, candidates, codes, params)

    pool = Pool(
        items=_typed(pd.DataFrame({k: items[k] for k in TABLES["items"]}), "items"),
        models=_typed(_models(pr), "models"),
        episodes=_typed(pd.DataFrame({
            "episode_id": np.arange(len(lay.ep_pair)),
            "dataset": np.array(datasets, dtype=object)[lay.ep_dataset],
            "item_id": items["item_id"][lay.ep_item],
            "generator": np.array(generators, dtype=object)[lay.ep_generator],
        }), "episodes"),
        candidates=_typed(pd.DataFrame(candidates), "candidates"),
        verifications=_typed(verifications, "verifications"),
    )
    pool.refresh_manifest(
        n_candidates=n_cand,
        generation={"max_output_tokens": cap, "temperature": pr["sampling"]["temperature"],
                    "top_p": pr["sampling"]["top_p"], "simulated": True},
        provenance={"simulator": SIMULATOR_VERSION, "profile": prof.name, "seed": int(seed),
                    "profile_sha256": prof.content_hash,
                    "quota_misses": int(np.abs(deficit).sum())},
    )
    return pool


def _typed(df: pd.DataFrame, table: str) -> pd.DataFrame:
    """``df`` with the schema's columns in order and the dtypes ``load_pool`` gives, so a fresh pool and
    a stored one compare equal."""
    kinds = {"str": "str", "str?": "str", "int": "int64", "float": "float64", "float?": "float64",
             "bool": "bool", "bool?": "boolean"}
    later = LATER_COLUMNS.get(table, {})  # outcome-table columns the simulator has no value for (NaN)
    return pd.DataFrame({c: (df[c] if c in df.columns else pd.Series(later[c], index=df.index)).astype(kinds[k])
                         for c, k in TABLES[table].items()})


def _target_counts(pr: dict[str, Any], lay: m.Layout, prefixes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Episodes per pair (D, G, S) that must be greedy-, majority@k- and oracle-correct, and which datasets
    (D, 1) pin them per generator.

    Each dataset's target is spread over generators with the profile's logit offsets such that the
    generator average is the target; counts are rounded so that the dataset total is exact. A dataset
    with ``generator_targets`` takes each generator's own targets instead (rounded per pair).
    """
    ds = list(pr["datasets"].values())
    offsets = np.array([g["accuracy_logit_offset"] for g in pr["generators"].values()])
    targets = [[d["targets"]["greedy"] for d in ds]]
    for k in prefixes:  # a dataset without a majority@k target gets one interpolated from its neighbours
        targets.append([d["targets"]["majority"].get(str(k), _interp_majority(d["targets"], k)) for d in ds])
    targets.append([d["targets"]["oracle"] for d in ds])
    counts = np.stack([m.pair_counts(m.pair_rates(np.array(t), offsets), lay.n_items) for t in targets], -1)
    pinned = np.zeros((len(ds), 1), bool)
    for d, spec in enumerate(ds):
        if "generator_targets" in spec:
            pinned[d] = True
            for g, name in enumerate(pr["generators"]):
                t = spec["generator_targets"][name]
                pcts = [t["greedy"], *(t["majority"].get(str(k), _interp_majority(t, k)) for k in prefixes),
                        t["oracle"]]
                counts[d, g] = np.round(np.array(pcts) * lay.n_items[d] / 100).astype(np.int64)
    counts[..., :-1] = np.minimum(counts[..., :-1], counts[..., -1:])
    return counts, pinned


def _interp_majority(targets: dict[str, Any], k: int) -> float:
    """A majority@k target for a k the dataset does not list: linear in log k between known points."""
    known = {1: targets["greedy"], **{int(j): v for j, v in targets["majority"].items()}}
    xs = sorted(known)
    return float(np.interp(math.log(k), np.log(xs), [known[x] for x in xs]))


def _items(rng: np.random.Generator, pr: dict[str, Any], lay: m.Layout) -> dict[str, np.ndarray]:
    """Items with gold answers, a latent ease, attractor wrong answers and problem token counts."""
    n_total = int(lay.n_items.sum())
    k = pr["wrong_answers"]["n_attractors"]
    dataset_of_item = np.repeat(np.arange(len(lay.n_items)), lay.n_items)
    ease = ndtri(difficulty.stratified_uniform(rng, dataset_of_item))
    weights = rng.dirichlet(np.full(k, pr["wrong_answers"]["attractor_weight_alpha"]), n_total)
    # Trap items: an exact share of each dataset has one dominant tempting wrong answer (attractor 1).
    fraction = np.array([d["trap_fraction"] for d in pr["datasets"].values()])
    u = difficulty.stratified_uniform(rng, dataset_of_item)
    trap = u < fraction[dataset_of_item]
    top = pr["traps"]["top_attractor_weight"]
    if k > 1:
        weights[trap] = np.concatenate([np.full((trap.sum(), 1), top), (1 - top) * weights[trap][:, 1:]
                                        / weights[trap][:, 1:].sum(1, keepdims=True)], 1)
    else:
        weights[trap] = 1.0
    # Attractor wrong answers sit a small distance from the gold value (off-by-a-bit mistakes).
    pool_offsets = np.concatenate([np.arange(-30, 0), np.arange(1, 31)])
    picks = np.argsort(rng.random((n_total, len(pool_offsets))), 1)[:, :k]
    anchor = rng.integers(0, 1000, n_total)
    is_frac = np.zeros(n_total, bool)
    denom = rng.choice(np.array([2, 3, 4, 5, 6, 7, 8, 9, 11, 12]), n_total)
    frac_draw = rng.random(n_total)
    small = rng.integers(0, 200, n_total)
    tok = np.exp(pr["lengths"]["problem_tokens_sigma"] * rng.standard_normal(n_total))
    level_noise = rng.standard_normal(n_total)
    pick_subject, pick_task = rng.random(n_total), rng.random(n_total)
    cols: dict[str, list[Any]] = {c: [] for c in TABLES["items"]}
    problem_tokens = np.zeros(n_total, np.int64)
    for d_idx, (name, spec) in enumerate(pr["datasets"].items()):
        sl = slice(int(lay.item_offset[d_idx]), int(lay.item_offset[d_idx] + lay.n_items[d_idx]))
        n = int(lay.n_items[d_idx])
        if spec["answers"] == "mixed":  # MATH-style: mostly small integers, some reduced fractions
            is_frac[sl] = frac_draw[sl] < 0.3
            anchor[sl] = np.where(is_frac[sl], anchor[sl] % 60 + 1, small[sl])
            g = np.gcd(anchor[sl], denom[sl])
            anchor[sl], denom[sl] = anchor[sl] // g, denom[sl] // g
            is_frac[sl] &= denom[sl] > 1
        gold = [rf"\frac{{{a}}}{{{b}}}" if f else str(a)
                for a, b, f in zip(anchor[sl], denom[sl], is_frac[sl], strict=True)]
        levels = spec["levels"]
        if levels:  # harder items (low ease) get higher levels
            rank = np.argsort(np.argsort(-ease[sl] + 0.5 * level_noise[sl]))
            level = [f"Level {1 + int(x) * levels // n}" for x in rank]
        else:
            level = [None] * n
        subj, task = spec["subjects"], spec["tasks"]
        cols["dataset"] += [name] * n
        cols["item_id"] += [f"{name}-{i:04d}" for i in range(n)]
        cols["gold"] += gold
        cols["level"] += level
        cols["subject"] += [subj[int(u * len(subj))] for u in pick_subject[sl]] if subj else [None] * n
        cols["task"] += [task[int(u * len(task))] for u in pick_task[sl]] if task else [None] * n
        problem_tokens[sl] = np.maximum(np.round(spec["problem_tokens_median"] * tok[sl]), 8)
    cols["problem"] = [f"[simulated {d} problem {i}; no text]" for d, i in zip(cols["dataset"], cols["item_id"],
                                                                                 strict=True)]
    cols["metadata"] = [None] * n_total
    out = {c: np.array(v, dtype=object) for c, v in cols.items()}
    out.update(ease=ease, trap=trap, attractor_weights=weights, attractor_offsets=pool_offsets[picks], anchor=anchor,
               problem_tokens=problem_tokens)
    return out


def _candidates(rng: np.random.Generator, pr: dict[str, Any], lay: m.Layout, items: dict[str, np.ndarray],
                codes: np.ndarray, log_len: np.ndarray) -> dict[str, np.ndarray]:
    """The candidates table's columns from answer codes and log lengths."""
    n_ep, n_cand = codes.shape
    k = pr["wrong_answers"]["n_attractors"]
    cap = pr["max_output_tokens"]
    item = np.repeat(lay.ep_item, n_cand)
    flat = codes.reshape(-1)
    cluster = m.cluster_ids(codes)
    gold_cluster = np.where(codes == 0, cluster, -1).max(1)
    correct = (cluster == gold_cluster[:, None]) & (cluster >= 0)
    # Wrong answers as integers near the item's anchor; own (non-attractor) ones far away and unique per slot.
    anchor = items["anchor"][item]
    attractor_value = items["attractor_offsets"][item, np.clip(flat - 1, 0, k - 1)]
    slot = np.tile(np.arange(n_cand), n_ep)
    sign = np.where(rng.random(len(flat)) < 0.5, -1, 1)
    own_value = sign * (100 + 13 * slot + rng.integers(0, 13, len(flat)))
    value = anchor + np.where(flat <= k, attractor_value, own_value)
    gold = items["gold"][item]
    variant = rng.random(len(flat))
    key = np.empty(len(flat), dtype=object)
    raw = np.empty(len(flat), dtype=object)
    for i in np.flatnonzero(flat >= 0):
        if flat[i] == 0:
            key[i] = gold[i]
            raw[i] = _written(gold[i], variant[i])
        else:
            key[i] = str(value[i])
            raw[i] = _written(key[i], variant[i])
    out_tok = m.output_tokens(log_len, cap).reshape(-1)
    cap_hit = flat < 0
    aud = pr["audit"]
    rep_a = np.where(cap_hit, aud["repetition_cap_hit"]["a"], aud["repetition_answered"]["a"])
    rep_b = np.where(cap_hit, aud["repetition_cap_hit"]["b"], aud["repetition_answered"]["b"])
    return {
        "episode_id": np.repeat(np.arange(n_ep), n_cand),
        "candidate": slot,
        "text": np.full(len(flat), None, dtype=object),
        "raw_answer": raw,
        "answer_key": key,
        "cluster": cluster.reshape(-1),
        "correct": correct.reshape(-1),
        "prompt_tokens": items["problem_tokens"][item] + pr["lengths"]["prompt_template_tokens"],
        "output_tokens": out_tok,
        "tokens_estimated": np.zeros(len(flat), bool),
        "latency_s": np.zeros(len(flat)),
        "finish_reason": np.where(cap_hit, "length", "stop").astype(object),
        "cap_hit": cap_hit,
        "extraction_status": np.where(cap_hit, "none", "boxed").astype(object),
        "incomplete_boxed": cap_hit & (rng.random(len(flat)) < aud["incomplete_boxed_given_cap"]),
        "repetition_score": np.round(rng.beta(rep_a, rep_b), 4),
    }


def _written(key: str, u: float) -> str:
    """How a model might have written a normalized answer: LaTeX fraction forms, a stray '.0'."""
    if key.startswith(r"\frac"):
        return key if u < 0.6 else key.replace(r"\frac", r"\dfrac") if u < 0.9 else "/".join(
            part.strip("{}") for part in key[len(r"\frac"):].split("}{"))
    return f"{key}.0" if u < 0.02 else key


def _verifications(rng: np.random.Generator, pr: dict[str, Any], lay: m.Layout, items: dict[str, np.ndarray],
                   cand: dict[str, np.ndarray], codes: np.ndarray, params: dict[str, float]) -> pd.DataFrame:
    """One row per (candidate, tier) the profile's tiers cover, with scores and call costs."""
    n_ep, n_cand = codes.shape
    correct = cand["correct"].reshape(n_ep, n_cand).astype(float)
    cluster = cand["cluster"].reshape(n_ep, n_cand)
    shared = rng.standard_normal((n_ep, 2 * n_cand))
    problem = items["problem_tokens"][np.repeat(lay.ep_item, n_cand)].reshape(n_ep, n_cand)
    gen_out = cand["output_tokens"].reshape(n_ep, n_cand)
    parts: dict[str, list[np.ndarray]] = {c: [] for c in (*TABLES["verifications"], "tier_index")}
    for tier_index, tier in enumerate(TIERS):
        if tier not in pr["tiers"]:
            continue
        t = pr["tiers"][tier]
        x = m.verifier_latents(rng, correct, cluster, shared, t["auroc"], t["cluster_correlation"],
                               pr["cross_tier_correlation"], t["no_answer_shift"])
        score = m.expit(t["score_sharpness"] * x + t["score_bias"])
        score = np.where(rng.random(score.shape) < t["missing_rate"], np.nan, np.round(score, 4))
        cols = np.arange(n_cand) if t["candidates"] == "all" else np.array(t["candidates"])
        sel = (slice(None), cols)
        # The verifier reads the problem and the candidate's output, truncated to its read cap.
        prompt = t["prompt_template_tokens"] + problem[sel] + np.minimum(gen_out[sel], t["read_cap_tokens"])
        out = m.lognormal_int(rng, t["output_tokens_median"], t["output_tokens_sigma"], prompt.shape)
        latency = m.latency_s(rng, params[t["model"]], prompt, out, pr["latency"]).reshape(-1)
        flat_score = score[sel].reshape(-1)
        # "absent": an unparsed call leaves no row, as in replay metadata that keeps parsed scores only
        # (the paper's V2); "nan": the call is stored, its cost counted, with a missing score.
        keep = ~np.isnan(flat_score) if t["missing_stored_as"] == "absent" else np.ones(prompt.size, bool)
        rows = int(keep.sum())
        parts["episode_id"].append(np.repeat(np.arange(n_ep), len(cols))[keep])
        parts["candidate"].append(np.tile(cols, n_ep)[keep])
        parts["tier"].append(np.full(rows, tier, dtype=object))
        parts["tier_index"].append(np.full(rows, tier_index))
        parts["model"].append(np.full(rows, t["model"], dtype=object))
        parts["score"].append(flat_score[keep])
        parts["prompt_tokens"].append(prompt.reshape(-1)[keep])
        parts["output_tokens"].append(out.reshape(-1)[keep])
        parts["latency_s"].append(latency[keep])
    columns = {c: np.concatenate(v) for c, v in parts.items()}
    order = np.lexsort((columns.pop("tier_index"), columns["candidate"], columns["episode_id"]))
    return pd.DataFrame({c: v[order] for c, v in columns.items()})


def _models(pr: dict[str, Any]) -> pd.DataFrame:
    """One row per model: generator, verifier, or both."""
    verifiers = {t["model"] for t in pr["tiers"].values()}
    rows = []
    for name, params in pr["models"].items():
        gen, ver = name in pr["generators"], name in verifiers
        role = "generator+verifier" if gen and ver else "generator" if gen else "verifier"
        rows.append({"name": name, "params_b": float(params), "role": role})
    return pd.DataFrame(rows)
