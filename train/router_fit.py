"""Fitting the routers' predictors on training items, every setting chosen inside the training items.

``fit_router_predictor(kind, X, Y, seed)`` reads top to bottom: the kind's grid of settings (``GRIDS``, stated
in advance in docs/ROUTING.md), inner K-fold cross-validation over the training items (``INNER_FOLDS``, seeded)
scoring each setting by the Brier score of its out-of-fold predictions (``inner_brier``), the setting with the
lowest score (ties: the earlier one), and the final fit on every training item. ``Y`` [n, O] holds each option's
outcome on each training item (1 correct, 0 not, NaN when the item has no candidates of the option's generator:
left out of that option's loss). The fitted predictors are the numpy ones of ``agents.router_predictors``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agents.router_predictors import (
    KNNPredictor,
    LogisticPredictor,
    MFPredictor,
    MLPPredictor,
    Predictor,
    PriorPredictor,
)

#: Each predictor kind's settings, in the order ties are broken (docs/ROUTING.md, "Protocol").
GRIDS: dict[str, list[dict[str, Any]]] = {
    "knn": [{"k": k} for k in (5, 10, 20, 50, 100)],
    "mf": [{"dim": d, "weight_decay": w} for d in (8, 32) for w in (1e-4, 1e-2)],
    "logistic": [{"C": c} for c in (0.01, 0.1, 1.0, 10.0)],
    "mlp": [{"hidden": 64, "weight_decay": w} for w in (1e-4, 1e-2, 1e-1)],
    "prior": [{"pseudo_count": 5.0}],
}
#: Inner cross-validation folds over the training items.
INNER_FOLDS = 5
#: Full-batch Adam epochs and learning rate of the torch predictors (mf, mlp).
EPOCHS, LEARNING_RATE = 300, 0.01


def _scaling(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    return mean, np.where(scale > 0, scale, 1.0)


def _rates(y: np.ndarray) -> np.ndarray:
    """Each option's training success rate (0.5 for an option with no outcome at all)."""
    seen = ~np.isnan(y)
    return np.where(seen.any(axis=0), np.nansum(y, axis=0) / np.maximum(seen.sum(axis=0), 1), 0.5)


def fit_knn(x: np.ndarray, y: np.ndarray, setting: dict[str, Any], seed: int) -> Predictor:
    """Store the standardized, unit-length training rows and outcomes."""
    mean, scale = _scaling(x)
    z = (x - mean) / scale
    z /= np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)
    return KNNPredictor({"k": int(setting["k"])}, {"mean": mean, "scale": scale, "train_x": z, "train_y": y,
                                                   "prior": _rates(y)})


def fit_logistic(x: np.ndarray, y: np.ndarray, setting: dict[str, Any], seed: int) -> Predictor:
    """One L2-regularized logistic regression per option (scikit-learn, lbfgs) on its items with an outcome."""
    from sklearn.linear_model import LogisticRegression

    mean, scale = _scaling(x)
    z = (x - mean) / scale
    coef = np.zeros((y.shape[1], x.shape[1]))
    intercept = np.zeros(y.shape[1])
    for o in range(y.shape[1]):
        seen = ~np.isnan(y[:, o])
        labels = y[seen, o]
        if len(np.unique(labels)) < 2:  # one class only: a constant at its (clipped) rate
            rate = float(np.clip(labels.mean() if len(labels) else 0.5, 0.01, 0.99))
            intercept[o] = np.log(rate / (1 - rate))
            continue
        model = LogisticRegression(C=float(setting["C"]), max_iter=1000).fit(z[seen], labels.astype(int))
        coef[o], intercept[o] = model.coef_[0], model.intercept_[0]
    return LogisticPredictor({}, {"mean": mean, "scale": scale, "coef": coef, "intercept": intercept})


def _torch_fit(x: np.ndarray, y: np.ndarray, build: Any, weight_decay: float, seed: int) -> Any:
    """Full-batch Adam on the masked binary cross-entropy of ``build()``'s logits; returns the trained module."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # these nets are tiny: one thread is ~15x faster than two on a shared 2-core machine
    try:
        return _adam(x, y, build, weight_decay, seed)
    finally:
        torch.set_num_threads(threads)


def _adam(x: np.ndarray, y: np.ndarray, build: Any, weight_decay: float, seed: int) -> Any:
    import torch

    torch.manual_seed(seed)
    model = build()
    xt = torch.as_tensor(x, dtype=torch.float32)
    seen = torch.as_tensor(~np.isnan(y))
    yt = torch.as_tensor(np.nan_to_num(y), dtype=torch.float32)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE, weight_decay=weight_decay)
    loss_fn = torch.nn.BCEWithLogitsLoss(reduction="none")
    for _ in range(EPOCHS):
        optimizer.zero_grad()
        loss = (loss_fn(model(xt), yt) * seen).sum() / seen.sum().clamp(min=1)
        loss.backward()
        optimizer.step()
    return model


def fit_mf(x: np.ndarray, y: np.ndarray, setting: dict[str, Any], seed: int) -> Predictor:
    """RouteLLM's matrix factorization: a linear query projection [D, h] and one embedding [h] per option."""
    import torch

    mean, scale = _scaling(x)
    z = (x - mean) / scale
    dim, options = int(setting["dim"]), y.shape[1]

    class MF(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.projection = torch.nn.Linear(z.shape[1], dim, bias=False)
            self.options = torch.nn.Embedding(options, dim)
            self.bias = torch.nn.Parameter(torch.zeros(options))

        def forward(self, q: Any) -> Any:
            return self.projection(q) @ self.options.weight.T + self.bias

    model = _torch_fit(z, y, MF, float(setting["weight_decay"]), seed)
    return MFPredictor({}, {"mean": mean, "scale": scale,
                            "projection": model.projection.weight.detach().numpy().T.astype(np.float64),
                            "option_embedding": model.options.weight.detach().numpy().astype(np.float64),
                            "bias": model.bias.detach().numpy().astype(np.float64)})


def fit_mlp(x: np.ndarray, y: np.ndarray, setting: dict[str, Any], seed: int) -> Predictor:
    """A one-hidden-layer ReLU MLP with one sigmoid output per option."""
    import torch

    mean, scale = _scaling(x)
    z = (x - mean) / scale
    hidden = int(setting["hidden"])

    def build() -> Any:
        return torch.nn.Sequential(torch.nn.Linear(z.shape[1], hidden), torch.nn.ReLU(),
                                   torch.nn.Linear(hidden, y.shape[1]))

    model = _torch_fit(z, y, build, float(setting["weight_decay"]), seed)
    arrays = {"mean": mean, "scale": scale}
    for i, layer in enumerate(m for m in model if isinstance(m, torch.nn.Linear)):
        arrays[f"w{i}"] = layer.weight.detach().numpy().T.astype(np.float64)
        arrays[f"b{i}"] = layer.bias.detach().numpy().astype(np.float64)
    return MLPPredictor({"layers": 2}, arrays)


def fit_prior(x: np.ndarray, y: np.ndarray, setting: dict[str, Any], seed: int,
              group_columns: np.ndarray | None = None) -> Predictor:
    """Each training category's option success rates, shrunk to the overall rate by ``pseudo_count`` items."""
    columns = np.arange(0) if group_columns is None else np.asarray(group_columns, dtype=np.int64)
    prior, a = _rates(y), float(setting["pseudo_count"])
    keys = x[:, columns]
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    seen = ~np.isnan(y)
    rates = np.empty((len(unique), y.shape[1]))
    for g in range(len(unique)):
        rows = inverse == g
        total = np.nansum(y[rows], axis=0)
        count = seen[rows].sum(axis=0)
        rates[g] = (total + a * prior) / (count + a)
    return PriorPredictor({"pseudo_count": a}, {"group_columns": columns, "group_keys": unique.astype(np.float64),
                                                "group_rates": rates, "prior": prior})


FITTERS = {"knn": fit_knn, "mf": fit_mf, "logistic": fit_logistic, "mlp": fit_mlp, "prior": fit_prior}


def _inner_folds(x: np.ndarray, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    from sklearn.model_selection import KFold

    return list(KFold(n_splits=min(INNER_FOLDS, len(x)), shuffle=True, random_state=seed).split(x))


def _brier_sum(p: np.ndarray, y: np.ndarray) -> tuple[float, int]:
    seen = ~np.isnan(y)
    return float(((p - np.nan_to_num(y)) ** 2)[seen].sum()), int(seen.sum())


def inner_brier(kind: str, setting: dict[str, Any], x: np.ndarray, y: np.ndarray, seed: int,
                **extra: Any) -> float:
    """The Brier score of ``setting``'s out-of-fold predictions over ``INNER_FOLDS`` folds of the items."""
    errors, count = 0.0, 0
    for train, held in _inner_folds(x, seed):
        e, c = _brier_sum(FITTERS[kind](x[train], y[train], setting, seed, **extra).predict(x[held]), y[held])
        errors, count = errors + e, count + c
    return errors / max(count, 1)


def knn_inner_briers(grid: list[dict[str, Any]], x: np.ndarray, y: np.ndarray, seed: int) -> list[float]:
    """``inner_brier`` of every kNN setting of ``grid`` on the same inner folds, each fold's neighbours ranked
    once for all k (the stored rows do not depend on k): one similarity pass per fold instead of one per k."""
    ks = [int(s["k"]) for s in grid]
    errors, count = np.zeros(len(ks)), np.zeros(len(ks))
    for train, held in _inner_folds(x, seed):
        knn = fit_knn(x[train], y[train], grid[0], seed)
        for i, p in enumerate(knn.predict_ks(x[held], ks)):  # type: ignore[attr-defined]
            e, c = _brier_sum(p, y[held])
            errors[i], count[i] = errors[i] + e, count[i] + c
    return [float(e / max(c, 1)) for e, c in zip(errors, count, strict=True)]


def fit_router_predictor(kind: str, x: np.ndarray, y: np.ndarray, seed: int,
                         **extra: Any) -> tuple[Predictor, dict[str, Any], list[float]]:
    """(predictor fitted on every training item with the chosen setting, the setting, each setting's inner
    Brier score in grid order); a one-setting grid skips the inner cross-validation."""
    if kind not in GRIDS:
        raise ValueError(f"unknown predictor {kind!r}; expected one of {list(GRIDS)}")
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) < 2:
        raise ValueError(f"a router needs at least 2 training items, got {len(x)}")
    grid = GRIDS[kind]
    if len(grid) < 2:
        scores = [float("nan")]
    elif kind == "knn":
        scores = knn_inner_briers(grid, x, y, seed)
    else:
        scores = [inner_brier(kind, s, x, y, seed, **extra) for s in grid]
    pick = int(np.argmin(scores)) if len(grid) > 1 else 0
    return FITTERS[kind](x, y, grid[pick], seed, **extra), dict(grid[pick]), scores
