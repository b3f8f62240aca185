"""The item folds a command trains, calibrates or evaluates on: ``--folds``, ``--k``, ``--fold-seed``.

The folds are ``coba_env.splits.item_kfold``'s (the K-fold routing protocol's): K folds over items, shuffled by the
seed and stratified by category where there is one, every generator of an item in one fold. ``coba train
--folds 2,3`` trains on those folds' items only; ``coba calibrate --calibrate-folds 1 --held-out-folds 0`` sets an
operating point on one fold and reports it on another.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np

from coba_cli.arg_types import positive_int, seed_int
from coba_cli.errors import UsageError


def fold_list(text: str) -> list[int]:
    """``"0,1"`` -> [0, 1]: distinct fold numbers >= 0."""
    try:
        folds = [int(p) for p in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected fold numbers separated by commas, got {text!r}") from None
    if not folds or min(folds) < 0 or len(set(folds)) != len(folds):
        raise argparse.ArgumentTypeError(f"expected distinct fold numbers >= 0, got {text!r}")
    return folds


def add_fold_options(parser: argparse.ArgumentParser) -> None:
    """``--k`` and ``--fold-seed`` (the folds' definition)."""
    parser.add_argument("--k", type=positive_int, default=5, metavar="K",
                        help="number of item folds (default: 5; coba_env.splits.item_kfold)")
    parser.add_argument("--fold-seed", type=seed_int, default=0, metavar="S",
                        help="seed that shuffles the items into folds (default: 0)")


def fold_episode_ids(compiled: object, folds: Sequence[int], k: int, seed: int, option: str) -> np.ndarray:
    """The pool episode ids of the items in ``folds`` (of ``k`` folds shuffled by ``seed``); exit 2 naming
    ``option`` for a fold number out of range or a K the pool cannot split into."""
    from coba_env.splits import item_kfold

    bad = [f for f in folds if f >= k]
    if bad:
        raise UsageError(f"{option}: fold {bad[0]} does not exist; with --k {k} the folds are 0..{k - 1}")
    try:
        splits = item_kfold(compiled, k, seed)
    except ValueError as exc:
        raise UsageError(f"--k: {exc}") from None
    return np.concatenate([splits[f].eval_episode_ids for f in folds])
