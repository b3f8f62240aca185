"""The on-disk pool format: table names, columns and their types, tier names.

A pool is a directory holding one Parquet file per table below plus ``manifest.json``.
Keys: items (dataset, item_id); models (name); episodes (episode_id);
candidates (episode_id, candidate); verifications (episode_id, candidate, tier).
"""

from __future__ import annotations

from typing import NamedTuple

FORMAT_VERSION = 1

#: The paper's verifier names in order (V1 cheap judge, V2 process judge, V3 strong verifier). A pool may name
#: any verifiers (the ``tier`` column of its verifications, ``VERIFIER_NAME_PATTERN``); a verifier whose name is
#: not one of these needs a declared role (manifest ``verifier_roles``). V0 (answer frequency) is free and
#: computed, never stored.
TIERS: tuple[str, ...] = ("V1", "V2", "V3")
#: What a verifier name may look like (it becomes part of an action name, ``VERIFY_<name>``, and of a feature
#: name, ``<name>_verified_frac``). A VERIFY's compact code in the episode records is the verifier's name, so a
#: name may not be an action name or code (``S``, ``SAMPLE``, ``STOP``) nor look like a route env's
#: ``SAMPLE_<generator>``. Two names equal up to case are refused too (``pools.validate``): feature names are
#: lower case.
VERIFIER_NAME_PATTERN = r"(?!(?:S|SAMPLE|STOP)$|SAMPLE_)[A-Za-z][A-Za-z0-9_.-]{0,31}"

#: What a stored verifier is; the optional manifest key ``verifier_roles`` maps a tier to one of these.
class VerifierRole(NamedTuple):
    """What a stored verifier can be: its name, its plain name, the paper tier whose fusion weight its scores take,
    and the paper tiers ("needs", V1-V3) it may serve, each with its preference (lower serves first; the rule is
    ``coba_env.rules.roles``)."""

    name: str
    plain: str
    weight_tier: str
    serves: tuple[tuple[str, int], ...]


#: THE verifier roles: a new role is one entry here (docs/CONTRIBUTING.md, "Add a verifier role").
VERIFIER_ROLE_TABLE: tuple[VerifierRole, ...] = (
    VerifierRole("cheap_judge", "cheap judge", "V1", (("V1", 0),)),
    VerifierRole("process_judge", "process judge", "V2", (("V2", 0),)),
    VerifierRole("strong_verifier", "strong verifier", "V3", (("V1", 2), ("V3", 0))),
    VerifierRole("reward_model", "reward model", "V3", (("V1", 1), ("V3", 1))),
)
VERIFIER_ROLES: tuple[str, ...] = tuple(r.name for r in VERIFIER_ROLE_TABLE)
#: The role of a tier's verifier when the manifest does not name one: the paper's tiers (V1 a lightweight
#: outcome judge, V2 a process / step judge, V3 a strong outcome verifier).
PAPER_TIER_ROLES: dict[str, str] = {"V1": "cheap_judge", "V2": "process_judge", "V3": "strong_verifier"}

#: Column -> kind. Kinds: "str", "str?" (nullable), "int", "float", "float?" (NaN allowed), "bool", "bool?".
ITEMS_COLUMNS: dict[str, str] = {
    "dataset": "str",
    "item_id": "str",
    "problem": "str",
    "gold": "str",
    "level": "str?",
    "subject": "str?",
    "task": "str?",
    "metadata": "str?",  # JSON object, e.g. a Reasoning Gym entry's metadata needed by its scorer
}

MODELS_COLUMNS: dict[str, str] = {
    "name": "str",
    "params_b": "float",
    "role": "str",  # "generator", "verifier" or "generator+verifier"
}

EPISODES_COLUMNS: dict[str, str] = {
    "episode_id": "int",
    "dataset": "str",
    "item_id": "str",
    "generator": "str",
}

CANDIDATES_COLUMNS: dict[str, str] = {
    "episode_id": "int",
    "candidate": "int",  # 0..N-1 in sampling order
    "text": "str?",  # may be dropped to save space
    "raw_answer": "str?",  # extracted answer as written; null when none was found
    "answer_key": "str?",  # normalized answer; null when none was found
    "cluster": "int",  # equivalence class within the episode, 0.. in order of first appearance; -1 = no answer
    "correct": "bool?",  # evaluator-side only; null when unknown
    "prompt_tokens": "int",
    "output_tokens": "int",
    "tokens_estimated": "bool",  # True when token counts were estimated, not counted
    "latency_s": "float",
    "finish_reason": "str",  # "stop", "length", ...
    "cap_hit": "bool",  # token cap reached (finish_reason == "length")
    "extraction_status": "str",  # one of pools.grading.extract.STATUSES, or "given" (an importer's own answer)
    "incomplete_boxed": "bool",
    "repetition_score": "float",  # 0 = no repetition, 1 = fully repetitive
}

VERIFICATIONS_COLUMNS: dict[str, str] = {
    "episode_id": "int",
    "candidate": "int",
    "tier": "str",  # the verifier's name (VERIFIER_NAME_PATTERN); the paper's are TIERS
    "model": "str",
    "score": "float?",  # in [0, 1]; NaN = the call was made but gave no usable score
    "prompt_tokens": "int",
    "output_tokens": "int",
    "latency_s": "float",
}

TABLES: dict[str, dict[str, str]] = {
    "items": ITEMS_COLUMNS,
    "models": MODELS_COLUMNS,
    "episodes": EPISODES_COLUMNS,
    "candidates": CANDIDATES_COLUMNS,
    "verifications": VERIFICATIONS_COLUMNS,
}

MANIFEST_KEYS: tuple[str, ...] = (
    "format_version",
    "n_candidates",
    "models",
    "datasets",
    "tiers",
    "generation",
    "provenance",
    "counts",
)
#: Manifest keys a pool may leave out: ``verifier_roles`` (verifier name -> a VERIFIER_ROLES name; default
#: PAPER_TIER_ROLES for a paper name it does not name; required for any other verifier name);
#: ``prices_usd_per_million_tokens`` (model -> {"input", "output"} dollars per million tokens, ``pools.prices``;
#: without it a pool has no ``usd`` cost measure).
OPTIONAL_MANIFEST_KEYS: tuple[str, ...] = ("verifier_roles", "prices_usd_per_million_tokens")
