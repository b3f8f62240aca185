"""Prompt files and how one model call is made: load a prompt spec, fill it in, call a client, sample settings.

Shared by the generation pipeline (``pools.generation``) and the live path (``coba_env.live_sources``).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pools.client.openai_client import Completion
from pools.errors import PoolError

__all__ = ["PROMPTS_DIR", "SamplingSettings", "call_prompt", "chat_messages", "derive_seed", "load_prompt", "render"]

PROMPTS_DIR = Path(__file__).resolve().parents[1] / "data" / "prompts"

# --------------------------------------------------------------------------------------------------
# Prompts
# --------------------------------------------------------------------------------------------------


def load_prompt(name_or_path: str | os.PathLike[str]) -> dict[str, Any]:
    """A prompt spec (YAML mapping with ``user`` and optional ``system``) by file path or by name in PROMPTS_DIR."""
    path = Path(name_or_path)
    if not path.is_file():
        path = PROMPTS_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        raise PoolError(f"prompt file not found; expected a path or one of "
                        f"{sorted(p.stem for p in PROMPTS_DIR.glob('*.yaml'))}", file=str(name_or_path))
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise PoolError(f"not a readable YAML prompt file ({' '.join(str(exc).split())[:200]})",
                        file=str(path)) from None
    if not isinstance(spec, dict) or not isinstance(spec.get("user"), str):
        raise PoolError("expected a YAML mapping with a 'user' template", file=str(path), field="user")
    spec["_path"] = str(path)
    return spec


def render(template: str, **values: Any) -> str:
    """Replace each ``{{name}}`` in ``template``; braces elsewhere (LaTeX) are left alone."""
    for name, value in values.items():
        template = template.replace("{{" + name + "}}", str(value))
    return template


def chat_messages(spec: dict[str, Any], **values: Any) -> list[dict[str, str]]:
    """The chat messages of a prompt spec with ``values`` filled in."""
    messages = []
    if spec.get("system"):
        messages.append({"role": "system", "content": render(spec["system"], **values)})
    messages.append({"role": "user", "content": render(spec["user"], **values)})
    return messages


def call_prompt(client: Any, api: str, messages: list[dict[str, str]], **params: Any) -> Completion:
    """One chat call, or with ``api="completions"`` one text completion of the messages joined as plain text."""
    if api == "chat":
        return client.chat(messages, **params)
    return client.complete("\n\n".join(m["content"] for m in messages), **params)


@dataclass
class SamplingSettings:
    """How candidates are sampled; stored on every journal line so a resumed run cannot silently change them."""

    n: int = 16
    temperature: float = 0.6
    top_p: float = 0.95
    max_tokens: int = 4096
    seed: int = 0
    n_per_request: int = 1
    api: str = "chat"
    prompt: str = "generate"

    def journal_settings(self, prompt_spec: dict[str, Any]) -> dict[str, Any]:
        """The settings that must match across runs of one work dir (the prompt by content hash)."""
        digest = hashlib.sha256(json.dumps({k: v for k, v in prompt_spec.items() if k != "_path"},
                                           sort_keys=True).encode()).hexdigest()[:16]
        return {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens,
                "api": self.api, "base_seed": self.seed, "prompt_sha256": digest}


def derive_seed(base: int, *parts: Any) -> int:
    """A reproducible 31-bit seed for one request from the base seed and the request's identity."""
    text = json.dumps([base, *parts], ensure_ascii=False)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") & 0x7FFFFFFF
