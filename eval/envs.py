"""``--env``: the command line's names for the two episode groupings (``coba_env.rules.config.GROUPINGS``).

"replay" is ``coba/Replay-v0``, one episode per (problem, generator), grouping "pair"; "route" is
``coba/Route-v0``, one episode per problem with all its generators, grouping "item". Kept apart (no imports) so
that the command line can offer the choices without loading the policies.
"""

from __future__ import annotations

#: ``--env`` value -> the episode grouping it replays.
ENV_GROUPING: dict[str, str] = {"replay": "pair", "route": "item"}
#: The ``--env`` choices, the default first.
ENV_NAMES: tuple[str, ...] = tuple(ENV_GROUPING)
