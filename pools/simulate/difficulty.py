"""Step 1 of the simulator's generative model (``pools.simulate.model``): each episode's latent difficulty.

Each item has a latent ease shared by all generators. Most episodes draw the chance ``p`` that one sample is
correct from a logit-normal whose (mu, sigma) are solved per (dataset, generator) pair so that the expected
greedy and pool-oracle accuracy equal the pair's targets (token-cap losses included). Trap items, a fixed share
of each dataset, have one dominant tempting wrong answer and a Beta-distributed ``p`` around 0.3: there a
confident majority is wrong. ``build_latent`` returns the per-episode ``Latent`` (p, wrong-answer structure,
length scale) that the candidate draws are conditioned on; docs/SIMULATOR.md gives every parameter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import betaincinv, expit, ndtr, ndtri

if TYPE_CHECKING:
    from pools.simulate.model import Layout


_NU_NODES, _NU_WEIGHTS = hermegauss(5)
_NU_WEIGHTS = _NU_WEIGHTS / _NU_WEIGHTS.sum()
#: Equal-probability normal quantiles for the difficulty integral. Gauss-Hermite nodes are too coarse
#: here: fits like MATH-500's (greedy 86%, oracle 90%) need sigma ~ 10 on the logit scale, where p is
#: nearly a step function of the latent.
_ETA_NODES = ndtri((np.arange(128) + 0.5) / 128)


def _realised_correct(p: np.ndarray, log_median: np.ndarray, log_cap: float, hardness_coef: float,
                      episode_sigma: float, candidate_sigma: float) -> np.ndarray:
    """Chance (P, M, nu-nodes) that one sample is correct and finishes under the token cap."""
    z = (log_cap - log_median[:, None, None] - hardness_coef * (1 - p[:, :, None])
         - episode_sigma * _NU_NODES[None, None, :])
    return p[:, :, None] * ndtr(z / candidate_sigma)


def _correct_rates(p: np.ndarray, log_median: np.ndarray, n_candidates: int, log_cap: float,
                   hardness_coef: float, episode_sigma: float, candidate_sigma: float) -> tuple[np.ndarray, ...]:
    """Expected greedy and oracle accuracy per pair for (P, M) equally likely values of p.

    The episode's length noise is integrated with Gauss-Hermite nodes.
    """
    q = _realised_correct(p, log_median, log_cap, hardness_coef, episode_sigma, candidate_sigma)
    w = _NU_WEIGHTS[None, None, :] / p.shape[1]
    with np.errstate(divide="ignore"):  # q == 1 (a sure item): log1p(-1) = -inf, and 1 - exp(-inf) = 1 as wanted
        miss_all = np.expm1(n_candidates * np.log1p(-q))
    return (q * w).sum((1, 2)), (-miss_all * w).sum((1, 2))


def _root(f, lo: np.ndarray, hi: np.ndarray, iters: int) -> np.ndarray:
    """Vectorised Illinois (regula falsi) root of increasing ``f`` on [lo, hi]; clamps when not bracketed."""
    f_lo, f_hi = f(lo), f(hi)
    below, above = f_hi <= 0, f_lo >= 0
    last = np.zeros(len(lo), np.int8)
    for _ in range(iters):
        x = np.clip(hi - f_hi * (hi - lo) / np.where(f_hi - f_lo == 0, 1, f_hi - f_lo), lo, hi)
        fx = f(x)
        left = fx < 0  # the root lies in (x, hi]
        # Illinois step: when the same end survives twice, halve its value to keep the bracket shrinking.
        f_hi = np.where(left & (last == 1), f_hi / 2, f_hi)
        f_lo = np.where(~left & (last == -1), f_lo / 2, f_lo)
        lo, f_lo = np.where(left, x, lo), np.where(left, fx, f_lo)
        hi, f_hi = np.where(left, hi, x), np.where(left, f_hi, fx)
        last = np.where(left, 1, -1).astype(np.int8)
    x = np.clip(hi - f_hi * (hi - lo) / np.where(f_hi - f_lo == 0, 1, f_hi - f_lo), lo, hi)
    return np.where(below, hi, np.where(above, lo, x))


def fit_latent(r_greedy: np.ndarray, r_oracle: np.ndarray, log_median: np.ndarray, n_candidates: int,
               log_cap: float, hardness_coef: float, episode_sigma: float,
               candidate_sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """Solve (mu, sigma) per pair so that expected greedy and oracle accuracy hit the given rates.

    For a given sigma, greedy accuracy rises with mu; at matched greedy accuracy, oracle accuracy falls
    as sigma grows (more of the mass sits at hopeless and at trivial items). Both are solved as nested
    monotone roots; unreachable targets clamp to the nearest reachable value.
    """
    r_g = np.clip(r_greedy, 1e-4, 1 - 1e-4)
    r_o = np.clip(r_oracle, r_g + 1e-6, 1 - 1e-7)
    rest = (log_cap, hardness_coef, episode_sigma, candidate_sigma)

    def rates(mu: np.ndarray, sigma: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = expit(mu[:, None] + sigma[:, None] * _ETA_NODES[None, :])
        return _correct_rates(p, log_median[rows], n_candidates, *rest)

    def greedy(mu: np.ndarray, sigma: np.ndarray, rows: np.ndarray) -> np.ndarray:
        p = expit(mu[:, None] + sigma[:, None] * _ETA_NODES[None, :])
        q = _realised_correct(p, log_median[rows], *rest)
        return (q * _NU_WEIGHTS[None, None, :]).sum((1, 2)) / p.shape[1]

    def mu_for(sigma: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return _root(lambda mu: greedy(mu, sigma, rows) - r_g[rows],
                     np.full(len(rows), -40.0), np.full(len(rows), 40.0), 14)

    rows = np.arange(len(r_g))

    def oracle_gap(log_sigma: np.ndarray) -> np.ndarray:
        sigma = np.exp(log_sigma)
        return r_o - rates(mu_for(sigma, rows), sigma, rows)[1]

    log_sigma = _root(oracle_gap, np.full(len(r_g), math.log(0.02)), np.full(len(r_g), math.log(30.0)), 12)
    sigma = np.exp(log_sigma)
    return mu_for(sigma, rows), sigma


def stratified_uniform(rng: np.random.Generator, group: np.ndarray, order_by: np.ndarray | None = None) -> np.ndarray:
    """One uniform per element, stratified within each group: the k-th smallest lies in [k/n, (k+1)/n).

    With ``order_by`` the strata follow its ranking (keeping, e.g., the correlation it carries);
    otherwise they are assigned at random. Used to remove latent sampling noise from small datasets.
    """
    key = rng.random(len(group)) if order_by is None else order_by
    order = np.lexsort((key, group))
    sizes = np.bincount(group)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rank = np.empty(len(group), np.int64)
    rank[order] = np.arange(len(group)) - starts[group[order]]
    return (rank + rng.random(len(group))) / sizes[group]


@dataclass
class Latent:
    """Per-episode latent state that candidate draws are conditioned on."""

    p: np.ndarray  # (E,) chance one sample is correct
    share: np.ndarray  # (E,) chance a wrong sample lands on an attractor
    weight_cdf: np.ndarray  # (E, K) cumulative attractor weights (the item's, shared by generators)
    log_median: np.ndarray  # (E,) log median output tokens of the pair
    length_noise: np.ndarray  # (E,) episode-level log-length offset
    hardness_coef: float
    wrong_coef: float
    candidate_sigma: float
    log_cap: float
    n_candidates: int


def build_latent(rng: np.random.Generator, pr: dict, lay: Layout, ease: np.ndarray, trap: np.ndarray,
                 attractor_weights: np.ndarray, pair_rate: np.ndarray) -> Latent:
    """Per-episode latent state: p, wrong-answer structure and length scale, fitted to the pair rates.

    ``pair_rate`` (P, S) holds each pair's greedy (first column) and oracle (last column) rate. Trap
    items (a dominant tempting wrong answer) draw p from a Beta; the other episodes' logit-normal is
    solved so that the mixture hits the pair's greedy and oracle rates.
    """
    ln, wa, tr = pr["lengths"], pr["wrong_answers"], pr["traps"]
    n_cand, log_cap = pr["n_candidates"], math.log(pr["max_output_tokens"])
    ds = list(pr["datasets"].values())
    median = np.array([[pr["generators"][g]["output_tokens_median"] * d["length_multiplier"]
                        for g in lay.generators] for d in ds]).reshape(-1)
    length = (math.log(pr["max_output_tokens"]), ln["hardness_coef"], ln["episode_sigma"], ln["candidate_sigma"])
    a_t = tr["correct_mean"] * tr["correct_concentration"]
    b_t = (1 - tr["correct_mean"]) * tr["correct_concentration"]
    p_grid = betaincinv(a_t, b_t, (np.arange(256) + 0.5) / 256)
    g_trap, o_trap = _correct_rates(np.tile(p_grid, (lay.n_pairs, 1)), np.log(median), n_cand, *length)
    ep_trap = trap[lay.ep_item]
    frac = np.bincount(lay.ep_pair, ep_trap, lay.n_pairs) / np.bincount(lay.ep_pair, minlength=lay.n_pairs)
    rest = np.maximum(1 - frac, 1e-9)
    g_main = (pair_rate[:, 0] - frac * g_trap) / rest
    o_main = (pair_rate[:, -1] - frac * o_trap) / rest
    mu, sigma = fit_latent(g_main, o_main, np.log(median), n_cand, *length)

    # Stratified within each pair (and trap class): the pair's latent spread is the fitted one, not a
    # noisy sample of it. The order of the stratified draws follows item ease, shared by generators.
    rho = pr["difficulty"]["item_correlation"]
    mixed = rho * ease[lay.ep_item] + math.sqrt(1 - rho**2) * rng.standard_normal(len(lay.ep_pair))
    u = stratified_uniform(rng, 2 * lay.ep_pair + ep_trap, mixed)
    p = np.where(ep_trap, betaincinv(a_t, b_t, u), expit(mu[lay.ep_pair] + sigma[lay.ep_pair] * ndtri(u)))
    base = np.clip(np.array([d["wrong_attractor_share"] for d in ds])[lay.ep_dataset], 1e-3, 1 - 1e-3)
    kappa = wa["share_concentration"]
    share = betaincinv(base * kappa, (1 - base) * kappa, stratified_uniform(rng, lay.ep_pair))
    return Latent(
        p=p,
        share=np.where(ep_trap, tr["attractor_share"], share),
        weight_cdf=np.cumsum(attractor_weights, 1)[lay.ep_item],
        log_median=np.log(median)[lay.ep_pair],
        length_noise=ln["episode_sigma"] * ndtri(stratified_uniform(rng, lay.ep_pair)),
        hardness_coef=ln["hardness_coef"], wrong_coef=ln["wrong_coef"], candidate_sigma=ln["candidate_sigma"],
        log_cap=log_cap, n_candidates=n_cand,
    )
