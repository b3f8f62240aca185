"""Controller checkpoint directories: ``controller.json`` (its ``kind``, configuration) and ``PATH@LAMBDA`` specs.

Shared by the MLP and PPO controllers (``agents.learned_mlp``, ``agents.learned_ppo``) and by the loader that
dispatches between them (``agents.learned``), which imports those modules; this module imports none of them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from coba_env.rules.config import LAM_MAX
from coba_env.rules.features import LAMBDA
from pools.parse_boundary import PARSE_ERRORS, parse_problem

CONFIG_FILE = "controller.json"
KINDS = ("mlp", "ppo")
#: Observation index of the cost weight lambda, which a controller fixed at a lambda overwrites.
LAMBDA_INDEX = LAMBDA


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
