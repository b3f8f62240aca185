"""ActionGate: the hooks through which a composed evidence source takes part in a ``CoBaEnv`` episode.

``CoBaEnv(gate=...)`` consults its gate (``LiveEnv``'s ``LiveGate`` fetches evidence online and keeps hard
budgets); without one (replay) none of these run. The gate reads the env through its public API only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: coba_env.env imports this module
    from coba_env.env import CoBaEnv


class ActionGate:
    """No-op hooks; a subclass overrides those it needs."""

    def blocked(self, env: CoBaEnv, candidates: int) -> int:
        """Bits of the actions in ``candidates`` (legal calls by the env's rules) that must not be taken now.

        The env removes them from its mask; STOP becomes legal when nothing else is (``rules.masks.mask_bits``).
        """
        return 0

    def illegal_reason(self, env: CoBaEnv, action: int) -> str | None:
        """Why a blocked ``action`` is illegal (the ``ValueError`` text), or None for the env's own reason."""
        return None

    def before(self, env: CoBaEnv, action: int) -> int:
        """Called with a legal non-STOP ``action`` before the env applies it; returns the action to apply
        (STOP when the gate ended the episode's calls, after which ``blocked`` blocks every call)."""
        return action

    def on_stop(self, env: CoBaEnv, legal: int) -> dict[str, Any]:
        """Fields merged into the final ``info`` at STOP; ``legal`` holds the actions legal when STOP was chosen."""
        return {}
