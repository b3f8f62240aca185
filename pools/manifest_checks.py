"""The manifest's own checks (``pools.validate`` runs them first): keys, format version, N, and the types of the
blocks other commands read (``generation``, ``provenance``, ``tiers``, ``models``, ``verifier_roles``, prices), so
that whatever ``coba pools validate`` accepts every command can load.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pools.limits import MAX_CANDIDATES, MAX_TOKENS
from pools.prices import PRICES_KEY, check_prices
from pools.schema import FORMAT_VERSION, MANIFEST_KEYS, VERIFIER_NAME_PATTERN, VERIFIER_ROLES

#: ``fail(field, message)``: raise the validation error for the manifest's ``field``.
Fail = Callable[[str, str], None]


def check_manifest_basics(m: Any, fail: Fail, model_names: Any) -> int:
    """Check the manifest's keys, format version, N and the optional blocks' types (calls ``fail(field, message)``,
    which raises, at the first problem); returns N."""
    if not isinstance(m, dict):
        fail("manifest", "expected a JSON object")
    for key in MANIFEST_KEYS:
        if key not in m:
            fail(key, f"missing key; expected keys {list(MANIFEST_KEYS)}")
    if m["format_version"] != FORMAT_VERSION:
        fail("format_version", f"is {m['format_version']!r}; expected {FORMAT_VERSION}")
    n = m["n_candidates"]
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= MAX_CANDIDATES:
        fail("n_candidates", f"is {n!r}; expected a non-negative integer, at most {MAX_CANDIDATES}")
    _check_manifest_types(m, fail)
    _check_verifier_roles(fail, m.get("verifier_roles"))
    if PRICES_KEY in m:
        problem = check_prices(m[PRICES_KEY], model_names)
        if problem:
            fail(PRICES_KEY, problem)
    return n


def _check_manifest_types(m: dict[str, Any], fail: Fail) -> None:
    """The manifest's blocks read by other commands have their types: ``generation`` and ``provenance`` objects,
    ``generation.max_output_tokens`` (the mean_length normalizer) a number of tokens, ``tiers`` a list of names."""
    for key in ("generation", "provenance", "datasets"):
        if not isinstance(m[key], dict):
            shown = repr(m[key]) if not isinstance(m[key], list | dict) else str(m[key])
            fail(key, f"is {shown[:80]}; expected an object")
    cap = m["generation"].get("max_output_tokens")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int | float) or not 1 <= cap <= MAX_TOKENS):
        fail("generation", f"max_output_tokens is {cap!r}; expected a number of tokens from 1 to {MAX_TOKENS:g}")
    estimated = m["provenance"].get("estimated")
    if estimated is not None and not isinstance(estimated, dict):
        fail("provenance", f"estimated is {str(estimated)[:80]}; expected an object of field -> count")
    _check_grader_agreement(m["provenance"].get("grader_agreement"), fail)
    if not isinstance(m["tiers"], list) or not all(isinstance(t, str) for t in m["tiers"]):
        fail("tiers", f"is {str(m['tiers'])[:80]}; expected a list of verifier names")
    if not isinstance(m["models"], list):
        fail("models", f"is {str(m['models'])[:80]}; expected a list of models")


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_grader_agreement(agreement: Any, fail: Fail) -> None:
    """``provenance.grader_agreement`` (inspect and the report read it): an object whose ``rate`` is a number in
    [0, 1] or null and whose ``groups`` are objects of dataset, generator and the counts ``agree`` <= ``compared``."""
    if agreement is None:
        return
    if not isinstance(agreement, dict):
        fail("provenance", f"grader_agreement is {str(agreement)[:80]}; expected an object (rate, groups, ...)")
    rate = agreement.get("rate")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1):
        fail("provenance", f"grader_agreement.rate is {str(rate)[:40]}; expected a number in [0, 1] or null")
    groups = agreement.get("groups", [])
    if not isinstance(groups, list):
        fail("provenance", f"grader_agreement.groups is {str(groups)[:80]}; expected a list of objects")
    for k, g in enumerate(groups):
        ok = (isinstance(g, dict) and isinstance(g.get("dataset"), str) and isinstance(g.get("generator"), str)
              and _count(g.get("agree")) and _count(g.get("compared")) and g["agree"] <= g["compared"])
        if not ok:
            fail("provenance", f"grader_agreement.groups[{k}] is {str(g)[:80]}; expected an object of dataset, "
                               "generator and the counts agree <= compared")


def _check_verifier_roles(fail: Fail, roles: object) -> None:
    """The optional ``verifier_roles``: an object mapping tiers to known role names."""
    if roles is None:
        return
    if not isinstance(roles, dict):
        fail("verifier_roles", f"is {roles!r}; expected an object of tier -> role, e.g. " + '{"V3": "reward_model"}')
    for tier, role in roles.items():
        if not re.fullmatch(VERIFIER_NAME_PATTERN, str(tier)):
            fail("verifier_roles", f"names verifier {tier!r}; expected a verifier name matching {VERIFIER_NAME_PATTERN}")
        if role not in VERIFIER_ROLES:
            fail("verifier_roles", f"gives tier {tier} the role {role!r}; expected one of {list(VERIFIER_ROLES)}")
