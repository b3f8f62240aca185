"""Actions: the action layout (ids and names built from the generators and verifiers), and the tier axis.

An ``ActionLayout`` is data: the generators an episode may sample from and the verifiers it may call, in order.
Its ids are ``SAMPLE_<g>`` for each generator (0..G-1), ``VERIFY_<v>`` for each verifier (G..G+V-1), then
``STOP`` (G+V). Everything outside this module asks the layout (``is_sample``, ``generator_of``, ``is_verify``,
``verifier_of``, ``stop_action``...) instead of testing ids.

``coba/Replay-v0`` has one generator per episode (the episode's own, named ``SAMPLE`` as always) and the pool's
verifiers (``coba_env.compiled.verifier_axis``: on every pool whose verifiers carry the paper's names the axis is
V1, V2, V3, so the ids are 0..4; a verifier that is disabled or absent is simply never legal, see
``coba_env.rules.masks``). ``coba/Route-v0`` has one SAMPLE per generator of the pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pools.schema import TIERS


@dataclass(frozen=True)
class ActionLayout:
    """The discrete actions of an env: one SAMPLE per generator, one VERIFY per verifier, STOP last.

    ``generators``: generator names in order; the single unnamed generator ``("",)`` is the pair grouping's
    "the episode's generator" and its action is named plain ``SAMPLE``. ``verifiers``: verifier (tier) names.
    """

    generators: tuple[str, ...] = ("",)
    verifiers: tuple[str, ...] = TIERS
    names: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        gens, vers = tuple(self.generators), tuple(self.verifiers)
        if not gens:
            raise ValueError("an action layout needs at least one generator")
        if len(set(gens)) != len(gens) or len(set(vers)) != len(vers):
            raise ValueError(f"generator and verifier names must be unique, got {list(gens)} and {list(vers)}")
        object.__setattr__(self, "generators", gens)
        object.__setattr__(self, "verifiers", vers)
        samples = ["SAMPLE"] if gens == ("",) else [f"SAMPLE_{g}" for g in gens]
        object.__setattr__(self, "names", (*samples, *[f"VERIFY_{v}" for v in vers], "STOP"))

    @property
    def n_generators(self) -> int:
        """Number of SAMPLE actions G."""
        return len(self.generators)

    @property
    def n_verifiers(self) -> int:
        """Number of VERIFY actions V."""
        return len(self.verifiers)

    @property
    def n_actions(self) -> int:
        """Size of the Discrete action space: G + V + 1."""
        return len(self.generators) + len(self.verifiers) + 1

    @property
    def stop_action(self) -> int:
        """The id of STOP (the last id)."""
        return len(self.generators) + len(self.verifiers)

    def sample_action(self, generator: int = 0) -> int:
        """The id of SAMPLE from generator index ``generator``."""
        return generator

    def verify_action(self, verifier: int) -> int:
        """The id of VERIFY with verifier (tier) index ``verifier``."""
        return len(self.generators) + verifier

    def is_sample(self, action: int) -> bool:
        """Whether ``action`` is a SAMPLE."""
        return 0 <= action < len(self.generators)

    def generator_of(self, action: int) -> int:
        """The generator index a SAMPLE action draws from."""
        return action

    def is_verify(self, action: int) -> bool:
        """Whether ``action`` is a VERIFY."""
        return len(self.generators) <= action < self.stop_action

    def verifier_of(self, action: int) -> int:
        """The verifier (tier) index a VERIFY action calls (works on numpy arrays too)."""
        return action - len(self.generators)

    def is_stop(self, action: int) -> bool:
        """Whether ``action`` is STOP."""
        return action == self.stop_action

    def action_id(self, name: str) -> int:
        """The id of the action named ``name``; ValueError naming the known names."""
        try:
            return self.names.index(name)
        except ValueError:
            raise ValueError(f"unknown action {name!r}; expected one of {list(self.names)}") from None


#: The paper's replay layout: one generator (the episode's), the verifiers V1, V2, V3: SAMPLE=0, VERIFY_V1..V3=1..3,
#: STOP=4 (the layout of every pool whose verifiers carry the paper's names; learned controllers' default).
REPLAY_LAYOUT = ActionLayout()


def action_names(verifiers: Sequence[str]) -> list[str]:
    """Names of a replay env's discrete actions with ``verifiers``: SAMPLE, VERIFY_<verifier>..., STOP."""
    return list(ActionLayout(verifiers=tuple(verifiers)).names)
