"""The one policy interface shared by fixed rules, the evaluator-side oracle and learned controllers."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from coba_env.env import CoBaEnv
from coba_env.evidence import Evidence
from coba_env.rules.actions import REPLAY_LAYOUT, ActionLayout
from coba_env.rules.roles import PAPER_ROLE_MAP, RoleMap


class Policy(ABC):
    """A routing policy: given what the environment revealed, choose SAMPLE, VERIFY_l or STOP.

    A policy sees the observation vector, the action mask and the episode's label-free ``Evidence``
    (``env.unwrapped.evidence``), never correctness labels. ``selection`` is the STOP rule the env is
    configured with for this policy (a ``SelectionRule`` spec). Verifiers are asked for by *role*, named
    by the paper's tiers (V1 cheap judge, V2 process judge, V3 strong verifier): ``requires_tiers`` lists
    the roles the policy calls, ``optional_tiers`` those of them it runs without (reported as not applicable
    only when a required, non-optional role has no verifier). The env's role map
    (``coba_env.rules.roles``, bound by ``reset``) says which of the pool's verifiers serves each role;
    ``verify_for(role)`` is the VERIFY action to call it with.
    """

    name: str = "policy"
    label: str = "Policy"
    group: ClassVar[str] = "baseline"  # "coba", "baseline", "oracle" or "learned"
    uses_labels: ClassVar[bool] = False
    requires_tiers: tuple[str, ...] = ()
    optional_tiers: tuple[str, ...] = ()
    selection: Any = None
    #: The role map of the env the policy runs in (the paper's identity map until ``bind``).
    roles: RoleMap = PAPER_ROLE_MAP
    #: The action layout of the env the policy runs in (``bind`` / ``start_batch`` take the env's).
    layout: ActionLayout = REPLAY_LAYOUT
    #: Whether the policy decides or selects by comparing candidates' answers (votes, agreement, answer shares):
    #: it cannot run where a generator's candidates hold no answers, only outcomes (``answers_problem``).
    compares_answers: ClassVar[bool] = False
    #: The SAMPLE action the policy draws with (the layout's first generator; a routing policy picks its own
    #: generator in ``use_layout``) and the STOP action.
    sample_id: int = REPLAY_LAYOUT.sample_action()
    stop_id: int = REPLAY_LAYOUT.stop_action

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass that sets no ``name`` / ``label`` of its own is shown under its class name, not "policy"."""
        super().__init_subclass__(**kwargs)
        inherited = {"policy", "Policy", *(base.__name__ for base in cls.__mro__[1:])}
        if "name" not in vars(cls) and cls.name in inherited:
            cls.name = cls.__name__
        if "label" not in vars(cls) and cls.label in inherited:
            cls.label = cls.name

    def env_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``CoBaEnv`` that this policy needs (its selection rule)."""
        return {"selection": self.selection} if self.selection is not None else {}

    def wanted_candidates(self) -> int:
        """The candidates per episode the policy is defined by (best-of-n's n), 0 when none: on an episode holding
        fewer it takes what there is, and the bench says so (``eval.short_episodes``)."""
        return 0

    def applicable(self, env: CoBaEnv) -> tuple[bool, str]:
        """Whether the policy can run on ``env``'s pool (a verifier serves every required role), and why not."""
        for need in self.requires_tiers:
            if need not in self.optional_tiers and env.roles.slot(need) is None:
                return False, env.roles.missing_reason(need)
        return True, ""

    def answers_problem(self, env: CoBaEnv) -> str:
        """Why the policy cannot run on ``env``'s pool for want of answers to compare ("" when it can): the pool
        holds outcomes only (an outcome table without answers) for some generators."""
        answerless = env.config.pool.answerless_generators
        if not self.compares_answers or not answerless:
            return ""
        named = ", ".join(answerless[:3]) + (f" and {len(answerless) - 3} more" if len(answerless) > 3 else "")
        return (f"compares the candidates' answers, but the pool records outcomes only (no answers) for "
                f"{named}; policies that need no answers (the oracles, routers by the prompt) run")

    def bind(self, env: CoBaEnv) -> None:
        """Use ``env``'s role map for ``verify_for`` and its action layout (``reset`` calls it)."""
        self.roles = env.roles
        self.use_layout(env.layout, env)

    def use_layout(self, layout: ActionLayout, env: Any = None) -> None:
        """Take the action ids from ``layout`` (``env``: the one- or many-episode env it belongs to)."""
        self.layout = layout
        self.sample_id, self.stop_id = layout.sample_action(), layout.stop_action

    def verify_for(self, need: str) -> int | None:
        """The VERIFY action id of the verifier serving role ``need`` (V1/V2/V3), or None when none does."""
        slot = self.roles.slot(need)
        return None if slot is None else self.layout.verify_action(slot)

    def reset(self, env: CoBaEnv) -> None:
        """Called at the start of every episode (after ``env.reset``): binds the env's role map."""
        self.bind(env)

    @abstractmethod
    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """Choose the next action id (ids from ``self.layout``: SAMPLE = 0, VERIFY_V1..V3 = 1..3, STOP = 4 in replay)."""

    # -- batched form: the same rule over many episodes of a ``CoBaVectorEnv`` at once --------------------
    #: Whether ``act_batch`` is this policy's rule for whole batches (a batched twin of ``act``). A policy
    #: without one keeps the default ``act_batch`` below, and the bench replays it one episode at a time.
    batched: ClassVar[bool] = False

    #: Whether ``act_batch`` reads its ``observations`` argument (or the vector env's observation-only sums
    #: ``len_sum`` and ``clogc_sum``, not kept without observations). Counted only on the class that defines
    #: ``act_batch`` (``observes_in_batch``), so a subclass with its own ``act_batch`` observes unless it says not.
    batch_reads_observations: ClassVar[bool] = True

    def observes_in_batch(self) -> bool:
        """Whether the batched replay must build observations for ``act_batch``: ``batch_reads_observations`` as
        declared by the class that defines ``act_batch`` (True when it declares nothing)."""
        for cls in type(self).__mro__:
            if "act_batch" in vars(cls):
                return bool(vars(cls).get("batch_reads_observations", True))
        return True

    def supports_batch(self, venv: Any) -> bool:
        """Whether ``act_batch`` can run on ``venv`` (a ``CoBaVectorEnv``); the replay falls back otherwise."""
        return self.batched

    def start_batch(self, venv: Any, rows: np.ndarray | None) -> None:
        """``rows`` of ``venv`` start new episodes (None: every row, after ``venv.reset``); binds its role map.

        The batched twin of ``reset``: policies with per-episode state clear it for those rows here.
        """
        if rows is None:
            self.roles = venv.config.roles
            self.use_layout(venv.layout, venv)

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """The next action of every row [B] given observations [B, F] and masks [B, A].

        Default: the scalar ``act`` row by row, without evidence; right only for a policy whose ``act`` reads
        the observation and mask alone. Policies reading ``Evidence`` override it (and set ``batched``),
        reading the same quantities from ``venv``'s state arrays (``agents.batch_evidence``).
        """
        from agents.policy_calls import action_id

        n_actions = action_masks.shape[1]
        return np.array([action_id(self, self.act(o, m, None), "a batch", n_actions)
                         for o, m in zip(observations, action_masks, strict=True)], dtype=np.int64)

    def describe(self) -> dict[str, Any]:
        """A JSON-friendly description (name, label, group and parameters)."""
        return {"name": self.name, "label": self.label, "group": self.group}
