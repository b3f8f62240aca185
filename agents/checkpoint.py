"""Controller checkpoint directories: ``controller.json`` (its ``kind``, configuration, the env it was trained on)
and ``PATH@LAMBDA`` specs.

Shared by the MLP and PPO controllers (``agents.learned_mlp``, ``agents.learned_ppo``) and by the loader that
dispatches between them (``agents.learned``, through each kind's declared loader); this module imports none of
them. The checkpoint kinds are the controller kinds with a loader (``agents.controller_kinds``).

``TrainedEnv`` reads what an env must match to run a controller: the grouping of its episodes (controller.json's
``env``: "replay", one (problem, generator) pair per episode, or "route", one problem with all its generators),
its actions and observation features, its N_max (per generator on the route env) and, for a controller whose
observation holds per-generator features, the budget B they are measured in.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from agents.controller_kinds import checkpoint_kinds
from agents.policy_spec import names_saved, split_at_lambda
from coba_env.rules.actions import REPLAY_LAYOUT
from coba_env.rules.config import BUDGET_MAX, BUDGET_MIN
from coba_env.rules.features import LAMBDA_FROM_END, PAPER_FEATURE_LAYOUT
from pools.parse_boundary import PARSE_ERRORS, parse_problem

CONFIG_FILE = "controller.json"
#: Observation index (from the end) of the cost weight lambda, which a controller fixed at a lambda overwrites
#: (the same on both envs: the route observation ends with the replay one's pooled table).
LAMBDA_INDEX = LAMBDA_FROM_END


class TrainedOn(NamedTuple):
    """One value of controller.json's ``env``: its episode grouping, gym id, and the prefix of its controllers'
    names and kinds (``route_ppo@0.1``, kind ``route_mlp``)."""

    grouping: str
    gym_id: str
    prefix: str


#: controller.json's ``env`` -> what it means; a checkpoint without the field was trained on the replay env.
TRAINED_ENVS: dict[str, TrainedOn] = {"replay": TrainedOn("pair", "coba/Replay-v0", ""),
                                      "route": TrainedOn("item", "coba/Route-v0", "route_")}


def trained_env_fields(env: Any) -> dict[str, Any]:
    """The controller.json fields naming the env a controller trains on (read back by ``TrainedEnv.read``): none
    on the replay env (the default, as every checkpoint before the route env), ``env`` and the N_max per
    generator on the route env."""
    base = getattr(env, "unwrapped", env)
    name = next(k for k, v in TRAINED_ENVS.items() if v.grouping == base.config.grouping)
    problem = base.config.problem
    features = {} if problem is None else {"problem_features": list(getattr(problem.featurizer, "sources", ()))}
    per_generator = base.n_max_per_generator  # None with pairs: such a checkpoint records no env, as before
    if per_generator is None:
        return features
    return {"env": name, "n_max_per_generator": int(per_generator), **features}


def kinds() -> tuple[str, ...]:
    """The checkpoint kinds: every declared controller kind with a loader (``agents.controller_kinds``)."""
    return checkpoint_kinds()


def trained_layout(config: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(action names, observation feature names) a controller was trained with: the checkpoint's ``actions`` and
    ``observation``; a checkpoint written before layouts were stored was trained on the paper layout."""
    actions = config.get("actions") or REPLAY_LAYOUT.names
    features = config.get("observation") or PAPER_FEATURE_LAYOUT.names
    return tuple(str(a) for a in actions), tuple(str(f) for f in features)


def observation_names(env: Any) -> tuple[str, ...]:
    """The names of ``env``'s observation features, in index order (either grouping)."""
    base = getattr(env, "unwrapped", env)
    return tuple(getattr(base, "feature_names", None) or base.features.names)


def layout_mismatch(env: Any, actions: tuple[str, ...], features: tuple[str, ...]) -> str:
    """Why ``env``'s actions or observation differ from a controller's trained ones ("" when they match)."""
    if tuple(env.layout.names) != actions:
        return f"trained on the actions {list(actions)}; the env has {list(env.layout.names)}"
    names = observation_names(env)
    if names != features:
        return f"trained on {len(features)} observation features; the env's {len(names)} differ ({names[:3]}...)"
    return ""


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@dataclass(frozen=True)
class TrainedEnv:
    """The env a controller was trained on (``TrainedEnv.read(controller.json)``): what an env must match."""

    env: str  # controller.json's "env": a key of TRAINED_ENVS
    actions: tuple[str, ...]
    features: tuple[str, ...]
    n_max: int | None  # N_max of the episode (None: not recorded)
    n_max_per_generator: int | None  # route env: N_max per generator (None on the replay env)
    budget: float  # B of training
    #: The fitted problem featurizer of a controller trained with problem features (the env option), read from
    #: its checkpoint directory by ``with_problem_features``; None without.
    problem_features: Any = None

    @classmethod
    def read(cls, config: dict[str, Any], where: str | Path) -> TrainedEnv:
        """The trained env of the checkpoint ``config`` (its controller.json at ``where``); a ValueError naming
        the file and the field for an unknown env, or a route checkpoint without its N_max per generator."""
        env = config.get("env", "replay")
        if env not in TRAINED_ENVS:
            raise ValueError(f"{where}: field 'env' is {str(env)[:60]!r}; expected one of {list(TRAINED_ENVS)}")
        per_generator = config.get("n_max_per_generator")
        # The per-generator block of an item-grouped observation counts each generator's candidates in units of
        # its N_max: a route checkpoint must say which (and only a route checkpoint has one).
        by_item = TRAINED_ENVS[env].grouping == "item"
        if by_item and not _positive_int(per_generator):
            raise ValueError(f"{where}: field 'n_max_per_generator' is {per_generator!r}; expected an integer "
                             ">= 1 (a route-env checkpoint)")
        budget = config.get("budget")
        if not (isinstance(budget, int | float) and not isinstance(budget, bool) and math.isfinite(budget)
                and BUDGET_MIN <= budget <= BUDGET_MAX):  # cost / B must stay finite in the network's input
            raise ValueError(f"{where}: field 'budget' is {budget!r}; expected a finite number > 0, from "
                             f"{BUDGET_MIN:g} to {BUDGET_MAX:g}")
        n_max = config.get("n_max")
        actions, features = trained_layout(config)
        return cls(env=str(env), actions=actions, features=features, n_max=n_max if _positive_int(n_max) else None,
                   n_max_per_generator=per_generator if by_item else None, budget=float(budget))

    @property
    def on(self) -> TrainedOn:
        """What ``env`` means: grouping, gym id, name prefix."""
        return TRAINED_ENVS[self.env]

    @property
    def routes(self) -> bool:
        """Whether the controller runs on the route env (``agents.routing_base.is_route_policy``)."""
        return self.on.grouping == "item"

    def fixed_env(self) -> dict[str, Any]:
        """The env arguments the controller needs beyond its own units: a per-generator observation block counts
        candidates against N_max per generator and spend against B, neither rescaled, so such an env is built
        with the training values (``Policy.env_kwargs``); its problem featurizer when it was trained with one;
        nothing else for a replay-env controller."""
        out = {} if self.problem_features is None else {"problem_features": self.problem_features}
        if self.n_max_per_generator is None:
            return out
        return {"budget": self.budget, "n_max": self.n_max_per_generator, **out}

    def with_problem_features(self, directory: str | Path) -> TrainedEnv:
        """This trained env with the problem featurizer saved in the checkpoint ``directory``, if it holds one."""
        from dataclasses import replace

        from coba_env.featurizer_files import has_featurizer, load_featurizer

        return replace(self, problem_features=load_featurizer(directory)) if has_featurizer(directory) else self

    def mismatch(self, env: Any) -> str:
        """Why ``env`` cannot run the controller ("" when it can): another grouping, other actions or features,
        another N_max, or (per-generator features) another budget B."""
        base = getattr(env, "unwrapped", env)
        if base.config.grouping != self.on.grouping:
            gym_ids = {v.grouping: v.gym_id for v in TRAINED_ENVS.values()}
            return f"trained on {self.on.gym_id} ({self.env} env); the env is {gym_ids[base.config.grouping]}"
        why = layout_mismatch(base, self.actions, self.features)
        if why:
            return why
        trained, unit = (self.n_max_per_generator, " per generator") if self.n_max_per_generator else (self.n_max, "")
        env_n_max = getattr(base, "n_max_per_generator", None) if self.n_max_per_generator else base.n_max
        if trained is not None and env_n_max != trained:
            return f"trained with N_max = {trained}{unit}, the env has {env_n_max}"
        if self.n_max_per_generator is not None and not math.isclose(float(base.budget), self.budget, rel_tol=1e-9):
            return f"trained with budget B = {self.budget:g}, the env has {float(base.budget):g}"
        return ""


def _is_checkpoint_dir(path: str) -> bool:
    """Whether ``path`` is a directory holding a controller.json."""
    return (Path(path) / CONFIG_FILE).is_file()


def split_spec(spec: str | Path) -> tuple[Path, float | None]:
    """``"DIR@0.2"`` -> (DIR, 0.2); ``"DIR"`` -> (DIR, None) (``agents.policy_spec``: the suffix is read only when
    DIR is a checkpoint)."""
    return split_at_lambda(spec, _is_checkpoint_dir) or (Path(str(spec)), None)


def is_checkpoint(spec: str | Path) -> bool:
    """Whether ``spec`` (a path, optionally ``PATH@LAMBDA``) names a checkpoint directory."""
    return names_saved(spec, _is_checkpoint_dir)  # the lambda is not parsed here: a bad one is reported on load


def read_config(directory: str | Path, kind: str | None = None) -> dict[str, Any]:
    """The JSON object in ``directory/controller.json``, its ``kind`` checked (``kind``, else any of ``kinds()``).

    Raises ``FileNotFoundError`` when the file is missing and ``ValueError`` when it is not valid JSON, not a
    JSON object, or has the wrong ``kind``; each message names the file (and the field).
    """
    cfg = Path(directory) / CONFIG_FILE
    what = f"{kind.upper()} checkpoint" if kind else "controller checkpoint"
    if not cfg.is_file():
        raise FileNotFoundError(f"{cfg}: missing; not a {what} directory (no {CONFIG_FILE})")
    try:
        data = json.loads(cfg.read_bytes())
    except PARSE_ERRORS as exc:  # malformed, not UTF-8, nested too deep, a number of thousands of digits
        raise ValueError(f"{cfg}: not valid JSON ({parse_problem(exc)})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{cfg}: expected a JSON object, got {type(data).__name__}")
    expected = (kind,) if kind else kinds()
    if data.get("kind") not in expected:
        want = repr(kind) if kind else f"one of {list(expected)}"
        raise ValueError(f"{cfg}: field 'kind' is {data.get('kind')!r}; expected {want}")
    return data


def checkpoint_kind(path: str | Path) -> str:
    """The ``kind`` field of ``path/controller.json`` (raises naming the file and the field when invalid)."""
    return read_config(path)["kind"]
