"""What a prompt-aware router predicts: each option's chance of success from the problem's features, in numpy.

An *option* is (generator, number of samples); a plain router's options are each generator once, a
BEST-Route-style router's also several samples of one generator. A predictor maps problem features X [n, D] to
P [n, O], each option's predicted success. The predictors here only *apply* fitted parameters (numpy, no
scikit-learn or torch at run time); ``train.router_fit`` fits them on training items. Each is stored as a
``kind``, a few JSON fields and named arrays (``state``; ``predictor_from_state`` reads them back, every array
checked), so a checkpoint holds numbers only, never pickled code.

- ``knn``: similarity-weighted k nearest neighbours (cosine over standardized features): the neighbours'
  outcomes weighted by their similarity, shrunk towards the training mean by one pseudo-neighbour.
- ``mf``: matrix factorization in RouteLLM's form: each option's embedding times a projected query embedding,
  ``P[:, o] = sigmoid((X W) . v_o + b_o)``.
- ``logistic``: one logistic regression per option on standardized features.
- ``mlp``: a small multi-label MLP (ReLU hidden layers, one sigmoid output per option).
- ``prior``: the per-category prior: each option's training success rate among training items of the same
  category (the one-hot columns ``group_columns``), shrunk towards the overall rate by ``pseudo_count`` items.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: The predictor kinds.
PREDICTORS: tuple[str, ...] = ("knn", "mf", "logistic", "mlp", "prior")


def sigmoid(z: np.ndarray) -> np.ndarray:
    """The logistic function, without overflow warnings."""
    return 0.5 * (1.0 + np.tanh(0.5 * z))


class Predictor:
    """Predicted success of each option: ``predict(X [n, D]) -> P [n, O]`` in [0, 1]."""

    kind = ""

    def __init__(self, fields: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        self.fields, self.arrays = dict(fields), dict(arrays)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """P [n, O] for features ``x`` [n, D]."""
        raise NotImplementedError

    def state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(JSON fields with ``kind``, named arrays) that ``predictor_from_state`` reads back."""
        return {"kind": self.kind, **self.fields}, dict(self.arrays)

    def _standardized(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x, dtype=np.float64) - self.arrays["mean"]) / self.arrays["scale"]


class KNNPredictor(Predictor):
    """Similarity-weighted kNN; arrays: mean, scale, train_x [m, D] (unit rows), train_y [m, O] (NaN: no outcome),
    prior [O]; fields: k."""

    kind = "knn"

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Each option's similarity-weighted neighbour success rate, shrunk to the training rate."""
        return self.predict_ks(x, [int(self.fields["k"])])[0]

    def predict_ks(self, x: np.ndarray, ks: list[int]) -> list[np.ndarray]:
        """``predict`` at each neighbour count of ``ks`` from one similarity pass: the k nearest are the first k of
        the max(ks) nearest ranked by similarity (inner cross-validation scores a grid of k at one pass's cost)."""
        q = self._standardized(x)
        q /= np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
        train_x, train_y, prior = self.arrays["train_x"], self.arrays["train_y"], self.arrays["prior"]
        counts = [min(int(k), len(train_x)) for k in ks]
        top = max(counts)
        outs = [np.empty((len(q), train_y.shape[1])) for _ in counts]
        for start in range(0, len(q), 1024):  # bounded memory: 1024 queries x m training items at a time
            sim = q[start:start + 1024] @ train_x.T
            near = np.argpartition(-sim, top - 1, axis=1)[:, :top]
            near_sim = np.take_along_axis(sim, near, axis=1)
            order = np.argsort(-near_sim, axis=1, kind="stable")  # most similar first
            near, near_sim = np.take_along_axis(near, order, axis=1), np.take_along_axis(near_sim, order, axis=1)
            for out, k in zip(outs, counts, strict=True):
                w = np.maximum(near_sim[:, :k], 0.0)[:, :, None]
                y = train_y[near[:, :k]]
                seen = ~np.isnan(y)
                num = (w * np.where(seen, y, 0.0)).sum(axis=1) + prior
                den = (w * seen).sum(axis=1) + 1.0
                out[start:start + 1024] = num / den
        return outs


class MFPredictor(Predictor):
    """RouteLLM's matrix factorization; arrays: mean, scale, projection [D, h], option_embedding [O, h], bias [O]."""

    kind = "mf"

    def predict(self, x: np.ndarray) -> np.ndarray:
        """sigmoid(projected query . option embedding + bias)."""
        query = self._standardized(x) @ self.arrays["projection"]
        return sigmoid(query @ self.arrays["option_embedding"].T + self.arrays["bias"])


class LogisticPredictor(Predictor):
    """One logistic regression per option; arrays: mean, scale, coef [O, D], intercept [O]."""

    kind = "logistic"

    def predict(self, x: np.ndarray) -> np.ndarray:
        """sigmoid(standardized x . coef + intercept), per option."""
        return sigmoid(self._standardized(x) @ self.arrays["coef"].T + self.arrays["intercept"])


class MLPPredictor(Predictor):
    """A multi-label MLP; arrays: mean, scale, w0, b0, w1, b1, ... (ReLU between layers, sigmoid out)."""

    kind = "mlp"

    def predict(self, x: np.ndarray) -> np.ndarray:
        """The network's sigmoid outputs."""
        h = self._standardized(x)
        layers = int(self.fields["layers"])
        for i in range(layers):
            h = h @ self.arrays[f"w{i}"] + self.arrays[f"b{i}"]
            if i < layers - 1:
                h = np.maximum(h, 0.0)
        return sigmoid(h)


class PriorPredictor(Predictor):
    """Per-category prior; arrays: group_columns [c] (feature indices), group_keys [g, c], group_rates [g, O],
    prior [O]; unseen categories get the prior."""

    kind = "prior"

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Each row's category's shrunk training rate (the overall rate for a category not seen in training)."""
        columns = self.arrays["group_columns"].astype(np.int64)
        keys = np.asarray(x, dtype=np.float64)[:, columns]
        table = {tuple(k): r for k, r in zip(self.arrays["group_keys"].tolist(), self.arrays["group_rates"],
                                              strict=True)}
        prior = self.arrays["prior"]
        return np.stack([table.get(tuple(k), prior) for k in keys.tolist()]) if len(keys) else \
            np.zeros((0, len(prior)))


_CLASSES = {cls.kind: cls for cls in (KNNPredictor, MFPredictor, LogisticPredictor, MLPPredictor, PriorPredictor)}
#: The arrays each kind needs (``mlp`` also w_i / b_i per layer).
_ARRAYS = {"knn": ("mean", "scale", "train_x", "train_y", "prior"),
           "mf": ("mean", "scale", "projection", "option_embedding", "bias"),
           "logistic": ("mean", "scale", "coef", "intercept"), "mlp": ("mean", "scale"),
           "prior": ("group_columns", "group_keys", "group_rates", "prior")}


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def predictor_from_state(fields: dict[str, Any], arrays: dict[str, np.ndarray], n_features: int, n_options: int,
                         where: str) -> Predictor:
    """The predictor stored as ``fields`` / ``arrays`` for ``n_features`` inputs and ``n_options`` outputs; a
    ValueError naming ``where`` and the field when something does not fit."""
    kind = fields.get("kind")
    if kind not in _CLASSES:
        raise ValueError(f"{where}: field 'predictor.kind' is {str(kind)[:40]!r}; expected one of {list(PREDICTORS)}")
    names = list(_ARRAYS[kind])
    if kind == "knn" and not _positive_int(fields.get("k")):
        raise ValueError(f"{where}: field 'predictor.k' is {fields.get('k')!r}; expected an integer >= 1")
    if kind == "mlp":
        layers = fields.get("layers")
        if not (_positive_int(layers) and layers <= 16):
            raise ValueError(f"{where}: field 'predictor.layers' is {layers!r}; expected an integer from 1 to 16")
        names += [f"{p}{i}" for i in range(layers) for p in ("w", "b")]
    missing = [n for n in names if n not in arrays]
    if missing:
        raise ValueError(f"{where}: missing array(s) {missing} of a {kind} predictor")
    for name in names:
        a = arrays[name]
        finite = np.isfinite(a) | (np.isnan(a) if name == "train_y" else False)
        if a.dtype.kind not in "fi" or not finite.all():
            raise ValueError(f"{where}: array {name!r} holds non-numbers or infinities")
    predictor = _CLASSES[kind]({k: v for k, v in fields.items() if k != "kind"}, {n: arrays[n] for n in names})
    probe = predictor.predict(np.zeros((1, n_features))) if kind != "prior" else None
    if probe is not None and probe.shape != (1, n_options):
        raise ValueError(f"{where}: the {kind} predictor's arrays do not map {n_features} features to {n_options} "
                         "options")
    if kind == "prior" and (arrays["prior"].shape != (n_options,)
                            or arrays["group_columns"].max(initial=-1) >= n_features):
        raise ValueError(f"{where}: the prior predictor's arrays do not fit {n_features} features and {n_options} "
                         "options")
    return predictor


def finite_probabilities(p: np.ndarray) -> bool:
    """Whether every prediction is a probability (finite, in [0, 1])."""
    return bool(np.all(np.isfinite(p)) and p.min(initial=0.0) >= 0.0 and p.max(initial=0.0) <= 1.0 + 1e-12)


__all__ = ["PREDICTORS", "KNNPredictor", "LogisticPredictor", "MFPredictor", "MLPPredictor", "Predictor",
           "PriorPredictor", "finite_probabilities", "predictor_from_state", "sigmoid"]
