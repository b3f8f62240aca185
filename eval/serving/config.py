"""What ``coba serve`` fixes at start: endpoints, the policies a request may pick, and every limit."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pools.client.openai_client import Endpoint
from pools.client.prompts import SamplingSettings

__all__ = ["ServeConfig"]


@dataclass(frozen=True)
class ServeConfig:
    """Settings of one server. A request may lower the budgets and pick among ``policies``; never more.

    Endpoints: ``generators`` (name -> endpoint; one, or several for a routing policy) and ``judges``
    (tier V1/V2/V3 -> endpoint). Budgets per request (``max_tokens``, ``max_calls``, ``max_seconds``) are the
    live env's hard limits; ``max_seconds`` is also the request's timeout, counted from its arrival (time in
    the queue included). ``sampling`` is how the generator samples when a request says nothing else; its
    ``max_tokens`` caps one generator call's output (a request's ``max_tokens`` may be lower).
    """

    generators: dict[str, Endpoint]
    judges: dict[str, Endpoint]
    policy: str
    also_allow: tuple[str, ...] = ()
    policies_file: str | None = None
    served_name: str = "coba"
    lam: float | None = None
    lambda_range: tuple[float, float] = (0.0, 1.0)
    max_tokens: float | None = None
    max_calls: int = 64
    max_seconds: float = 300.0
    sampling: SamplingSettings = field(default_factory=lambda: SamplingSettings(n=1))
    cost: str = "p_tokens"
    n_max: int | None = None
    budget: float | None = None
    reference: str | None = None
    call_timeout: float = 600.0
    max_attempts: int = 3
    upstream_api_key: str | None = field(default=None, repr=False)
    api_key: str | None = field(default=None, repr=False)
    concurrency: int = 8
    queue: int = 32
    endpoint_concurrency: int = 4
    max_body_bytes: int = 1 << 20
    max_messages: int = 64
    keepalive_s: float = 10.0
    record: Path | None = None
    dataset: str = "served"

    @property
    def policies(self) -> tuple[str, ...]:
        """Every policy a request may ask for, the default first."""
        return tuple(dict.fromkeys((self.policy, *self.also_allow)))
