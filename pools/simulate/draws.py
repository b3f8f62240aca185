"""Every random draw of a simulated pool, as numpy arrays: the numeric half of ``pools.simulate``.

``draw_pool`` runs the generative model (``pools.simulate.model``) stage by stage, each stage from its own
random stream, and keeps per candidate and per verifier call only numbers (no Python strings or pandas
frames), so a million-episode pool's draws fit in a few gigabytes; ``pools.simulate.tables`` turns any range
of episodes into the pool's table rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtri

from pools.schema import TABLES, TIERS
from pools.simulate import difficulty
from pools.simulate import model as m

_STAGES = ("items", "latent", "candidates", "audit", "latency", "verifiers")


@dataclass
class TierDraws:
    """One verifier tier's calls, one slot per (episode, covered candidate), episode-major."""

    tier: str
    tier_index: int  # position in the paper's tier order (the verifications table's sort key)
    model: str
    columns: np.ndarray  # the candidate positions the tier scores
    keep: np.ndarray  # whether the slot's call is stored (an "absent" missing score leaves no row)
    score: np.ndarray
    prompt_tokens: np.ndarray  # int32: small counts, widened back to int64 in the table
    output_tokens: np.ndarray
    latency_s: np.ndarray


@dataclass
class PoolDraws:
    """A simulated pool's draws: the items (a small table, built whole), per-candidate arrays (flat,
    episode-major) and per-tier verifier calls."""

    pr: dict[str, Any]
    lay: m.Layout
    items: dict[str, np.ndarray]
    codes: np.ndarray  # (E, N) answer codes, see ``model.draw_candidates``
    candidates: dict[str, np.ndarray]
    tiers: list[TierDraws]
    quota_misses: int

    @property
    def n_episodes(self) -> int:
        """Number of episodes."""
        return len(self.lay.ep_pair)


def draw_pool(pr: dict[str, Any], seed: int) -> PoolDraws:
    """Draw the pool described by the profile data ``pr`` from ``seed``."""
    # One independent stream per stage, so a change in one stage never shifts another stage's draws.
    rngs = dict(zip(_STAGES, (np.random.default_rng(s) for s in np.random.SeedSequence(int(seed)).spawn(6)),
                    strict=True))
    datasets, generators = list(pr["datasets"]), list(pr["generators"])
    ds = list(pr["datasets"].values())
    lay = m.make_layout(datasets, generators, [d["n_items"] for d in ds])
    n_cand = pr["n_candidates"]
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
    del lat
    candidates = _candidates(rngs["audit"], pr, lay, items, codes, log_len)
    del log_len
    params = {name: float(v) for name, v in pr["models"].items()}
    gen_params = np.array([params[g] for g in generators])[lay.ep_generator]
    candidates["latency_s"] = m.latency_s(
        rngs["latency"], np.repeat(gen_params, n_cand), prompt_tokens(pr, lay, items, n_cand),
        candidates["output_tokens"], pr["latency"])
    tiers = _verifications(rngs["verifiers"], pr, lay, items, candidates, codes, params)
    for name in ("output_tokens", "cluster"):  # small integers: stored narrow, widened again per table chunk
        candidates[name] = candidates[name].astype(np.int32)
    return PoolDraws(pr, lay, items, codes, candidates, tiers, int(np.abs(deficit).sum()))


def prompt_tokens(pr: dict[str, Any], lay: m.Layout, items: dict[str, np.ndarray], n_cand: int,
                   episodes: slice = slice(None)) -> np.ndarray:
    """Generator prompt tokens of every candidate of ``episodes`` (flat): the problem plus the template."""
    return np.repeat(items["problem_tokens"][lay.ep_item[episodes]], n_cand) + pr["lengths"]["prompt_template_tokens"]


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
    """The candidates' numeric columns (flat, episode-major) from answer codes and log lengths; a wrong
    answer's ``value`` is an integer near the item's anchor (written out as text per table chunk)."""
    n_ep, n_cand = codes.shape
    k = pr["wrong_answers"]["n_attractors"]
    cap = pr["max_output_tokens"]
    item = np.repeat(lay.ep_item, n_cand)
    flat = codes.reshape(-1)
    cluster = m.cluster_ids(codes)
    gold_cluster = np.where(codes == 0, cluster, -1).max(1)
    correct = (cluster == gold_cluster[:, None]) & (cluster >= 0)
    # Wrong answers as integers near the item's anchor; own (non-attractor) ones far away and unique per slot.
    attractor_value = items["attractor_offsets"][item, np.clip(flat - 1, 0, k - 1)]
    slot = np.tile(np.arange(n_cand), n_ep)
    sign = np.where(rng.random(len(flat)) < 0.5, -1, 1)
    own_value = sign * (100 + 13 * slot + rng.integers(0, 13, len(flat)))
    del sign, slot
    value = (items["anchor"][item] + np.where(flat <= k, attractor_value, own_value)).astype(np.int32)
    del attractor_value, own_value, item
    variant = rng.random(len(flat))
    out_tok = m.output_tokens(log_len, cap).reshape(-1)
    cap_hit = flat < 0
    aud = pr["audit"]
    incomplete = cap_hit & (rng.random(len(flat)) < aud["incomplete_boxed_given_cap"])
    rep_a = np.where(cap_hit, aud["repetition_cap_hit"]["a"], aud["repetition_answered"]["a"])
    rep_b = np.where(cap_hit, aud["repetition_cap_hit"]["b"], aud["repetition_answered"]["b"])
    return {
        "cluster": cluster.reshape(-1),
        "correct": correct.reshape(-1),
        "value": value,
        "variant": variant,
        "output_tokens": out_tok,
        "cap_hit": cap_hit,
        "incomplete_boxed": incomplete,
        "repetition_score": np.round(rng.beta(rep_a, rep_b), 4),
    }


def _verifications(rng: np.random.Generator, pr: dict[str, Any], lay: m.Layout, items: dict[str, np.ndarray],
                   cand: dict[str, np.ndarray], codes: np.ndarray, params: dict[str, float]) -> list[TierDraws]:
    """Per tier the profile covers: scores and call costs of every (episode, covered candidate)."""
    n_ep, n_cand = codes.shape
    correct = cand["correct"].reshape(n_ep, n_cand).astype(float)
    cluster = cand["cluster"].reshape(n_ep, n_cand)
    shared = rng.standard_normal((n_ep, 2 * n_cand))
    problem = items["problem_tokens"][lay.ep_item][:, None]
    gen_out = cand["output_tokens"].reshape(n_ep, n_cand)
    out: list[TierDraws] = []
    for tier_index, tier in enumerate(TIERS):
        if tier not in pr["tiers"]:
            continue
        t = pr["tiers"][tier]
        x = m.verifier_latents(rng, correct, cluster, shared, t["auroc"], t["cluster_correlation"],
                               pr["cross_tier_correlation"], t["no_answer_shift"])
        missing = np.empty(x.shape, bool)
        for b in m.row_blocks(n_ep):  # one whole-shape draw, taken block by block: less memory
            missing[b] = rng.random((b.stop - b.start, n_cand)) < t["missing_rate"]
        score = x  # rewritten in place, block by block
        for b in m.row_blocks(n_ep):
            score[b] = np.where(missing[b], np.nan, np.round(m.expit(t["score_sharpness"] * x[b] + t["score_bias"]), 4))
        del x, missing
        cols = np.arange(n_cand) if t["candidates"] == "all" else np.array(t["candidates"])
        sel = (slice(None), cols)
        # The verifier reads the problem and the candidate's output, truncated to its read cap.
        prompt = t["prompt_template_tokens"] + problem + np.minimum(gen_out[sel], t["read_cap_tokens"])
        tokens = m.lognormal_int(rng, t["output_tokens_median"], t["output_tokens_sigma"], prompt.shape)
        latency = m.latency_s(rng, params[t["model"]], prompt, tokens, pr["latency"]).reshape(-1)
        flat_score = score[sel].reshape(-1)
        del score
        # "absent": an unparsed call leaves no row, as in replay metadata that keeps parsed scores only
        # (the paper's V2); "nan": the call is stored, its cost counted, with a missing score.
        keep = ~np.isnan(flat_score) if t["missing_stored_as"] == "absent" else np.ones(prompt.size, bool)
        out.append(TierDraws(tier, tier_index, t["model"], cols, keep, flat_score,
                             prompt.reshape(-1).astype(np.int32), tokens.reshape(-1).astype(np.int32), latency))
    return out

