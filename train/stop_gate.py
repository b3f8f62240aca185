"""The stop gate's training (``agents.stop_gate.StopGate``): harm model, Learn-then-Test threshold, protocol method.

Reads top to bottom:

1. ``stop_rows``: Strong is replayed on a training episode; at every state where Strong would go on and STOP is
   legal, one row: the label-free features, and (evaluator side, training data only) what stopping there
   changes: d_correct = correct(stop now) - correct(Strong to its end), in {-1, 0, 1}, and d_cost. The gate
   follows Strong until it stops, so its outcome at any threshold is read off these rows without replay.
2. ``HarmModel``: logistic regression (scikit-learn) of harm = [d_correct = -1] on the standardized features,
   rows weighted so every training dataset carries equal weight. Deterministic (the seed does not enter).
3. ``ltt_threshold``: Learn-then-Test (Angelopoulos, Bates, Candes, Jordan, Lei 2021, arXiv:2110.01052) with
   fixed-sequence testing: the loss of an episode is 1 if the gate turns Strong's correct answer into a wrong
   one; the thresholds ``THRESHOLDS`` are tested from the most cautious up, each with the exact binomial
   p-value P(Binomial(n, alpha) <= harms); the largest threshold reached while every p-value is <= ``DELTA``
   is chosen, so P(risk > alpha) <= DELTA on the calibration episodes' distribution. The calibration scores
   are cross-fitted by dataset: each training dataset is scored by a model fit on the other training datasets,
   which is the situation of a held-out dataset.
4. ``StopGateMethod``: the protocol's method. Grid: alpha in ``GATE_ALPHAS``; fallback alpha = 0 (threshold
   -infinity: Strong itself). ``fit``: cross-fitted calibration scores, one threshold per alpha, then the final
   model on every training dataset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agents.learned_rollout import StrongFromState, rollout_features
from agents.stop_gate import StopGate, gate_features
from coba_env.compiled import CompiledPool
from coba_env.env import CoBaEnv
from train.rollout import balanced_weights

#: Stated in advance (docs/LEARNING.md, "Protocol"): the loss levels of the grid, the LTT error rate and the
#: thresholds on the predicted harm tested in fixed sequence (most cautious first).
GATE_ALPHAS: tuple[float, ...] = (0.005, 0.01, 0.02)
DELTA = 0.1
THRESHOLDS: np.ndarray = np.geomspace(1e-5, 1.0, 250)
COST_MODEL = "p_tokens"


def make_env(compiled: CompiledPool) -> CoBaEnv:
    """The env Strong runs in (its fusion selection); costs are read raw (budget 1)."""
    return CoBaEnv(compiled, cost_model=COST_MODEL, lam=0.0, budget=1.0, **StrongFromState().env_kwargs())


@dataclass
class StopRows:
    """One episode's rows in trajectory order: features (budget used in raw p_tokens), Strong's action, and
    what stopping there changes (d_correct, d_cost in raw p_tokens)."""

    x: np.ndarray
    strong_action: np.ndarray
    d_correct: np.ndarray
    d_cost: np.ndarray


def _play(env: CoBaEnv, episode: int, prefix: list[int], then_stop: bool) -> tuple[bool, float]:
    """Replay ``prefix`` (then STOP, or Strong to its end): (correct, p_tokens)."""
    strong = StrongFromState()
    obs, info = env.reset(options={"episode": episode})
    strong.reset(env)
    done = False
    for a in prefix:
        obs, _, done, _, info = env.step(a)
    if then_stop and not done:
        obs, _, done, _, info = env.step(env.layout.stop_action)
    while not done:
        obs, _, done, _, info = env.step(strong.act(obs, info["action_mask"], env.evidence))
    return bool(info["correct"]), float(info["costs"][COST_MODEL])


def stop_rows(env: CoBaEnv, episode: int) -> StopRows:
    """Strong's trajectory on ``episode`` and, at each state where it goes on and STOP is legal, a row."""
    strong = StrongFromState()
    obs, info = env.reset(options={"episode": episode})
    strong.reset(env)
    max_tokens = float(env.pool.max_output_tokens)
    prefix: list[int] = []
    xs, acts, states = [], [], []
    done = False
    while not done:
        mask = info["action_mask"]
        a = strong.act(obs, mask, env.evidence)
        if a != env.layout.stop_action and mask[env.layout.stop_action]:
            xs.append(rollout_features(obs, mask, env.evidence, budget=1.0, cost_model=COST_MODEL,
                                       max_output_tokens=max_tokens))
            acts.append(a)
            states.append(list(prefix))
        obs, _, done, _, info = env.step(a)
        prefix.append(a)
    final_correct, final_cost = bool(info["correct"]), float(info["costs"][COST_MODEL])
    dc, dk = [], []
    for p in states:
        correct, cost = _play(env, episode, p, then_stop=True)
        dc.append(float(correct) - float(final_correct))
        dk.append(cost - final_cost)
    width = len(xs[0]) if xs else 0
    return StopRows(np.asarray(xs, dtype=np.float64).reshape(len(xs), width), np.asarray(acts, dtype=np.int64),
                    np.asarray(dc), np.asarray(dk))


class HarmModel:
    """Logistic regression of harm on standardized gate features (dataset-balanced row weights)."""

    def __init__(self, c: float = 1.0) -> None:
        self.c = c
        self.constant: float | None = None

    def fit(self, x: np.ndarray, harm: np.ndarray, weight: np.ndarray) -> HarmModel:
        """Fit; with one class only (no harm, or only harm) the model predicts that class's rate."""
        self.mean = x.mean(axis=0)
        self.scale = np.maximum(x.std(axis=0), 1e-3)
        if len(harm) == 0 or harm.min() == harm.max():
            self.constant = float(harm[0]) if len(harm) else 0.0
            return self
        from sklearn.linear_model import LogisticRegression

        self.clf = LogisticRegression(C=self.c, max_iter=2000).fit((x - self.mean) / self.scale, harm.astype(int),
                                                                   sample_weight=weight)
        return self

    def predict_harm(self, x: np.ndarray) -> np.ndarray:
        """Predicted probability of harm per row."""
        if self.constant is not None:
            return np.full(len(x), self.constant)
        return self.clf.predict_proba((np.asarray(x, dtype=np.float64) - self.mean) / self.scale)[:, 1]


def _padded(arrays: list[np.ndarray], fill: float) -> np.ndarray:
    """[E, L] with each episode's array left-aligned, padded with ``fill``."""
    width = max([len(a) for a in arrays] + [1])
    out = np.full((len(arrays), width), fill, dtype=np.float64)
    for e, a in enumerate(arrays):
        out[e, :len(a)] = a
    return out


def first_stop_outcomes(scores: list[np.ndarray], values: list[np.ndarray], thresholds: np.ndarray) -> np.ndarray:
    """[T, E]: per threshold and episode, ``values`` at the episode's first row whose score is <= the threshold
    (0 where the gate never fires)."""
    running_min = np.minimum.accumulate(_padded(scores, np.inf), axis=1)
    vals = _padded(values, 0.0)
    out = np.zeros((len(thresholds), len(scores)))
    rows = np.arange(len(scores))
    for k, t in enumerate(np.asarray(thresholds, dtype=np.float64)):
        fire = running_min <= t
        out[k] = np.where(fire[:, -1], vals[rows, fire.argmax(axis=1)], 0.0)
    return out


def binomial_p_value(harms: int, n: int, alpha: float) -> float:
    """P(Binomial(n, alpha) <= harms): the LTT p-value of "risk > alpha" for 0/1 losses."""
    from scipy.stats import binom

    return float(binom.cdf(harms, n, alpha))


def ltt_threshold(scores: list[np.ndarray], harms: list[np.ndarray], alpha: float, delta: float = DELTA,
                  thresholds: np.ndarray = THRESHOLDS) -> float:
    """Learn-then-Test, fixed sequence: the largest threshold reached while every p-value is <= ``delta``
    (-infinity when the first is not: the gate never fires)."""
    counts = first_stop_outcomes(scores, [h.astype(float) for h in harms], thresholds).sum(axis=1)
    chosen = -math.inf
    for t, k in zip(thresholds, counts, strict=True):
        if binomial_p_value(int(round(k)), len(scores), alpha) > delta:
            break
        chosen = float(t)
    return chosen


@dataclass
class FittedGate:
    """The final harm model of one fit, its threshold per alpha, and the cost unit."""

    model: HarmModel
    thresholds: dict[float, float]
    budget: float
    max_output_tokens: float
    name: str = "stop_gate"
    #: The action names of the env the gate was fit in (its model's input width follows them).
    actions: tuple[str, ...] = ()

    def policy(self, point: dict[str, float]) -> StopGate:
        """The gate at ``point["alpha"]`` (alpha 0: threshold -infinity, Strong itself)."""
        alpha = float(point["alpha"])
        threshold = -math.inf if alpha == 0 else self.thresholds[alpha]
        return StopGate(self.model, threshold=threshold, budget=self.budget,
                        max_output_tokens=self.max_output_tokens, name=self.name, actions=self.actions)


@dataclass
class StopGateMethod:
    """A stop gate over CoBa-Strong with an LTT-calibrated threshold (settings stated in advance)."""

    name: str = "stop_gate"
    alphas: tuple[float, ...] = GATE_ALPHAS
    delta: float = DELTA
    _rows: dict[int, StopRows] = field(default_factory=dict, repr=False)
    _rows_pool: Any = field(default=None, repr=False)
    #: (action names, index of budget_used in the features) of the env the rows come from.
    _layout: tuple[tuple[str, ...], int] = field(default=((), -1), repr=False)
    #: Fits by (training episode ids, budget): the fit is deterministic (no seed enters), so the seeds' fits
    #: of one fold are the same and computed once.
    _fits: dict = field(default_factory=dict, repr=False)

    def grid(self) -> list[dict[str, float]]:
        """alpha in ``alphas``, then alpha = 0 (Strong itself)."""
        return [{"alpha": a} for a in self.alphas] + [self.fallback()]

    def fallback(self) -> dict[str, float]:
        """alpha = 0: the gate never fires, i.e. CoBa-Strong."""
        return {"alpha": 0.0}

    def rows(self, compiled: CompiledPool, episodes: np.ndarray) -> list[StopRows]:
        """Every episode's rows (pool row indices ``episodes``), cached per episode id (they do not depend on the
        fold)."""
        if self._rows_pool is not compiled:
            self._rows, self._rows_pool, self._fits = {}, compiled, {}
        env = make_env(compiled)
        self._layout = (tuple(env.layout.names), env.features.budget)
        for e in episodes:
            key = int(compiled.episode_ids[e])
            if key not in self._rows:
                self._rows[key] = stop_rows(env, int(e))
        return [self._rows[int(compiled.episode_ids[e])] for e in episodes]

    def _design(self, rows: list[StopRows], budget: float) -> tuple[np.ndarray, np.ndarray]:
        """(features with budget used in units of ``budget``, harm) of ``rows`` stacked (the rows' env layout)."""
        actions, budget_index = self._layout
        parts = [gate_features(r.x, r.strong_action, len(actions)) for r in rows if len(r.d_correct)]
        if not parts:
            return np.zeros((0, 0)), np.zeros(0, dtype=bool)
        x = np.vstack(parts)
        x[:, budget_index] /= budget
        return x, np.concatenate([r.d_correct for r in rows]) < 0

    def _fit_model(self, rows: list[StopRows], datasets: np.ndarray, budget: float) -> HarmModel:
        x, harm = self._design(rows, budget)
        row_ds = np.concatenate([np.full(len(r.d_correct), d, dtype=object) for r, d in zip(rows, datasets,
                                                                                            strict=True)])
        return HarmModel().fit(x, harm, balanced_weights(row_ds) if len(row_ds) else np.ones(0))

    def fit(self, compiled: CompiledPool, train_ids: np.ndarray, *, budget: float, seed: int, out_dir: Path,
            progress: bool) -> FittedGate:
        """Cross-fitted calibration scores by training dataset, an LTT threshold per alpha, the final model."""
        episodes = np.flatnonzero(np.isin(compiled.episode_ids, np.asarray(train_ids)))
        rows = self.rows(compiled, episodes)  # (resets the fit cache too when the pool changes)
        key = (tuple(compiled.episode_ids[episodes].tolist()), float(budget))
        if self._rows_pool is compiled and key in self._fits:
            return self._fits[key]
        datasets = np.asarray(compiled.dataset)[episodes]
        scores: list[np.ndarray] = [np.zeros(0)] * len(rows)
        for d in dict.fromkeys(datasets.tolist()):
            others = np.flatnonzero(datasets != d)
            model = self._fit_model([rows[i] for i in others], datasets[others], budget)
            for i in np.flatnonzero(datasets == d):
                x, _ = self._design([rows[i]], budget)
                scores[i] = model.predict_harm(x) if len(x) else np.zeros(0)
        harms = [r.d_correct < 0 for r in rows]
        thresholds = {a: ltt_threshold(scores, harms, a, self.delta) for a in self.alphas}
        final = self._fit_model(rows, datasets, budget)
        fitted = FittedGate(final, thresholds, budget=budget, max_output_tokens=float(compiled.max_output_tokens),
                            name=self.name, actions=self._layout[0])
        self._fits[key] = fitted
        return fitted
