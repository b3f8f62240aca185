"""The compiled pool's cost table filled from a table of model calls (candidates or verifications), a slice of
calls at a time: every fill rule of ``coba_env.costs.COST_TABLE`` is per call, so the slices give the table the
whole fill gives without a [calls, K] temporary per table."""

from __future__ import annotations

import numpy as np
import pandas as pd

from coba_env.costs import Calls, fill_costs

#: Calls filled at a time (~50 MB of temporaries per slice).
FILL_CHUNK = 1 << 20

def fill_calls(target: np.ndarray, at: tuple[np.ndarray, ...], rows: pd.DataFrame, params_b: np.ndarray,
               models: np.ndarray, prices: dict, recorded: np.ndarray | None = None, chunk: int = FILL_CHUNK) -> None:
    """``target[at]`` = the cost rows of ``rows``' calls, ``chunk`` calls at a time (37M at once: ~3 GB of temporaries)."""
    for a in range(0, len(rows), chunk):
        part, cut = np.empty((min(a + chunk, len(rows)) - a, target.shape[-1])), slice(a, a + chunk)
        fill_costs(calls_of(rows.iloc[cut], params_b[cut], models[cut], prices,
                           recorded_usd=None if recorded is None else recorded[cut]), part)
        target[tuple(i[cut] for i in at)] = part


def calls_of(rows: pd.DataFrame, params_b: np.ndarray, models: np.ndarray, prices: dict,
             recorded_usd: np.ndarray | None = None) -> Calls:
    """The model calls of ``rows`` (candidates or verifications) as the cost table's fill rules read them."""
    return Calls(prompt_tokens=rows["prompt_tokens"].to_numpy(dtype=np.float64),
                 output_tokens=rows["output_tokens"].to_numpy(dtype=np.float64), params_b=params_b,
                 latency_s=rows["latency_s"].to_numpy(dtype=np.float64), models=models, prices=prices,
                 recorded_usd=recorded_usd)
