"""Import RouterArena's cached results (RouteWorks/RouterArena ``cached_results/<model>.jsonl``): the long outcome
table importer (``pools.importers.long_table``) with RouterArena's fields.

One JSON object per question and model: ``global_index`` (``<category>_<n>``, e.g. ``MMLUPro_law_3``) is the
query id and its part before the last ``_`` the category (``items.subject``: 78 categories); ``question`` the
prompt; ``llm_selected`` the model; ``generated_answer`` the response, from which the project's extractor reads
the answer (the file's ``extracted_answer`` is mostly the whole response); ``token_usage.input_tokens`` /
``output_tokens`` the provider's counts (not estimated); ``evaluation_result.score`` the outcome in [0, 1], whose
metric differs by category (0/1 for multiple choice, graded for METEOR): ``correct`` = score >= the threshold
(1.0), the score kept as the graded score (a METEOR score below 0 clipped to 0 and listed:
``--scores-outside``); ``evaluation_result.ground_truth`` the gold as the source writes it
(an option's index for multiple choice); ``evaluation_result.inference_cost`` the call's dollars
(``candidates.cost_usd``; the source computed them from its ``cost.json`` prices, which the shipped price list
holds). The dataset is ``routerarena``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

import numpy as np

from pools.importers.import_format import DATASET, ImportFormat
from pools.importers.long_table import build_long_pool
from pools.importers.outcome_table import CORRECT_THRESHOLD, DEFAULT_CORRECT_THRESHOLD, SCORES_OUTSIDE
from pools.importers.table_mapping import source_list
from pools.store import Pool

__all__ = ["ROUTERARENA_FIELDS", "import_routerarena"]

ROUTERARENA_FIELDS: dict[str, str] = {
    "id": "global_index", "prompt": "question", "model": "llm_selected", "score": "evaluation_result.score",
    "cost": "evaluation_result.inference_cost", "prompt_tokens": "token_usage.input_tokens",
    "output_tokens": "token_usage.output_tokens", "response": "generated_answer",
    "gold": "evaluation_result.ground_truth",
}
_INDEX_NUMBER = re.compile(r"_\d+$")


def categories_of(ids: np.ndarray) -> np.ndarray:
    """``MMLUPro_law_3`` -> ``MMLUPro_law``: a RouterArena id without its trailing number."""
    return np.array([_INDEX_NUMBER.sub("", str(i)) for i in ids] + [None], dtype=object)[:-1]


def import_routerarena(src: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
                       dataset: str = "routerarena", correct_threshold: float = DEFAULT_CORRECT_THRESHOLD,
                       scores_outside: str = "clip") -> Pool:
    """Read RouterArena cached-result files (one per model, or their folder) into a validated Pool."""
    return build_long_pool(source_list(src), dict(ROUTERARENA_FIELDS), named=set(ROUTERARENA_FIELDS),
                           dataset=dataset, correct_threshold=correct_threshold, scores_outside=scores_outside,
                           importer="routerarena", categories=categories_of)


FORMAT = ImportFormat(
    "routerarena", import_routerarena, "RouterArena's cached results, one JSONL file per model (or their folder)",
    options=(DATASET.for_format(), CORRECT_THRESHOLD, SCORES_OUTSIDE.for_format(
        "default clip: the source's METEOR scores go slightly below 0 (one, -0.033, in the shared files)")),
    several_sources=True, folders=True)
