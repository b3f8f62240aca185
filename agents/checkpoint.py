"""Controller checkpoint directories: ``controller.json`` (its ``kind``, configuration) and ``PATH@LAMBDA`` specs.

Shared by the MLP and PPO controllers (``agents.learned_mlp``, ``agents.learned_ppo``) and by the loader that
dispatches between them (``agents.learned``), which imports those modules; this module imports none of them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from coba_env.rules.actions import REPLAY_LAYOUT
from coba_env.rules.config import LAM_MAX
from coba_env.rules.features import LAMBDA_FROM_END, PAPER_FEATURE_LAYOUT
from pools.parse_boundary import PARSE_ERRORS, parse_problem

CONFIG_FILE = "controller.json"
KINDS = ("mlp", "ppo")
#: Observation index (from the end) of the cost weight lambda, which a controller fixed at a lambda overwrites.
LAMBDA_INDEX = LAMBDA_FROM_END


def trained_layout(config: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(action names, observation feature names) a controller was trained with: the checkpoint's ``actions`` and
    ``observation``; a checkpoint written before layouts were stored was trained on the paper layout."""
    actions = config.get("actions") or REPLAY_LAYOUT.names
    features = config.get("observation") or PAPER_FEATURE_LAYOUT.names
    return tuple(str(a) for a in actions), tuple(str(f) for f in features)


def layout_mismatch(env: Any, actions: tuple[str, ...], features: tuple[str, ...]) -> str:
    """Why ``env``'s actions or observation differ from a controller's trained ones ("" when they match)."""
    if tuple(env.layout.names) != actions:
        return f"trained on the actions {list(actions)}; the env has {list(env.layout.names)}"
    names = tuple(getattr(env, "feature_names", None) or env.features.names)
    if names != features:
        return f"trained on {len(features)} observation features; the env's {len(names)} differ ({names[:3]}...)"
    return ""


def split_spec(spec: str | Path) -> tuple[Path, float | None]:
    """``"DIR@0.2"`` -> (DIR, 0.2); ``"DIR"`` -> (DIR, None). The suffix is read only when DIR is a checkpoint."""
    text = str(spec)
    if "@" in text:
        head, _, tail = text.rpartition("@")
        if (Path(head) / CONFIG_FILE).is_file():
            try:
                lam = float(tail)
            except ValueError:
                raise ValueError(f"checkpoint spec {text!r}: expected PATH@LAMBDA with a number after '@', "
                                 f"got {tail!r}") from None
            if not (math.isfinite(lam) and lam >= 0):
                raise ValueError(f"checkpoint spec {text!r}: expected a finite lambda >= 0 after '@', got {tail!r}")
            if lam > LAM_MAX:
                raise ValueError(f"checkpoint spec {text!r}: expected a lambda from 0 to {LAM_MAX:g} (the env's "
                                 f"range) after '@', got {tail!r}")
            return Path(head), lam
    return Path(text), None


def is_checkpoint(spec: str | Path) -> bool:
    """Whether ``spec`` (a path, optionally ``PATH@LAMBDA``) names a checkpoint directory."""
    text = str(spec)  # the lambda is not parsed here: a bad one is reported when the checkpoint is loaded
    head = text.rpartition("@")[0] if "@" in text else text
    return (Path(head) / CONFIG_FILE).is_file() or (Path(text) / CONFIG_FILE).is_file()


def read_config(directory: str | Path, kind: str | None = None) -> dict[str, Any]:
    """The JSON object in ``directory/controller.json``, its ``kind`` checked (``kind``, else any of ``KINDS``).

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
    expected = (kind,) if kind else KINDS
    if data.get("kind") not in expected:
        want = repr(kind) if kind else f"one of {list(KINDS)}"
        raise ValueError(f"{cfg}: field 'kind' is {data.get('kind')!r}; expected {want}")
    return data


def checkpoint_kind(path: str | Path) -> str:
    """The ``kind`` field of ``path/controller.json`` (raises naming the file and the field when invalid)."""
    return read_config(path)["kind"]
