"""The Gymnasium environment over a compiled candidate pool (imports only ``pools``).

``gymnasium.make("coba/Replay-v0")`` replays the embedded default pool; pass ``pool=...`` for another.
"""

from gymnasium.envs.registration import register, registry

from coba_env.compiled import CompiledPool, compile_pool
from coba_env.costs import COST_MEASURES
from coba_env.env import CoBaEnv, action_names
from coba_env.evidence import FEATURE_NAMES, FEATURES, Evidence
from coba_env.selection import SelectionRule

if "coba/Replay-v0" not in registry:
    # No max_episode_steps (so no TimeLimit wrapper): every episode ends on STOP within
    # CoBaEnv.max_steps actions. disable_env_checker=True leaves out gymnasium's PassiveEnvChecker, which
    # only inspects the first reset/step and then forwards every call (a per-step cost in a replay env
    # stepped millions of times); the tests run gymnasium's and SB3's full check_env on CoBaEnv instead.
    # gymnasium.make("coba/Replay-v0", disable_env_checker=False) puts the passive checker back.
    register(id="coba/Replay-v0", entry_point="coba_env.env:CoBaEnv", disable_env_checker=True)

__all__ = [
    "COST_MEASURES",
    "FEATURES",
    "FEATURE_NAMES",
    "CoBaEnv",
    "CompiledPool",
    "Evidence",
    "SelectionRule",
    "action_names",
    "compile_pool",
]
