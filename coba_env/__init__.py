"""The Gymnasium environment over a compiled candidate pool (imports only ``pools``).

``gymnasium.make("coba/Replay-v0")`` replays the embedded default pool, one (item, generator) pair per episode;
pass ``pool=...`` for another. ``gymnasium.make("coba/Route-v0")`` is the same env with ``grouping="item"``: one
episode per item, routing between the pool's generators (``CoBaEnv``, ``CoBaVectorEnv``).
"""

from gymnasium.envs.registration import register, registry

from coba_env.compiled import CompiledPool, compile_pool
from coba_env.costs import COST_MEASURES
from coba_env.env import CoBaEnv, action_names
from coba_env.evidence import Evidence
from coba_env.rules.actions import ActionLayout
from coba_env.rules.config import EnvConfig
from coba_env.rules.features import FEATURE_NAMES, FEATURES, FeatureLayout
from coba_env.rules.selection import SelectionRule
from coba_env.vector_env import CoBaVectorEnv

if "coba/Replay-v0" not in registry:
    # No max_episode_steps (so no TimeLimit wrapper): every episode ends on STOP within
    # CoBaEnv.max_steps actions. disable_env_checker=True leaves out gymnasium's PassiveEnvChecker, which
    # only inspects the first reset/step and then forwards every call (a per-step cost in a replay env
    # stepped millions of times); the tests run gymnasium's and SB3's full check_env on CoBaEnv instead.
    # gymnasium.make("coba/Replay-v0", disable_env_checker=False) puts the passive checker back.
    # order_enforce=False leaves out gymnasium's OrderEnforcing wrapper (another Python call on every step): the
    # env enforces the order itself (step before reset or after STOP raises RuntimeError; render before reset
    # returns None).
    # vector_entry_point: gymnasium.make_vec(..., vectorization_mode="vector_entry_point") builds the numpy
    # CoBaVectorEnv (as CartPole-v1 does with its CartPoleVectorEnv), not a SyncVectorEnv of single envs.
    register(id="coba/Replay-v0", entry_point="coba_env.env:CoBaEnv",
             vector_entry_point="coba_env.vector_env:CoBaVectorEnv", disable_env_checker=True,
             order_enforce=False)
if "coba/Route-v0" not in registry:
    # The same env with the item grouping: one episode per (dataset, item), one SAMPLE per generator; the same
    # registration choices.
    register(id="coba/Route-v0", entry_point="coba_env.env:CoBaEnv",
             vector_entry_point="coba_env.vector_env:CoBaVectorEnv", disable_env_checker=True,
             order_enforce=False, kwargs={"grouping": "item"})

__all__ = [
    "COST_MEASURES",
    "ActionLayout",
    "FEATURES",
    "FEATURE_NAMES",
    "CoBaEnv",
    "CoBaVectorEnv",
    "CompiledPool",
    "EnvConfig",
    "FeatureLayout",
    "Evidence",
    "SelectionRule",
    "action_names",
    "compile_pool",
]
