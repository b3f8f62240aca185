"""The generative model of the calibrated pool simulator (see docs/SIMULATOR.md for every parameter).

Story of one episode (item x generator), vectorised over all episodes with numpy:

1. Difficulty. Each item has a latent ease shared by all generators. Most episodes draw the chance
   ``p`` that one sample is correct from a logit-normal whose (mu, sigma) are solved per (dataset,
   generator) pair so that the expected greedy and pool-oracle accuracy equal the pair's targets
   (token-cap losses included). Trap items, a fixed share of each dataset, have one dominant tempting
   wrong answer and a Beta-distributed ``p`` around 0.3: there a confident majority is wrong.
2. Answers. A sample is correct with chance ``p``; a wrong sample lands on one of the item's few
   attractor wrong answers (shared by all generators) with chance ``share``, otherwise on a wrong
   answer of its own.
3. Length. log output tokens = generator x dataset median + hardness * (1 - p) + a wrong-answer shift
   + episode noise + candidate noise. A sample that reaches the token cap has no extractable answer.
4. Quotas. Sampling noise alone would miss the paper's per-dataset figures by several points (30 AIME
   items), so each pair's numbers of greedy-, majority@k- and oracle-correct episodes are pinned to
   exact quotas: start from a natural draw, then redraw windows of candidates from the same latent
   model, keeping redraws that bring the counts closer to the quotas (``match_quotas``).
5. Costs, latencies, audit fields and verifier scores are drawn given the realised candidates.

Step 1, the latent difficulty fitted to each pair's accuracy targets, is ``pools.simulate.difficulty``
(``build_latent`` returns the per-episode ``Latent`` every later step draws from); steps 2-5 are here, in the
order docs/SIMULATOR.md explains them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, ndtri

from pools.simulate.difficulty import Latent

#: Version tag of the generative model; part of every cache key, so bump it when outputs change.
SIMULATOR_VERSION = "coba-sim/1"

_MIN_OUTPUT_TOKENS = 16


@dataclass
class Layout:
    """Episode layout: episodes are pair-major (dataset, then generator, then item)."""

    datasets: list[str]
    generators: list[str]
    n_items: np.ndarray  # (D,)
    item_offset: np.ndarray  # (D,) first global item index of each dataset
    ep_pair: np.ndarray  # (E,)
    ep_dataset: np.ndarray  # (E,)
    ep_generator: np.ndarray  # (E,)
    ep_item: np.ndarray  # (E,) global item index

    @property
    def n_pairs(self) -> int:
        """Number of (dataset, generator) pairs."""
        return len(self.datasets) * len(self.generators)


def make_layout(datasets: list[str], generators: list[str], n_items: list[int]) -> Layout:
    """Lay out every (item, generator) episode, pair-major."""
    n = np.asarray(n_items, dtype=np.int64)
    offset = np.concatenate([[0], np.cumsum(n)[:-1]])
    g_count = len(generators)
    ep_d = np.repeat(np.arange(len(datasets)), n * g_count)
    ep_g = np.concatenate([np.repeat(np.arange(g_count), k) for k in n])
    ep_local = np.concatenate([np.tile(np.arange(k), g_count) for k in n])
    return Layout(datasets, generators, n, offset, ep_d * g_count + ep_g, ep_d, ep_g, offset[ep_d] + ep_local)


# ---------------------------------------------------------------- quotas


def pair_rates(target_pct: np.ndarray, logit_offsets: np.ndarray) -> np.ndarray:
    """Per-generator rates (D, G) whose mean over generators equals each dataset's target (D,) in percent."""
    r = np.clip(np.asarray(target_pct, dtype=float) / 100.0, 1e-6, 1 - 1e-6)
    base = np.log(r / (1 - r))
    lo, hi = np.full_like(r, -20.0), np.full_like(r, 20.0)
    for _ in range(60):  # bisection on the common shift c
        c = (lo + hi) / 2
        mean = expit(base[:, None] + logit_offsets[None, :] + c[:, None]).mean(1)
        lo, hi = np.where(mean < r, c, lo), np.where(mean < r, hi, c)
    return expit(base[:, None] + logit_offsets[None, :] + ((lo + hi) / 2)[:, None])


def pair_counts(rates: np.ndarray, n_items: np.ndarray) -> np.ndarray:
    """Integer counts (D, G) near ``rates * n`` whose sum over generators is round(mean rate * G * n)."""
    d_count, g_count = rates.shape
    exact = rates * n_items[:, None]
    counts = np.floor(exact).astype(np.int64)
    total = np.round(exact.sum(1)).astype(np.int64)
    for d in range(d_count):  # largest remainder, ties to the earlier generator
        short = int(total[d] - counts[d].sum())
        order = np.argsort(-(exact[d] - counts[d]), kind="stable")
        counts[d, order[:short]] += 1
    return np.minimum(counts, n_items[:, None])


#: Rows per block in the row-wise loops below: bounds their temporaries (a (rows, N, N) comparison is the
#: largest); the results do not depend on it.
_BLOCK_ROWS = 32_768


def row_blocks(n: int) -> list[slice]:
    """Consecutive slices of at most ``_BLOCK_ROWS`` rows covering ``n`` rows."""
    return [slice(lo, min(lo + _BLOCK_ROWS, n)) for lo in range(0, n, _BLOCK_ROWS)]


def draw_candidates(rng: np.random.Generator, lat: Latent, idx: np.ndarray,
                    *, lengths: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """Draw candidates of episodes ``idx``: answer codes (n, N) and log output lengths (n, N; None without
    ``lengths``, though they are still drawn, so that the stream moves on the same).

    Codes: -1 no answer (token cap), 0 correct, 1..K attractor wrong answer, K+1+j own wrong answer of j.
    Each draw covers all rows block after block: the same numbers as one draw of the whole shape, in less memory.
    """
    n, n_cand, k = len(idx), lat.n_candidates, lat.weight_cdf.shape[1]
    blocks = row_blocks(n)
    p = lat.p[idx][:, None]
    correct = np.empty((n, n_cand), bool)
    for b in blocks:
        correct[b] = rng.random((b.stop - b.start, n_cand)) < p[b]
    to_attractor = np.empty((n, n_cand), bool)
    for b in blocks:
        to_attractor[b] = rng.random((b.stop - b.start, n_cand)) < lat.share[idx[b]][:, None]
    codes = np.empty((n, n_cand), np.int32)
    own = k + 1 + np.arange(n_cand)[None, :]
    for b in blocks:
        u = rng.random((b.stop - b.start, n_cand))
        which = np.minimum((u[:, :, None] > lat.weight_cdf[idx[b]][:, None, :]).sum(2), k - 1)
        codes[b] = np.where(correct[b], 0, np.where(to_attractor[b], 1 + which, own))
    del to_attractor
    log_len = np.empty((n, n_cand)) if lengths else None
    for b in blocks:
        ib = idx[b]
        length = (lat.log_median[ib][:, None] + lat.hardness_coef * (1 - p[b]) + lat.wrong_coef * ~correct[b]
                  + lat.length_noise[ib][:, None] + lat.candidate_sigma * rng.standard_normal((len(ib), n_cand)))
        codes[b] = np.where(length >= lat.log_cap, -1, codes[b])
        if log_len is not None:
            log_len[b] = length
    return codes, log_len


def outcomes(codes: np.ndarray, prefixes: list[int]) -> np.ndarray:
    """(n, 2 + len(prefixes)) 0/1: greedy, majority@k for each prefix (earliest cluster wins ties), oracle."""
    out = np.empty((len(codes), 2 + len(prefixes)), np.int64)
    for b in row_blocks(len(codes)):
        out[b] = _outcomes(codes[b], prefixes)
    return out


def _outcomes(codes: np.ndarray, prefixes: list[int]) -> np.ndarray:
    n = len(codes)
    cols = [codes[:, 0] == 0]
    rows = np.arange(n)
    for k in prefixes:
        sub = codes[:, :k]
        count = (sub[:, :, None] == sub[:, None, :]).sum(2)
        count[sub < 0] = 0
        # The first position holding the top count belongs to the tied cluster that appeared first.
        win = count.argmax(1)
        cols.append((sub[rows, win] == 0) & (count[rows, win] > 0))
    cols.append((codes == 0).any(1))
    return np.stack(cols, 1).astype(np.int64)


def expected_outcomes(rng: np.random.Generator, lat: Latent, ep_pair: np.ndarray, n_pairs: int,
                      prefixes: list[int], reps: int = 8) -> np.ndarray:
    """Expected outcome counts (P, S) per pair under the latent model, from ``reps`` pilot draws."""
    idx = np.repeat(np.arange(len(lat.p)), reps)
    codes, _ = draw_candidates(rng, lat, idx, lengths=False)
    out = outcomes(codes, prefixes)
    return np.stack([np.bincount(ep_pair[idx], out[:, s], n_pairs) for s in range(out.shape[1])], 1) / reps


def split_total(total: np.ndarray, weight: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """Split each row's integer ``total`` (D,) over columns in proportion to ``weight`` (D, G), <= ``limit``."""
    counts = np.zeros(weight.shape, np.int64)
    for d in range(len(total)):
        w = np.maximum(weight[d], 1e-9)
        room = limit[d].astype(np.int64)
        left = int(min(total[d], room.sum()))
        while left > 0:  # largest remainder among columns with room, then re-split what overflowed
            open_ = counts[d] < room
            exact = left * np.where(open_, w, 0) / np.where(open_, w, 0).sum()
            add = np.minimum(np.floor(exact).astype(np.int64), room - counts[d])
            short = left - int(add.sum())
            order = np.argsort(-(exact - add) * open_, kind="stable")
            for g in order:
                if short == 0:
                    break
                if counts[d, g] + add[g] < room[g]:
                    add[g] += 1
                    short -= 1
            counts[d] += add
            left = int(min(total[d], room.sum())) - int(counts[d].sum())
    return counts


def match_quotas(rng: np.random.Generator, lat: Latent, ep_pair: np.ndarray, quotas: np.ndarray,
                 prefixes: list[int], *, proposals: int = 4, max_rounds: int = 300) -> tuple[np.ndarray, ...]:
    """Draw every episode, then redraw episodes until each pair's outcome counts equal ``quotas`` (P, S).

    A proposal redraws one window of candidate positions: all of them, everything after the greedy
    candidate, the part after or before a majority prefix (to move majority@16 without touching
    majority@8 and the reverse), or a single random position. Candidates are independent given the
    latent state, so a redrawn window is a Gibbs step and every row stays a draw from the model.
    A proposal is kept when it lowers its pair's total absolute deficit; a pair that stopped improving
    also takes sideways moves (same total, different shape), later one small uphill move per round,
    to leave dead ends. Each pair ends in the best state it reached. Returns codes, log lengths and
    the deficit left (all zero unless ``max_rounds`` ran out).
    """
    n_cand, n_pairs = lat.n_candidates, len(quotas)
    cuts = sorted({k for k in prefixes if 1 < k < n_cand})
    windows = np.array([(0, n_cand), (1, n_cand)] + [(k, n_cand) for k in cuts] + [(1, k) for k in cuts])
    all_idx = np.arange(len(lat.p))
    codes, log_len = draw_candidates(rng, lat, all_idx)
    out = outcomes(codes, prefixes)
    deficit = quotas.astype(np.int64).copy()
    np.subtract.at(deficit, ep_pair, out)
    best = (codes.copy(), log_len.copy(), deficit.copy())
    pos = np.arange(n_cand)[None, :]
    stuck = np.zeros(n_pairs, np.int64)
    for _ in range(max_rounds):
        miss = np.abs(deficit).sum(1)
        if not miss.any():
            break
        idx = np.repeat(all_idx[(miss > 0)[ep_pair]], proposals)
        new_codes, new_len = draw_candidates(rng, lat, idx)
        win = windows[rng.integers(0, len(windows), len(idx))]
        single = rng.random(len(idx)) < 0.5
        at = rng.integers(0, n_cand, len(idx))
        lo = np.where(single, at, win[:, 0])[:, None]
        hi = np.where(single, at + 1, win[:, 1])[:, None]
        keep = (pos < lo) | (pos >= hi)
        for b in row_blocks(len(idx)):  # in place, block by block: no whole-size temporaries
            new_codes[b] = np.where(keep[b], codes[idx[b]], new_codes[b])
            new_len[b] = np.where(keep[b], log_len[idx[b]], new_len[b])
        del keep
        delta = outcomes(new_codes, prefixes) - out[idx]
        d = deficit[ep_pair[idx]]
        change = np.abs(d - delta).sum(1) - np.abs(d).sum(1)
        patience = stuck[ep_pair[idx]]
        allowed = np.where(patience >= 12, 2, np.where(patience >= 3, 0, -1))
        # At most one proposal per episode per round, so each is judged against the episode's current draw.
        useful = np.flatnonzero((change <= allowed) & (delta != 0).any(1))
        useful = useful[np.unique(idx[useful], return_index=True)[1]]
        detour = np.zeros(n_pairs, bool)  # one sideways or uphill move per pair per round
        for j in rng.permutation(useful):
            e = idx[j]
            pair = ep_pair[e]
            after = deficit[pair] - delta[j]
            step = np.abs(after).sum() - np.abs(deficit[pair]).sum()
            if step < 0 or (step <= allowed[j] and not detour[pair]):
                detour[pair] |= step >= 0
                deficit[pair] = after
                out[e] += delta[j]
                codes[e], log_len[e] = new_codes[j], new_len[j]
        now = np.abs(deficit).sum(1)
        better = now < np.abs(best[2]).sum(1)
        if better.any():
            rows = better[ep_pair]
            best[0][rows], best[1][rows], best[2][better] = codes[rows], log_len[rows], deficit[better]
        stuck = np.where(now < miss, 0, stuck + 1)
    return best


def cluster_ids(codes: np.ndarray) -> np.ndarray:
    """Cluster ids (E, N) numbered by first appearance within each row; -1 where the code is -1."""
    out = np.empty(codes.shape, np.int64)
    for b in row_blocks(len(codes)):
        out[b] = _cluster_ids(codes[b])
    return out


def _cluster_ids(codes: np.ndarray) -> np.ndarray:
    n_cand = codes.shape[1]
    first = (codes[:, :, None] == codes[:, None, :]).argmax(2)  # first position with the same code
    opens = (first == np.arange(n_cand)[None, :]) & (codes >= 0)
    rank = np.cumsum(opens, 1) - 1
    cl = np.take_along_axis(rank, first, 1)
    return np.where(codes >= 0, cl, -1)


# ---------------------------------------------------------------- verifier scores


def auroc_separation(auroc: float) -> float:
    """Mean gap d between correct and incorrect latents (unit variance) giving AUROC = Phi(d / sqrt(2))."""
    return float(math.sqrt(2.0) * ndtri(auroc))


def verifier_latents(rng: np.random.Generator, correct: np.ndarray, cluster: np.ndarray,
                     shared: np.ndarray, auroc: float, cluster_corr: float,
                     cross_tier_corr: float, no_answer_shift: float) -> np.ndarray:
    """Latent verifier evidence (E, N): AUROC-calibrated gap + cluster effect (partly shared by tiers) + noise.

    ``shared`` (E, 2N) is the cross-tier cluster effect; a no-answer candidate is its own cluster.
    """
    n_ep, n_cand = correct.shape
    a, b_own = math.sqrt(cross_tier_corr), math.sqrt(1 - cross_tier_corr)
    own = rng.standard_normal((n_ep, 2 * n_cand))
    effect = np.empty((n_ep, n_cand))
    for b in row_blocks(n_ep):  # block by block (the draws above and below stay whole-shape): less memory
        slot = np.where(cluster[b] >= 0, cluster[b], n_cand + np.arange(n_cand)[None, :])
        effect[b] = np.take_along_axis(a * shared[b] + b_own * own[b], slot, 1)
    del own
    noise = rng.standard_normal((n_ep, n_cand))
    d = auroc_separation(auroc)
    x = np.empty((n_ep, n_cand))
    for b in row_blocks(n_ep):
        xb = d * (correct[b] - 0.5) + math.sqrt(cluster_corr) * effect[b] + math.sqrt(1 - cluster_corr) * noise[b]
        x[b] = xb + no_answer_shift * (cluster[b] < 0)
    return x


def lognormal_int(rng: np.random.Generator, median: np.ndarray | float, sigma: float, shape: tuple[int, ...],
                  lo: int = 1) -> np.ndarray:
    """Integer draws from a log-normal with the given median and log-sd, at least ``lo``."""
    x = np.asarray(median, dtype=float) * np.exp(sigma * rng.standard_normal(shape))
    return np.maximum(np.round(x), lo).astype(np.int64)


def latency_s(rng: np.random.Generator, params_b: np.ndarray | float, prompt: np.ndarray, output: np.ndarray,
              latency: dict) -> np.ndarray:
    """Seconds for one call: overhead + prefill and decode time proportional to model size, with noise."""
    base = (latency["overhead_s"] + params_b * (latency["prefill_s_per_token_per_b"] * prompt
                                                + latency["decode_s_per_token_per_b"] * output))
    return np.round(base * np.exp(latency["noise_sigma"] * rng.standard_normal(np.shape(output))), 3)


def output_tokens(log_len: np.ndarray, cap: int) -> np.ndarray:
    """Output token counts from log lengths: the cap where it was reached, else the rounded length."""
    tokens = np.clip(np.round(np.exp(np.minimum(log_len, math.log(cap)))), _MIN_OUTPUT_TOKENS, cap - 1)
    return np.where(log_len >= math.log(cap), cap, tokens).astype(np.int64)
