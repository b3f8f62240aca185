"""The rules of an episode, each written once, with its scalar and batched (numpy) forms side by side.

| rule | module |
|---|---|
| actions, tiers, action ids | ``coba_env.rules.actions`` |
| observation features: THE feature table (names, meanings, indices, bounds) | ``coba_env.rules.feature_table`` |
| observation features: the rule computing them | ``coba_env.rules.features`` |
| fusion rank R (paper Eq. 3) | ``coba_env.rules.fusion`` |
| legal-action mask and illegal-action reasons | ``coba_env.rules.masks`` |
| VERIFY target | ``coba_env.rules.verify`` |
| STOP selection | ``coba_env.rules.selection`` |
| verifier roles: which stored verifier serves each role a policy asks for | ``coba_env.rules.roles`` |
| validated env configuration (argument checks, defaults) | ``coba_env.rules.config`` |

``CoBaEnv``, ``CoBaVectorEnv``, ``LiveEnv`` and ``train.oracle_model`` all call these modules; no other
module restates a rule. (This package imports nothing itself, so any rule module imports cheaply.)
"""
