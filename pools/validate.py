"""validate_pool: check a pool's tables against the schema, against each other and against its manifest.

Checks run in a fixed order and stop at the first problem, which is raised as a ``PoolError`` naming
the file, table, row (with its key), field and what was expected. Every check is a vectorised pandas /
numpy expression; Python loops only run on the error path to describe the offending value.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from pools.column_kinds import KIND_NAMES, kind_problem
from pools.errors import PoolError
from pools.limits import MAX_CLUSTER, MAX_LATENCY_S, MAX_PARAMS_B, MAX_TOKENS
from pools.manifest_checks import check_manifest_basics
from pools.safe_names import MAX_NAME_CHARS
from pools.schema import OUTCOME_STATUS, TABLES, TIERS, VERIFIER_NAME_PATTERN, VERIFIER_ROLES

if TYPE_CHECKING:  # annotations only: pools.store imports this module to validate what it loads
    from pools.store import Pool

#: Key columns per table; a key must be unique within its table.
TABLE_KEYS: dict[str, tuple[str, ...]] = {
    "items": ("dataset", "item_id"),
    "models": ("name",),
    "episodes": ("episode_id",),
    "candidates": ("episode_id", "candidate"),
    "verifications": ("episode_id", "candidate", "tier"),
}

MODEL_ROLES: tuple[str, ...] = ("generator", "verifier", "generator+verifier")

#: The upper bound of each bounded column of the two large tables (tokens and seconds).
HIGH_BOUNDS: dict[str, float] = {"prompt_tokens": MAX_TOKENS, "output_tokens": MAX_TOKENS, "latency_s": MAX_LATENCY_S}

#: The messages of the per-row checks of the two large tables (``{value}``: the row's value), shared with the
#: batch-at-a-time validation of a stored pool (``pools.row_checks``), so both say the same.
ROW_MESSAGES: dict[str, str] = {
    "negative": "is {value!r}; expected >= 0",
    "finite": "is {value!r}; expected a finite number",
    "unit": "is {value!r}; expected in [0, 1]",
    "score": "score {value!r} outside [0, 1] (NaN marks a call without a usable score)",
    "graded": "is {value!r}; expected a graded score in [0, 1] (NaN: the source graded 0/1 only)",
    "usd": "is {value!r}; expected the dollars of the call, a finite number >= 0 (NaN: not recorded)",
    "outcome_key": f"is {{value!r}} on a candidate of status {OUTCOME_STATUS!r}; expected null (its source recorded "
                   "an outcome, no answer)",
    "episode_ref": "points at an unknown episode {value!r}; expected an episode_id in table episodes",
    "candidate_ref": "points at an unknown candidate (no row with this episode_id and candidate in table candidates)",
    "cluster_range": f"is {{value!r}}; expected -1 or a cluster id from 0 to {MAX_CLUSTER}",
    "cluster_minus1": "is -1 (no answer) but answer_key is set; expected a cluster id >= 0",
    "cluster_null": "is {value!r} but answer_key is null; expected -1 for a candidate without an answer",
}


def _braces(text: str) -> str:
    """``text`` with its braces doubled, for a message that ``first_bad`` formats."""
    return text.replace("{", "{{").replace("}", "}}")


def high_message(col: str) -> str:
    """The message for a value of ``col`` above its bound (``HIGH_BOUNDS``)."""
    return f"is {{value!r}}; expected from 0 to {HIGH_BOUNDS[col]:g}"


#: Messages of the whole-table checks that ``validate_pool`` and the stored pool's checks (``pools.whole_steps``)
#: both give ("{value!r}" is filled with the bad row's value).
NAME_MESSAGE = (f"is {{value!r}}; expected printable text of at most {MAX_NAME_CHARS} characters (no line breaks or "
                "control characters)")
TIER_FORM_MESSAGE = "verifier name {value!r}; expected a name matching " + _braces(VERIFIER_NAME_PATTERN)
TIER_ROLE_MESSAGE = ("verifier {value!r} has no role; expected it in the manifest's verifier_roles (name -> one of "
                     f"{list(VERIFIER_ROLES)}); only the paper's {list(TIERS)} have a default role")
UNKNOWN_VERIFIER_MODEL_MESSAGE = "unknown verifier model {value!r}; expected a name in table models"
NOT_A_VERIFIER_MESSAGE = "model {value!r} does not have a verifier role in table models"


def duplicate_key_message(keys: tuple[str, ...] | list[str], first: int) -> str:
    """A key used twice, first at row ``first``."""
    return f"duplicate key {tuple(keys)}; first used at row {first}"


def tier_case_message(earlier: str) -> str:
    """A verifier name equal up to case to the earlier name ``earlier``."""
    return ("verifier name {value!r} differs only in case from verifier " + _braces(repr(earlier)) +
            "; expected verifier names that differ beyond case (feature names are lower case)")


def candidate_indices_message(episode: object, shown: list, n: int) -> str:
    """An episode whose candidate indices (``shown``) are not 0..k-1."""
    return (f"episode {episode} has candidate indices {shown}; expected 0..k-1 for some k from 1 to {n}, without gaps "
            f"(manifest n_candidates={n})")


def no_candidates_message(n: int) -> str:
    """An episode without candidates."""
    return f"episode {{value!r}} has no candidates; expected candidates 0..k-1 for some k from 1 to {n} " \
           f"(manifest n_candidates={n})"


def n_candidates_message(n: int, most: int) -> str:
    """A manifest N other than the most candidates an episode holds."""
    return (f"is {n}, but the most candidates an episode holds is {most}; expected {most} (N is the largest number of "
            "candidates of an episode)")


def cluster_order_message(cluster: int, expected: int) -> str:
    """A cluster id that comes before the id ``expected`` within its episode."""
    return (f"cluster id {cluster} appears before cluster {expected}; expected ids 0..k-1 numbered in order of first "
            "appearance within the episode")



class _Checker:
    """Carries the pool and its source so that every check can raise a fully located PoolError."""

    def __init__(self, pool: Pool, source: str | None) -> None:
        self.pool = pool
        self.source = source
        is_dir = source is not None and os.path.isdir(source)
        self.manifest_file = os.path.join(source, "manifest.json") if is_dir else source

    def fail(self, table: str, pos: int | None, field: str | None, message: str) -> None:
        row = None if pos is None else self.row_label(table, pos)
        raise PoolError(message, file=self.source, table=table, row=row, field=field)

    def fail_manifest(self, field: str, message: str) -> None:
        raise PoolError(message, file=self.manifest_file, table="manifest", field=field)

    def row_label(self, table: str, pos: int) -> str:
        df = self.pool.table(table)
        keys = [k for k in TABLE_KEYS[table] if k in df.columns]
        if not keys:
            return str(pos)
        values = ", ".join(f"{k}={_plain(df[k].iat[pos])!r}" for k in keys)
        return f"{pos} ({values})"

    def first_bad(self, table: str, mask: Any, field: str | None, message: str) -> None:
        """Fail at the first row where boolean ``mask`` is true; ``message`` may use {value}."""
        mask = np.asarray(mask, dtype=bool)
        if mask.any():
            pos = int(np.argmax(mask))
            value = _plain(self.pool.table(table)[field].iat[pos]) if field else None
            self.fail(table, pos, field, message.format(value=value))


def _plain(v: Any) -> Any:
    """A numpy scalar as the equivalent Python value, for readable messages."""
    return v.item() if isinstance(v, np.generic) else v




def _check_not_empty(ck: _Checker, n: int) -> None:
    """A pool with no episodes (or no candidates per episode) can be neither replayed nor benchmarked."""
    if len(ck.pool.episodes) == 0:
        ck.fail("episodes", None, None, "the pool has 0 episodes; expected at least one episode with candidates "
                "(re-import or rebuild it from a source that has candidates)")
    if n == 0:
        ck.fail_manifest("n_candidates", "is 0; expected the number of candidates per episode, an integer >= 1")


def _check_columns(ck: _Checker) -> None:
    for table, columns in TABLES.items():
        df = ck.pool.table(table)
        missing = [c for c in columns if c not in df.columns]
        if missing:
            ck.fail(table, None, missing[0], f"missing column(s) {missing}; expected columns {list(columns)}")
        for col, kind in columns.items():
            problem = kind_problem(df[col], kind)
            if problem is not None:
                pos, found = problem
                expected = KIND_NAMES[kind.rstrip("?")] + (" or null" if kind.endswith("?") else "")
                ck.fail(table, pos, col, f"expected {expected} ({kind}), found {found}")


def _check_keys(ck: _Checker) -> None:
    for table, keys in TABLE_KEYS.items():
        df = ck.pool.table(table)
        dup = df.duplicated(subset=list(keys), keep="first").to_numpy()
        if dup.any():
            pos = int(np.argmax(dup))
            first = int(np.argmax(
                np.logical_and.reduce([df[k].to_numpy() == df[k].iat[pos] for k in keys])
            ))
            ck.fail(table, pos, keys[-1], duplicate_key_message(keys, first))


_CONTROL = r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]"


def _check_names(ck: _Checker) -> None:
    """Names that reach reports, tables and paths: printable, at most ``MAX_NAME_CHARS`` characters."""
    for table, col in (("items", "dataset"), ("items", "item_id"), ("models", "name"), ("episodes", "generator"),
                       ("verifications", "model")):
        text = ck.pool.table(table)[col].astype(str)
        ck.first_bad(table, text.str.contains(_CONTROL, regex=True).to_numpy() | (text.str.len() > MAX_NAME_CHARS),
                     col, NAME_MESSAGE)


def _check_values(ck: _Checker) -> None:
    p = ck.pool
    models, cands, verifs = p.models, p.candidates, p.verifications
    ck.first_bad("models", ~models["role"].isin(MODEL_ROLES), "role",
                 f"unknown role {{value!r}}; expected one of {list(MODEL_ROLES)}")
    params = models["params_b"].to_numpy(dtype=float)
    ck.first_bad("models", ~np.isfinite(params) | (params < 0) | (params > MAX_PARAMS_B), "params_b",
                 f"is {{value!r}}; expected a number of billions of parameters from 0 to {MAX_PARAMS_B:g}")
    for table, df in (("candidates", cands), ("verifications", verifs)):
        for col, high in HIGH_BOUNDS.items():
            values = df[col].to_numpy(dtype=float, na_value=np.nan)
            ck.first_bad(table, values < 0, col, ROW_MESSAGES["negative"])
            ck.first_bad(table, values > high, col, high_message(col))
    ck.first_bad("candidates", cands["candidate"].to_numpy() < 0, "candidate", ROW_MESSAGES["negative"])
    lat = cands["latency_s"].to_numpy(dtype=float)
    ck.first_bad("candidates", ~np.isfinite(lat), "latency_s", ROW_MESSAGES["finite"])
    rep = cands["repetition_score"].to_numpy(dtype=float)
    ck.first_bad("candidates", ~((rep >= 0) & (rep <= 1)), "repetition_score", ROW_MESSAGES["unit"])
    codes, names = pd.factorize(verifs["tier"])  # each distinct name checked once
    well_formed = np.array([isinstance(t, str) and re.fullmatch(VERIFIER_NAME_PATTERN, t) is not None
                            for t in names], dtype=bool)
    ck.first_bad("verifications", ~well_formed[codes] if len(codes) else np.zeros(0, bool), "tier",
                 TIER_FORM_MESSAGE)
    folded = pd.Series([str(t).casefold() for t in names])
    clash = folded.duplicated(keep="first").to_numpy()  # a name equal up to case to an earlier one
    if clash.any():
        first = names[int(np.flatnonzero(folded == folded[int(np.argmax(clash))])[0])]
        ck.first_bad("verifications", clash[codes], "tier", tier_case_message(first))
    roles = p.manifest.get("verifier_roles") or {}
    has_role = np.array([t in TIERS or t in roles for t in names], dtype=bool)
    ck.first_bad("verifications", ~has_role[codes] if len(codes) else np.zeros(0, bool), "tier",
                 TIER_ROLE_MESSAGE)
    score = verifs["score"].to_numpy(dtype=float)
    ck.first_bad("verifications", (score < 0) | (score > 1), "score", ROW_MESSAGES["score"])
    vlat = verifs["latency_s"].to_numpy(dtype=float)
    ck.first_bad("verifications", ~np.isfinite(vlat), "latency_s", ROW_MESSAGES["finite"])
    _check_outcomes(ck)


def _check_outcomes(ck: _Checker) -> None:
    """Graded scores in [0, 1], recorded dollars finite and >= 0 (NaN: none), an outcome-only candidate answerless."""
    cands = ck.pool.candidates
    graded = cands["graded_score"].to_numpy(dtype=float)
    ck.first_bad("candidates", (graded < 0) | (graded > 1), "graded_score", ROW_MESSAGES["graded"])
    usd = cands["cost_usd"].to_numpy(dtype=float)
    ck.first_bad("candidates", (usd < 0) | np.isinf(usd), "cost_usd", ROW_MESSAGES["usd"])
    outcome = (cands["extraction_status"] == OUTCOME_STATUS).to_numpy()
    ck.first_bad("candidates", outcome & cands["answer_key"].notna().to_numpy(), "answer_key",
                 ROW_MESSAGES["outcome_key"])


def _multi(df: pd.DataFrame, cols: list[str]) -> pd.MultiIndex:
    return pd.MultiIndex.from_arrays([df[c].to_numpy() for c in cols], names=cols)


def _check_references(ck: _Checker) -> None:
    p = ck.pool
    items, models, episodes, cands = p.items, p.models, p.episodes, p.candidates
    known_items = _multi(items, ["dataset", "item_id"])
    ck.first_bad("episodes", ~_multi(episodes, ["dataset", "item_id"]).isin(known_items), "item_id",
                 "points at an unknown item (no row with this dataset and item_id in table items)")
    role = dict(zip(models["name"], models["role"], strict=True))
    gen = episodes["generator"]
    ck.first_bad("episodes", ~gen.isin(role.keys()), "generator",
                 "unknown generator model {value!r}; expected a name in table models")
    generators = [name for name, r in role.items() if "generator" in r]
    ck.first_bad("episodes", ~gen.isin(generators), "generator",
                 "model {value!r} does not have a generator role in table models")
    ck.first_bad("candidates", ~cands["episode_id"].isin(episodes["episode_id"]), "episode_id",
                 ROW_MESSAGES["episode_ref"])


def _check_verification_references(ck: _Checker) -> None:
    p = ck.pool
    models, cands, verifs = p.models, p.candidates, p.verifications
    verifiers = [name for name, r in zip(models["name"], models["role"], strict=True) if "verifier" in r]
    known_cands = _multi(cands, ["episode_id", "candidate"])
    ck.first_bad("verifications", ~_multi(verifs, ["episode_id", "candidate"]).isin(known_cands), "candidate",
                 ROW_MESSAGES["candidate_ref"])
    vm = verifs["model"]
    ck.first_bad("verifications", ~vm.isin(models["name"]), "model", UNKNOWN_VERIFIER_MODEL_MESSAGE)
    ck.first_bad("verifications", ~vm.isin(verifiers), "model", NOT_A_VERIFIER_MESSAGE)


def _check_candidate_indices(ck: _Checker, n: int) -> None:
    """Each episode holds candidates 0..k-1 for some k from 1 to N (episodes may hold different numbers: N,
    the manifest's ``n_candidates``, is the most any episode holds); an index gap or an empty episode is refused."""
    cands, episodes = ck.pool.candidates, ck.pool.episodes
    stats = cands.groupby("episode_id", sort=False)["candidate"].agg(["size", "min", "max"])
    bad = (stats["min"] != 0) | (stats["max"] != stats["size"] - 1) | (stats["size"] > n)
    if bad.any():
        ep = bad.index[int(np.argmax(bad.to_numpy()))]
        idx = sorted(cands.loc[cands["episode_id"] == ep, "candidate"].tolist())
        shown = idx if len(idx) <= 20 else idx[:20] + ["..."]
        pos = int(np.argmax((cands["episode_id"] == ep).to_numpy()))
        ck.fail("candidates", pos, "candidate", candidate_indices_message(_plain(ep), shown, n))
    ck.first_bad("episodes", ~episodes["episode_id"].isin(stats.index), "episode_id", no_candidates_message(n))
    most = int(stats["size"].max()) if len(stats) else 0
    if most != n:
        ck.fail_manifest("n_candidates", n_candidates_message(n, most))


def _check_clusters(ck: _Checker) -> None:
    cands = ck.pool.candidates
    ck.first_bad("candidates", (cands["cluster"].to_numpy() < -1) | (cands["cluster"].to_numpy() > MAX_CLUSTER),
                 "cluster", ROW_MESSAGES["cluster_range"])
    null_key = cands["answer_key"].isna().to_numpy()
    cluster = cands["cluster"].to_numpy()
    ck.first_bad("candidates", (cluster == -1) & ~null_key, "cluster", ROW_MESSAGES["cluster_minus1"])
    ck.first_bad("candidates", (cluster != -1) & null_key, "cluster", ROW_MESSAGES["cluster_null"])
    order = np.lexsort((cands["candidate"].to_numpy(), cands["episode_id"].to_numpy()))
    ep = cands["episode_id"].to_numpy()[order]
    cl = cluster[order]
    running_max = pd.Series(cl).groupby(ep).cummax()
    before = running_max.groupby(ep).shift(1).fillna(-1).to_numpy()
    bad_sorted = cl > before + 1
    if bad_sorted.any():
        k = int(np.argmax(bad_sorted))
        pos = int(order[k])
        ck.fail("candidates", pos, "cluster", cluster_order_message(int(cl[k]), int(before[k]) + 1))


def _check_manifest_agrees(ck: _Checker) -> None:
    p, m = ck.pool, ck.pool.manifest
    counts = m["counts"]
    if not isinstance(counts, dict):
        ck.fail_manifest("counts", f"is {counts!r}; expected an object of table -> row count")
    for table in TABLES:
        actual = len(p.table(table))
        if counts.get(table) != actual:
            ck.fail_manifest("counts", f"says {table} has {counts.get(table)!r} rows; table {table} has {actual}")
    datasets = {str(k): int(v) for k, v in p.items.groupby("dataset", sort=False).size().items()}
    if m["datasets"] != datasets:
        ck.fail_manifest("datasets", f"is {m['datasets']!r}; the items table has {datasets!r} (dataset -> items)")
    table_models = sorted(
        (str(r.name), float(r.params_b), str(r.role)) for r in p.models.itertuples(index=False)
    )
    try:
        listed = sorted((str(d["name"]), float(d["params_b"]), str(d["role"])) for d in m["models"])
    except (TypeError, KeyError, ValueError):
        listed = None
    if listed != table_models:
        ck.fail_manifest("models", f"is {m['models']!r}; the models table has "
                         f"{[dict(zip(('name', 'params_b', 'role'), t, strict=True)) for t in table_models]!r}")
    if list(m["tiers"]) != p.tiers:
        ck.fail_manifest("tiers", f"is {m['tiers']!r}; the verifications table has tiers {p.tiers!r}")
    stray = [t for t in (m.get("verifier_roles") or {}) if t not in TIERS and t not in p.tiers]
    if stray:
        ck.fail_manifest("verifier_roles", f"names verifier {stray[0]!r}, which has no calls; expected names among "
                                           f"the pool's verifiers {p.tiers!r} (or the paper's {list(TIERS)})")


def validate_pool(pool: Pool, *, source: str | None = None) -> None:
    """Raise PoolError at the first problem in ``pool`` (schema, keys, values, references, manifest)."""
    ck = _Checker(pool, source)
    n = check_manifest_basics(ck.pool.manifest, ck.fail_manifest, ck.pool.models["name"].astype(str))
    _check_not_empty(ck, n)
    _check_columns(ck)
    _check_keys(ck)
    _check_names(ck)
    _check_values(ck)
    _check_references(ck)
    _check_candidate_indices(ck, n)
    _check_verification_references(ck)
    _check_clusters(ck)
    _check_manifest_agrees(ck)
