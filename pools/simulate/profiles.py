"""Simulator profiles: loading a profile (built-in name, JSON file or dict) and validating every field.

A profile is a JSON object that fixes everything the generative model in ``pools.simulate.model`` needs:
datasets with their accuracy targets, generators, models, length, latency and verifier-tier parameters.
Every field is required (the built-in profiles are complete and serve as templates) and unknown fields
are refused, so a typo fails loudly. Field meanings are documented in docs/SIMULATOR.md.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pools.errors import PoolError
from pools.schema import TIERS

PROFILE_DIR = Path(__file__).with_name("profiles")

#: Names of the profiles shipped with the package (files in ``PROFILE_DIR``).
BUILTIN_PROFILES: tuple[str, ...] = ("paper", "tiny", "ladder")

ANSWER_STYLES: tuple[str, ...] = ("integer", "mixed")


@dataclass(frozen=True)
class Profile:
    """A validated profile: its name, where it came from, and the JSON object itself."""

    name: str
    source: str
    data: dict[str, Any]

    @property
    def content_hash(self) -> str:
        """sha256 (hex) of the profile's canonical JSON, identifying its content independent of formatting."""
        canonical = json.dumps(self.data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


# ---------------------------------------------------------------- field rules
# A rule is a callable(value, checker, path) that returns the cleaned value or raises via checker.fail.


class _Checker:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, message: str) -> None:
        raise PoolError(message, file=self.source, field=path)

    def obj(self, value: Any, path: str, fields: dict[str, Any],
            optional: tuple[str, ...] = ()) -> dict[str, Any]:
        """Check an object with exactly the keys of ``fields`` (key -> rule), those in ``optional`` may be left out."""
        if not isinstance(value, dict):
            self.fail(path or "profile", f"expected a JSON object, got {_show(value)}")
        unknown = [k for k in value if k not in fields]
        if unknown:
            self.fail(_join(path, unknown[0]), f"unknown field; expected one of {sorted(fields)}")
        out = {}
        for key, rule in fields.items():
            if key not in value:
                if key in optional:
                    continue
                self.fail(_join(path, key), "missing required field")
            out[key] = rule(value[key], self, _join(path, key))
        return out

    def mapping(self, value: Any, path: str, rule: Any, *, min_len: int = 1) -> dict[str, Any]:
        """Check a non-empty object whose keys are free names and whose values follow ``rule``."""
        if not isinstance(value, dict):
            self.fail(path, f"expected a JSON object of name -> settings, got {_show(value)}")
        if len(value) < min_len:
            self.fail(path, f"expected at least {min_len} entr{'y' if min_len == 1 else 'ies'}")
        out = {}
        for key, v in value.items():
            if not isinstance(key, str) or not key.strip():
                self.fail(path, f"expected non-empty string names, got {key!r}")
            out[key] = rule(v, self, _join(path, key))
        return out


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _show(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) or math.isfinite(value) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _number(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False, hi_open: bool = False):
    def rule(value: Any, ck: _Checker, path: str) -> float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        ok = ok and (lo is None or (value > lo if lo_open else value >= lo))
        ok = ok and (hi is None or (value < hi if hi_open else value <= hi))
        if not ok:
            lo_s = "" if lo is None else f"{'>' if lo_open else '>='} {lo}"
            hi_s = "" if hi is None else f"{'<' if hi_open else '<='} {hi}"
            bounds = " and ".join(s for s in (lo_s, hi_s) if s)
            ck.fail(path, f"expected a number{' ' + bounds if bounds else ''}, got {_show(value)}")
        return float(value)

    return rule


def _integer(lo: int = 0, hi: int | None = None):
    def rule(value: Any, ck: _Checker, path: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < lo or (hi is not None and value > hi):
            bound = f">= {lo}" + ("" if hi is None else f" and <= {hi}")
            ck.fail(path, f"expected an integer {bound}, got {_show(value)}")
        return int(value)

    return rule


def _string(value: Any, ck: _Checker, path: str) -> str:
    if not isinstance(value, str):
        ck.fail(path, f"expected a string, got {_show(value)}")
    return value


def _name(value: Any, ck: _Checker, path: str) -> str:
    if (not isinstance(value, str) or not value or not value[0].isalnum()
            or not all(c.isalnum() or c in "-_." for c in value)):
        ck.fail(path, "expected a non-empty name of letters, digits, '-', '_' or '.' that starts with a letter "
                f"or digit, got {_show(value)}")
    return value


def _choice(*options: str):
    def rule(value: Any, ck: _Checker, path: str) -> str:
        if value not in options:
            ck.fail(path, f"expected one of {list(options)}, got {_show(value)}")
        return value

    return rule


def _string_list(value: Any, ck: _Checker, path: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        ck.fail(path, f"expected a list of non-empty strings, got {_show(value)}")
    return list(value)


def _candidates_spec(value: Any, ck: _Checker, path: str) -> str | list[int]:
    if value == "all":
        return "all"
    if (not isinstance(value, list) or not value
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
            or len(set(value)) != len(value)):
        ck.fail(path, f'expected "all" or a non-empty list of distinct candidate indices, got {_show(value)}')
    return sorted(value)


_PERCENT = _number(0, 100)


def _targets(value: Any, ck: _Checker, path: str) -> dict[str, Any]:
    def majority(v: Any, ck: _Checker, p: str) -> dict[str, float]:
        if not isinstance(v, dict):
            ck.fail(p, f'expected an object of prefix size -> percent, e.g. {{"8": 87.9}}, got {_show(v)}')
        out = {}
        for k, pct in v.items():
            if not (isinstance(k, str) and k.isdigit() and int(k) >= 1):
                ck.fail(p, f"expected prefix sizes as positive integer strings, got {k!r}")
            out[k] = _PERCENT(pct, ck, _join(p, k))
        return out

    t = ck.obj(value, path, {"greedy": _PERCENT, "majority": majority, "oracle": _PERCENT})
    for key, pct in [("greedy", t["greedy"])] + [(f"majority.{k}", v) for k, v in t["majority"].items()]:
        if pct > t["oracle"]:
            ck.fail(_join(path, key), f"is {pct} but oracle is {t['oracle']}; expected <= oracle "
                    "(a pool cannot pick a correct answer it does not contain)")
    return t


def _generator_targets(value: Any, ck: _Checker, path: str) -> dict[str, Any]:
    """Per-generator targets of one dataset: generator -> {greedy, majority, oracle} like ``targets``."""
    return ck.mapping(value, path, _targets)


_DATASET_FIELDS = {
    "n_items": _integer(1),
    "targets": _targets,
    "generator_targets": _generator_targets,
    "answers": _choice(*ANSWER_STYLES),
    "problem_tokens_median": _number(1),
    "length_multiplier": _number(0, lo_open=True),
    "wrong_attractor_share": _number(0, 1),
    "trap_fraction": _number(0, 1, hi_open=True),
    "levels": _integer(0),
    "subjects": _string_list,
    "tasks": _string_list,
}

_GENERATOR_FIELDS = {
    "accuracy_logit_offset": _number(-5, 5),
    "output_tokens_median": _number(1),
}

_TIER_FIELDS = {
    "model": _string,
    "auroc": _number(0.5, 1, hi_open=True),
    "candidates": _candidates_spec,
    "missing_rate": _number(0, 1),
    "missing_stored_as": _choice("nan", "absent"),
    "cluster_correlation": _number(0, 1, hi_open=True),
    "no_answer_shift": _number(),
    "score_sharpness": _number(0, lo_open=True),
    "score_bias": _number(),
    "prompt_template_tokens": _integer(0),
    "read_cap_tokens": _integer(1),
    "output_tokens_median": _number(1),
    "output_tokens_sigma": _number(0),
}


def _tiers(value: Any, ck: _Checker, path: str) -> dict[str, Any]:
    if isinstance(value, dict):
        for name in value:
            if name not in TIERS:
                ck.fail(_join(path, str(name)), f"unknown tier; expected one of {list(TIERS)}")
    return ck.mapping(value, path, lambda v, c, p: c.obj(v, p, _TIER_FIELDS))


def _top_fields() -> dict[str, Any]:
    def obj(fields: dict[str, Any]):
        return lambda v, ck, p: ck.obj(v, p, fields)

    return {
        "name": _name,
        "description": _string,
        "n_candidates": _integer(1, 1024),
        "max_output_tokens": _integer(1),
        "sampling": obj({"temperature": _number(0), "top_p": _number(0, 1)}),
        "models": lambda v, ck, p: ck.mapping(v, p, _number(0, lo_open=True)),
        "generators": lambda v, ck, p: ck.mapping(v, p, obj(_GENERATOR_FIELDS)),
        "datasets": lambda v, ck, p: ck.mapping(v, p, lambda v2, c2, p2: c2.obj(v2, p2, _DATASET_FIELDS,
                                                                                 optional=("generator_targets",))),
        "difficulty": obj({"item_correlation": _number(0, 1)}),
        "wrong_answers": obj({
            "n_attractors": _integer(1, 20),
            "attractor_weight_alpha": _number(0, lo_open=True),
            "share_concentration": _number(0, lo_open=True),
        }),
        "traps": obj({
            "correct_mean": _number(0, 1, lo_open=True, hi_open=True),
            "correct_concentration": _number(0, lo_open=True),
            "attractor_share": _number(0, 1),
            "top_attractor_weight": _number(0, 1),
        }),
        "lengths": obj({
            "hardness_coef": _number(),
            "wrong_coef": _number(),
            "episode_sigma": _number(0),
            "candidate_sigma": _number(0, lo_open=True),
            "prompt_template_tokens": _integer(0),
            "problem_tokens_sigma": _number(0),
        }),
        "audit": obj({
            "incomplete_boxed_given_cap": _number(0, 1),
            "repetition_answered": obj({"a": _number(0, lo_open=True), "b": _number(0, lo_open=True)}),
            "repetition_cap_hit": obj({"a": _number(0, lo_open=True), "b": _number(0, lo_open=True)}),
        }),
        "latency": obj({
            "overhead_s": _number(0),
            "prefill_s_per_token_per_b": _number(0),
            "decode_s_per_token_per_b": _number(0),
            "noise_sigma": _number(0),
        }),
        "tiers": _tiers,
        "cross_tier_correlation": _number(0, 1),
    }


def validate_profile(data: Any, source: str = "<profile>") -> dict[str, Any]:
    """Check every field of a profile and return a cleaned deep copy; PoolError names the bad field."""
    ck = _Checker(source)
    out = ck.obj(copy.deepcopy(data), "", _top_fields())
    n = out["n_candidates"]
    for g in out["generators"]:
        if g not in out["models"]:
            ck.fail(f"generators.{g}", f"generator {g!r} is not listed in models {sorted(out['models'])}")
    used = set(out["generators"]) | {t["model"] for t in out["tiers"].values()}
    for name in out["models"]:
        if name not in used:
            ck.fail(f"models.{name}", "model is neither a generator nor the model of a tier; remove it")
    for d, spec in out["datasets"].items():
        for k in spec["targets"]["majority"]:
            if int(k) > n:
                ck.fail(f"datasets.{d}.targets.majority.{k}", f"prefix size {k} exceeds n_candidates={n}")
        if "generator_targets" in spec:
            _check_generator_targets(ck, f"datasets.{d}", spec, list(out["generators"]))
    for t, spec in out["tiers"].items():
        if spec["model"] not in out["models"]:
            ck.fail(f"tiers.{t}.model", f"model {spec['model']!r} is not listed in models {sorted(out['models'])}")
        cands = spec["candidates"]
        if cands != "all" and max(cands) >= n:
            ck.fail(f"tiers.{t}.candidates", f"index {max(cands)} is out of range for n_candidates={n}")
    return out


#: How far (percentage points) a dataset target may lie from the mean of its generators' targets.
GENERATOR_MEAN_TOLERANCE = 0.05


def _check_generator_targets(ck: _Checker, path: str, spec: dict[str, Any], generators: list[str]) -> None:
    """Every generator has targets, with the dataset's majority prefixes, and their mean is the dataset's."""
    per_gen = spec["generator_targets"]
    for g in per_gen:
        if g not in generators:
            ck.fail(f"{path}.generator_targets.{g}", f"not a generator of the profile; expected some of {generators}")
    for g in generators:
        if g not in per_gen:
            ck.fail(f"{path}.generator_targets", f"has no targets for generator {g!r}; expected every generator")
        extra = sorted(set(per_gen[g]["majority"]) ^ set(spec["targets"]["majority"]))
        if extra:
            ck.fail(f"{path}.generator_targets.{g}.majority", f"prefix sizes differ from targets.majority at {extra}; "
                    "expected the same prefix sizes")
    figures = [("greedy", lambda t: t["greedy"]), ("oracle", lambda t: t["oracle"])]
    figures += [(f"majority.{k}", lambda t, k=k: t["majority"][k]) for k in spec["targets"]["majority"]]
    for name, get in figures:
        mean = sum(get(per_gen[g]) for g in generators) / len(generators)
        if abs(get(spec["targets"]) - mean) > GENERATOR_MEAN_TOLERANCE:
            ck.fail(f"{path}.targets.{name}", f"is {get(spec['targets'])} but the generators' targets average "
                    f"{mean:.3f}; expected their mean (within {GENERATOR_MEAN_TOLERANCE})")


def load_profile(profile: str | os.PathLike[str] | dict[str, Any]) -> Profile:
    """Resolve a built-in name, a JSON file path or a dict to a validated ``Profile``."""
    if isinstance(profile, dict):
        source = "<profile dict>"
        data = profile
    else:
        text = os.fspath(profile)
        if text in BUILTIN_PROFILES:
            path = PROFILE_DIR / f"{text}.json"
        else:
            path = Path(text)
            if not path.is_file():
                raise PoolError(f"no such profile: expected a built-in name {list(BUILTIN_PROFILES)} "
                                "or a path to a profile JSON file", file=text)
        source = str(path)
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise PoolError(f"not valid JSON ({exc.msg} at line {exc.lineno})", file=source) from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise PoolError(f"cannot read profile ({exc})", file=source) from exc
    clean = validate_profile(data, source)
    return Profile(name=clean["name"], source=source, data=clean)
