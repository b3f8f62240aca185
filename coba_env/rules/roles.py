"""Verifier roles: which of a pool's verifiers serves each role a policy asks for (THE mapping rule).

A pool names its verifiers (``coba_env.compiled.verifier_axis``: the compiled pool's tier axis, one slot per
verifier, the env's VERIFY actions). Each verifier has a declared role (``pools.schema.VERIFIER_ROLES``, from
the manifest's ``verifier_roles``; a paper name the manifest does not name has its paper tier's role: V1
cheap judge, V2 process judge, V3 strong verifier). Policies ask for *needs*, named by the paper's tiers:

| need | paper role | served by (first present wins; ties to the lower slot) |
|------|------------|--------------------------------------------------------|
| V1   | cheap outcome judge (s1) | cheap_judge, else reward_model, else strong_verifier |
| V2   | process / step judge (s2) | process_judge only |
| V3   | strong verifier (s3) | strong_verifier, else reward_model |

Why: a stronger outcome verifier can stand in for the cheap judge (it scores a whole solution, only at a
higher cost, which the cost model charges); a weaker one never stands in for a stronger role, so a pool whose
only verifier is a cheap judge has no strong verifier (CoBa routes nothing; the outcome evaluators are not
applicable). An outcome verifier is not a step judge, so nothing stands in for V2 (every policy treats V2 as
optional). When one verifier serves both V1 and V3, a route to V3 re-asks a verifier that has already
scored the candidate, so the env's mask never offers it: the routes cost nothing and add nothing.

A score enters the fusion rank (paper Eq. 3) with the weight of its verifier's own role (a reward model
takes the strong verifier's weight); selection rules that name a tier (``max_score``, ``weighted_vote``)
read the slot that serves that need. On a pool with the paper's verifiers every map is the identity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from coba_env.rules.selection import SelectionRule
from pools.schema import PAPER_TIER_ROLES, VERIFIER_ROLE_TABLE, VERIFIER_ROLES
from pools.schema import TIERS as NEEDS

if TYPE_CHECKING:  # annotations only: the compiled pool imports this module
    from coba_env.compiled import CompiledPool

#: Roles that may serve each need (a paper tier), in order of preference (``pools.schema.VERIFIER_ROLE_TABLE``).
SERVED_BY: dict[str, tuple[str, ...]] = {
    need: tuple(r.name for _, r in sorted((dict(r.serves)[need], r) for r in VERIFIER_ROLE_TABLE
                                          if need in dict(r.serves)))
    for need in NEEDS}
#: The paper tier whose fusion weight a role's scores take.
WEIGHT_TIER: dict[str, str] = {r.name: r.weight_tier for r in VERIFIER_ROLE_TABLE}
#: Plain names of the roles, and of the needs (the plain name of each paper tier's own role; report and reasons).
ROLE_NAMES: dict[str, str] = {r.name: r.plain for r in VERIFIER_ROLE_TABLE}
NEED_NAMES: dict[str, str] = {need: ROLE_NAMES[PAPER_TIER_ROLES[need]] for need in NEEDS}


def declared_roles(manifest_roles: dict[str, str] | None, names: Sequence[str] = NEEDS) -> tuple[str, ...]:
    """The role of each verifier in ``names``: the manifest's ``verifier_roles`` entry, else the paper tier's role."""
    given = dict(manifest_roles or {})
    unknown = sorted(set(given.values()) - set(VERIFIER_ROLES))
    if unknown:
        raise ValueError(f"unknown verifier role(s) {unknown}; expected some of {list(VERIFIER_ROLES)}")
    missing = [t for t in names if t not in given and t not in PAPER_TIER_ROLES]
    if missing:
        raise ValueError(f"verifier(s) {missing} have no role; expected them in verifier_roles")
    return tuple(given.get(t, PAPER_TIER_ROLES.get(t, "")) for t in names)


@dataclass(frozen=True)
class RoleMap:
    """Which verifier slot serves each need (None: nobody), given each slot's name, declared role, model, presence."""

    roles: tuple[str, ...]
    models: tuple[str, ...]
    present: tuple[bool, ...]
    serving: tuple[int | None, ...]
    names: tuple[str, ...] = NEEDS

    def slot(self, need: str) -> int | None:
        """The slot (tier index) of the verifier serving ``need`` (a paper tier name), or None."""
        return self.serving[NEEDS.index(need)]

    @property
    def is_identity(self) -> bool:
        """Whether the slots are the paper's V1, V2, V3, each with its paper role and serving its own need."""
        return self.names == NEEDS and \
            all(r == PAPER_TIER_ROLES[t] for r, t in zip(self.roles, NEEDS, strict=True)) and \
            all(s is None or s == k for k, s in enumerate(self.serving))

    def missing_reason(self, need: str) -> str:
        """Why nothing serves ``need`` (the not-applicable reason)."""
        allowed = " or ".join(ROLE_NAMES[r] for r in SERVED_BY[need])
        return f"needs a {NEED_NAMES[need]} ({need}: a {allowed}); the pool has {self.holdings()}"

    def holdings(self) -> str:
        """The verifiers present, e.g. 'V3 RM-72B (reward model)', or 'no verifier'."""
        held = [f"{t} {self.models[k] or '?'} ({ROLE_NAMES[self.roles[k]]})"
                for k, t in enumerate(self.names) if self.present[k]]
        return ", ".join(held) if held else "no verifier"

    def describe(self) -> list[str]:
        """One line per need: who serves it and how (the report's role-mapping section)."""
        lines = []
        for k, need in enumerate(NEEDS):
            s = self.serving[k]
            if s is None:
                lines.append(f"{need} ({NEED_NAMES[need]}): none in the pool")
                continue
            role = ROLE_NAMES[self.roles[s]]
            how = role if SERVED_BY[need][0] == self.roles[s] else \
                f"{role}, serving as {NEED_NAMES[need]}: the pool has no {NEED_NAMES[need]}"
            lines.append(f"{need} ({NEED_NAMES[need]}): slot {self.names[s]} {self.models[s] or '?'} ({how})")
        return lines

    def resolve(self, rule: SelectionRule) -> SelectionRule:
        """``rule`` on this pool's slots: fusion weights by each slot's own role, a rule's tier by its need."""
        if rule.axis == self.names and self.names != NEEDS:
            return rule  # already on this pool's verifiers
        w = rule.weights
        weights = {"f": w["f"]} if "f" in w else {}
        for k, t in enumerate(self.names):
            source = WEIGHT_TIER[self.roles[k]]
            if source in w:
                weights[t] = w[source]
        served = self.slot(rule.tier) if rule.tier in NEEDS else None
        tier = rule.tier if served is None else self.names[served]
        if weights == w and tier == rule.tier and self.names == rule.axis:
            return rule
        return SelectionRule(rule=rule.rule, weights=weights, tier=tier, missing=rule.missing, axis=self.names)


def map_roles(roles: Sequence[str], models: Sequence[str], present: Sequence[bool],
              names: Sequence[str] = NEEDS) -> RoleMap:
    """Apply ``SERVED_BY``: each need gets the first preferred role present, ties to the lower slot."""
    serving: list[int | None] = []
    for need in NEEDS:
        choice = None
        for role in SERVED_BY[need]:
            choice = next((k for k in range(len(roles)) if present[k] and roles[k] == role), None)
            if choice is not None:
                break
        serving.append(choice)
    return RoleMap(roles=tuple(roles), models=tuple(models), present=tuple(bool(p) for p in present),
                   serving=tuple(serving), names=tuple(names))


def primary_slots(roles: Sequence[str]) -> tuple[int, int, int]:
    """The slots (-1: none) that stand for the paper's V1, V2, V3 in features and action counts, by declared role
    alone: the first cheap judge, the first process judge, the first strong verifier (else reward model).

    On the paper's verifiers these are 0, 1, 2. Unlike ``map_roles`` nothing stands in for a missing role, so a
    feature or count never reads a verifier twice.
    """
    def first(*wanted: str) -> int:
        for role in wanted:
            k = next((k for k, r in enumerate(roles) if r == role), -1)
            if k >= 0:
                return k
        return -1

    return first("cheap_judge"), first("process_judge"), first("strong_verifier", "reward_model")


#: The paper's verifiers in their tiers, all present: every need served by its own tier.
PAPER_ROLE_MAP = map_roles(tuple(PAPER_TIER_ROLES[t] for t in NEEDS), ("",) * len(NEEDS), (True,) * len(NEEDS))


def pool_role_map(pool: CompiledPool) -> RoleMap:
    """The role map of a compiled pool with every verifier enabled (what ``coba bench`` runs with)."""
    return map_roles(pool.verifier_roles, pool.verifier_models, [t in pool.tiers_present for t in pool.tiers],
                     pool.tiers)
