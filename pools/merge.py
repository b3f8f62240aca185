"""``merge_pools``: pools over the same items, each with its own generators, joined into one pool.

Items are matched by (dataset, item_id), or by their normalized problem text when the ids differ (``match``:
"id", "text", or "auto": by id when any id is shared, else by text). Normalized text: Unicode NFKC, runs of
whitespace as one space, no leading or trailing space; a text that two items of one pool share is ambiguous and
left unmatched. A matched item keeps the first pool's dataset and id; an unmatched one is added as it is. The
result's N is the most of the pools' (its episodes keep their own counts: a pool may hold different numbers of
candidates per episode). The result is ordered like an import: items in order of first appearance, episodes by item then generator (pools
in order), episode ids 0.. in that order; so merging the pools of two files is the pool of both files at once.

Refused, one line each (``PoolError``): a generator in two pools; a verifier name with two roles; a model with
two sizes or two prices; an item matched across pools whose gold answers differ (a null
gold takes the other) or, matched by id, whose problem texts differ.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from pools.errors import PoolError
from pools.prices import PRICES_KEY
from pools.schema import PAPER_TIER_ROLES
from pools.store import Pool
from pools.validate import validate_pool

__all__ = ["MATCH_RULES", "MergeReport", "merge_pools", "normalized_text"]

#: How items are matched across pools.
MATCH_RULES: tuple[str, ...] = ("auto", "id", "text")

_SPACE = re.compile(r"\s+")


def normalized_text(text: str | None) -> str:
    """A problem text as items are matched by it: NFKC, whitespace runs as one space, stripped."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text or "")).strip()


@dataclass
class MergeReport:
    """Per pool after the first: how its items were matched (rule, matched, unmatched on each side, ambiguous)."""

    joins: list[dict[str, Any]] = field(default_factory=list)

    def lines(self) -> list[str]:
        """One line per joined pool, for the command's output."""
        return [f"{j['source']}: {j['matched']} items matched by {j['rule']}; {j['only_here']} only in it, "
                f"{j['only_before']} only in the pools before" + (f", {j['ambiguous']} ambiguous texts left "
                                                                    "unmatched" if j["ambiguous"] else "")
                for j in self.joins]


def _roles(pool: Pool) -> dict[str, str]:
    declared = pool.manifest.get("verifier_roles") or {}
    return {t: declared.get(t, PAPER_TIER_ROLES.get(t, "")) for t in pool.tiers}


def _check_joinable(merged: Pool, pool: Pool, source: str, before: str) -> None:
    """Generators, verifier roles, model sizes and prices, N: refused in one line when they clash."""
    gens = set(merged.episodes["generator"])
    clash = next((g for g in dict.fromkeys(pool.episodes["generator"]) if g in gens), None)
    if clash is not None:
        raise PoolError(f"generator {clash!r} is also a generator of {before}; expected each generator in one pool "
                        "(rename it on import to keep both)", file=source)
    theirs, ours = _roles(pool), _roles(merged)
    for tier, role in theirs.items():
        if tier in ours and ours[tier] != role:
            raise PoolError(f"verifier {tier!r} is a {role} here but a {ours[tier]} in {before}; expected one role per "
                            "verifier name", file=source, field="verifier_roles")
    sizes = dict(zip(merged.models["name"], merged.models["params_b"], strict=True))
    for name, size in zip(pool.models["name"], pool.models["params_b"], strict=True):
        if name in sizes and float(sizes[name]) != float(size):
            raise PoolError(f"model {name!r} has params_b {size:g} here but {sizes[name]:g} in {before}", file=source,
                            table="models")
    prices = merged.manifest.get(PRICES_KEY) or {}
    for name, price in (pool.manifest.get(PRICES_KEY) or {}).items():
        if name in prices and prices[name] != price:
            raise PoolError(f"model {name!r} is priced {price} here but {prices[name]} in {before}", file=source,
                            field=PRICES_KEY)


def _match(base: pd.DataFrame, new: pd.DataFrame, rule: str) -> tuple[dict[tuple, tuple], str, int]:
    """(new item key -> base item key for the matched items, the rule used, ambiguous texts left out)."""
    base_keys = list(zip(base["dataset"], base["item_id"], strict=True))
    new_keys = list(zip(new["dataset"], new["item_id"], strict=True))
    if rule in ("id", "auto"):
        known = set(base_keys)
        by_id = {k: k for k in new_keys if k in known}
        if by_id or rule == "id":
            return by_id, "id", 0
    base_text = pd.Series([normalized_text(t) for t in base["problem"]])
    new_text = pd.Series([normalized_text(t) for t in new["problem"]])
    unique_base = ~base_text.duplicated(keep=False)
    unique_new = ~new_text.duplicated(keep=False)
    lookup = dict(zip(base_text[unique_base], (base_keys[i] for i in np.flatnonzero(unique_base)), strict=True))
    matched = {new_keys[i]: lookup[t] for i, t in enumerate(new_text) if unique_new[i] and t in lookup}
    ambiguous = int((~unique_new).sum() + (~unique_base).sum())
    return matched, "text", ambiguous


def _join_items(items: pd.DataFrame, new: pd.DataFrame, matched: dict[tuple, tuple], rule: str, source: str,
                before: str) -> pd.DataFrame:
    """``items`` with ``new``'s unmatched items appended; a matched item's gold (and, by id, text) must agree."""
    at = {k: i for i, k in enumerate(zip(items["dataset"], items["item_id"], strict=True))}
    gold = items["gold"].tolist()
    for row in new.itertuples(index=False):
        key = (row.dataset, row.item_id)
        if key not in matched:
            continue
        i = at[matched[key]]
        if rule == "id" and normalized_text(row.problem) != normalized_text(items["problem"].iat[i]):
            raise PoolError(f"item (dataset {key[0]!r}, item_id {key[1]!r}) has another problem text than in {before};"
                            " expected the same item (--match text matches items by their text)", file=source,
                            table="items", field="problem")
        if row.gold is not None and gold[i] is not None and row.gold != gold[i]:
            raise PoolError(f"item (dataset {key[0]!r}, item_id {key[1]!r}) has gold {row.gold!r} here but {gold[i]!r} "
                            f"in {before} ({matched[key][1]!r}); expected one gold answer per item", file=source,
                            table="items", field="gold")
        gold[i] = gold[i] if gold[i] is not None else row.gold
    items = items.assign(gold=pd.Series(gold, dtype=object))
    fresh = new[[k not in matched for k in zip(new["dataset"], new["item_id"], strict=True)]]
    return pd.concat([items, fresh], ignore_index=True)


def _ordered(items: pd.DataFrame, episodes: pd.DataFrame, candidates: pd.DataFrame,
             verifications: pd.DataFrame, tiers: list[str]) -> tuple[pd.DataFrame, ...]:
    """Episodes by item then generator, renumbered 0..; candidates and verifications renumbered and sorted."""
    item_order = {k: i for i, k in enumerate(zip(items["dataset"], items["item_id"], strict=True))}
    gen_order = {g: i for i, g in enumerate(dict.fromkeys(episodes["generator"]))}
    rank = [item_order[(d, i)] * len(gen_order) + gen_order[g]
            for d, i, g in zip(episodes["dataset"], episodes["item_id"], episodes["generator"], strict=True)]
    episodes = episodes.assign(_rank=rank).sort_values("_rank", kind="stable").drop(columns="_rank")
    new_id = dict(zip(episodes["episode_id"], range(len(episodes)), strict=True))
    episodes = episodes.assign(episode_id=range(len(episodes))).reset_index(drop=True)
    candidates = candidates.assign(episode_id=candidates["episode_id"].map(new_id)).sort_values(
        ["episode_id", "candidate"], kind="stable").reset_index(drop=True)
    order = {t: k for k, t in enumerate(tiers)}
    verifications = verifications.assign(episode_id=verifications["episode_id"].map(new_id),
                                         _t=verifications["tier"].map(order)).sort_values(
        ["episode_id", "candidate", "_t"], kind="stable").drop(columns="_t").reset_index(drop=True)
    return episodes, candidates, verifications


def merge_pools(pools: Sequence[Pool], *, sources: Sequence[str], match: str = "auto") -> tuple[Pool, MergeReport]:
    """One pool of ``pools`` (at least two), their items matched by ``match`` (module doc), and what matched."""
    if match not in MATCH_RULES:
        raise ValueError(f"unknown match rule {match!r}; expected one of {list(MATCH_RULES)}")
    if len(pools) < 2:
        raise ValueError("merge needs at least two pools")
    merged, report = pools[0], MergeReport()
    items, episodes = merged.items, merged.episodes
    candidates, verifications = merged.candidates, merged.verifications
    for pool, source in zip(pools[1:], sources[1:], strict=True):
        before = ", ".join(sources[:len(report.joins) + 1])
        _check_joinable(merged, pool, source, before)
        matched, rule, ambiguous = _match(items, pool.items, match)
        items = _join_items(items, pool.items, matched, rule, source, before)
        offset = int(episodes["episode_id"].max()) + 1
        remap = [matched.get((d, i), (d, i)) for d, i in zip(pool.episodes["dataset"], pool.episodes["item_id"],
                                                             strict=True)]
        theirs = pool.episodes.assign(episode_id=pool.episodes["episode_id"] + offset,
                                      dataset=[k[0] for k in remap], item_id=[k[1] for k in remap])
        episodes = pd.concat([episodes, theirs], ignore_index=True)
        candidates = pd.concat([candidates, pool.candidates.assign(episode_id=pool.candidates["episode_id"] + offset)],
                               ignore_index=True)
        verifications = pd.concat([verifications, pool.verifications.assign(
            episode_id=pool.verifications["episode_id"] + offset)], ignore_index=True)
        report.joins.append({"source": source, "rule": rule, "matched": len(matched), "ambiguous": ambiguous,
                             "only_here": len(pool.items) - len(matched),
                             "only_before": len(items) - (len(pool.items) - len(matched)) - len(matched)})
        merged = _manifest_joined(merged, pool, items, episodes, candidates, verifications)
    tiers = merged.tiers
    episodes, candidates, verifications = _ordered(items, episodes, candidates, verifications, tiers)
    out = Pool(items=items, models=merged.models, episodes=episodes, candidates=candidates,
               verifications=verifications, manifest=dict(merged.manifest))
    out.refresh_manifest(n_candidates=max(p.n_candidates for p in pools), tiers=tiers, provenance={
        "merged": [{"source": s, "provenance": p.manifest.get("provenance", {})} for p, s in zip(pools, sources,
                                                                                              strict=True)],
        "match": report.joins})
    validate_pool(out, source=sources[0])
    return out, report


def _manifest_joined(merged: Pool, pool: Pool, items: pd.DataFrame, episodes: pd.DataFrame,
                     candidates: pd.DataFrame, verifications: pd.DataFrame) -> Pool:
    """The running merge as a Pool: models joined (roles united), roles, prices and generation settings joined."""
    models = pd.concat([merged.models, pool.models], ignore_index=True)
    roles = models.groupby("name", sort=False)["role"].agg(lambda r: "+".join(
        x for x in ("generator", "verifier") if any(x in v for v in r)))
    models = models.drop_duplicates("name").assign(role=lambda m: m["name"].map(roles)).reset_index(drop=True)
    manifest = dict(merged.manifest)
    for key in ("verifier_roles", PRICES_KEY):
        joined = {**(merged.manifest.get(key) or {}), **(pool.manifest.get(key) or {})}
        if joined:
            manifest[key] = joined
    ours, theirs = merged.manifest.get("generation") or {}, pool.manifest.get("generation") or {}
    if ours != theirs:  # kept per pool; the largest token cap stays the compiled pool's (coba_env.compiled)
        caps = [g["max_output_tokens"] for g in (ours, theirs) if g.get("max_output_tokens")]
        manifest["generation"] = {"per_pool": [ours, theirs], **({"max_output_tokens": max(caps)} if caps else {})}
    tiers = list(dict.fromkeys([*merged.tiers, *pool.tiers]))
    manifest["tiers"] = tiers
    return Pool(items=items, models=models, episodes=episodes, candidates=candidates, verifications=verifications,
                manifest=manifest)
