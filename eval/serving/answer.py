"""What one served request produced: the answer, the computation path, the usage and the pool records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Answer", "RequestCancelled"]


class RequestCancelled(RuntimeError):
    """The client went away (or the server stops): no further internal call is made."""


@dataclass
class Answer:
    """What one served request produced (``status``: ok, failed, cancelled or expired)."""

    request_id: str
    status: str
    policy: str
    lam: float
    text: str | None = None
    answer: str | None = None
    finish_reason: str = "stop"
    selected_candidate: int = -1
    selected_generator: str | None = None
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0,
                                                            "total_tokens": 0})
    path: list[dict[str, Any]] = field(default_factory=list)
    costs: dict[str, float] = field(default_factory=dict)
    stop_reason: str = ""
    correct: bool | None = None
    spent: dict[str, float] = field(default_factory=dict)
    limits: dict[str, Any] = field(default_factory=dict)
    episodes: list[list[dict[str, Any]]] = field(default_factory=list)
    error: str | None = None
