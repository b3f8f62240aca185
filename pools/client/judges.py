"""Judge calls: score one solution with a V1/V3 yes-no judge or the V2 step judge (one model call).

Judges are described by prompt files in ``pools/data/prompts`` (``v1_judge.yaml``, ``v2_steps.yaml``,
``v3_judge.yaml``; each file documents its scoring). Used by ``pools.generation.verify_calls`` (journaled
batch scoring) and by the live path.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from pools.client.openai_client import Choice, Completion
from pools.client.prompts import call_prompt, chat_messages
from pools.errors import PoolError
from pools.tokens import estimate_tokens

__all__ = ["DEFAULT_JUDGES", "JudgeOutcome", "judge", "parse_steps", "split_steps", "steps_score", "yes_no_score"]

#: Tier -> prompt file name (in ``pools/data/prompts``) used when no ``--prompt`` is given.
DEFAULT_JUDGES: dict[str, str] = {"V1": "v1_judge", "V2": "v2_steps", "V3": "v3_judge"}
#: Verifier role -> the prompt its paper tier uses (a verifier with another name is prompted by its role).
ROLE_JUDGES: dict[str, str] = {"cheap_judge": "v1_judge", "process_judge": "v2_steps",
                               "strong_verifier": "v3_judge", "reward_model": "v3_judge"}

_WORD = re.compile(r"[a-z]+")
_STEP_VERDICT = re.compile(r"step\s*(\d+)\s*[:.)\-]*\s*\**\s*(incorrect|correct|wrong|right|yes|no)\b", re.I)
_POSITIVE = {"correct", "right", "yes"}


@dataclass
class JudgeOutcome:
    """One judge call: score in [0, 1] or None (no usable score), how it was read, tokens, latency, reply."""

    score: float | None
    method: str  # "logprobs", "text", "steps" or "unparsed"
    prompt_tokens: int | None
    output_tokens: int | None
    latency_s: float
    reply: str


def _word(token: str) -> str:
    match = _WORD.search(token.lower())
    return match.group(0) if match else ""


def yes_no_score(choice: Choice, spec: dict[str, Any]) -> tuple[float | None, str]:
    """P(yes) / (P(yes) + P(no)) from the first token's top log-probs, else the reply text (see v1_judge.yaml)."""
    yes_words = {w.lower() for w in spec.get("yes_tokens", ["yes"])}
    no_words = {w.lower() for w in spec.get("no_tokens", ["no"])}
    if choice.first_top_logprobs:
        p_yes = p_no = 0.0
        for token, logprob in choice.first_top_logprobs.items():
            word = _word(token)
            if word in yes_words:
                p_yes += math.exp(logprob)
            elif word in no_words:
                p_no += math.exp(logprob)
        if p_yes + p_no > 0:
            return p_yes / (p_yes + p_no), "logprobs"
    # Bare yes/no keys in YAML load as booleans; accept either spelling.
    text_scores = {str(k).lower().replace("true", "yes").replace("false", "no"): v
                   for k, v in (spec.get("text_scores") or {"yes": 1.0, "no": 0.0}).items()}
    first = _word(choice.text)
    if first in yes_words:
        return float(text_scores["yes"]), "text"
    if first in no_words:
        return float(text_scores["no"]), "text"
    return None, "unparsed"


def split_steps(text: str, max_steps: int = 20) -> list[str]:
    """Paragraphs of a solution (split at blank lines); paragraphs past ``max_steps`` join the last step."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text or "") if p.strip()]
    if not paragraphs:
        return [(text or "").strip() or "(empty)"]
    if len(paragraphs) > max_steps:
        paragraphs = paragraphs[: max_steps - 1] + ["\n\n".join(paragraphs[max_steps - 1:])]
    return paragraphs


def parse_steps(reply: str, n_steps: int) -> dict[int, bool]:
    """Step number -> judged correct, from lines like "Step 3: incorrect" (first verdict per step wins)."""
    verdicts: dict[int, bool] = {}
    for number, word in _STEP_VERDICT.findall(reply or ""):
        k = int(number)
        if 1 <= k <= n_steps and k not in verdicts:
            verdicts[k] = word.lower() in _POSITIVE
    return verdicts


def steps_score(reply: str, n_steps: int, aggregate: str = "fraction") -> tuple[float | None, str]:
    """Aggregate per-step verdicts: ``fraction`` judged correct, or ``min`` (1 only if all are correct)."""
    verdicts = parse_steps(reply, n_steps)
    if not verdicts:
        return None, "unparsed"
    if aggregate == "min":
        return float(all(verdicts.values())), "steps"
    if aggregate != "fraction":
        raise ValueError(f"unknown aggregate {aggregate!r}; expected 'fraction' or 'min'")
    return sum(verdicts.values()) / len(verdicts), "steps"


def _clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, keeping its head and its tail (where the final answer is)."""
    if len(text) <= limit:
        return text
    head = limit // 4
    return text[:head] + "\n[...]\n" + text[len(text) - (limit - head):]


def judge(client: Any, spec: dict[str, Any], problem: str, solution: str, *, api: str = "chat") -> JudgeOutcome:
    """Score one solution with the judge described by ``spec`` (a loaded prompt file)."""
    mode = spec.get("mode", "yes_no")
    solution = _clip(solution or "", int(spec.get("max_solution_chars", 12000)))
    params: dict[str, Any] = {"temperature": spec.get("temperature", 0.0), "max_tokens": spec.get("max_tokens"),
                              "extra_body": spec.get("request") or None}
    if mode == "yes_no":
        messages = chat_messages(spec, problem=problem, solution=solution)
        params["top_logprobs"] = spec.get("top_logprobs", 20)
    elif mode == "steps":
        steps = split_steps(solution, int(spec.get("max_steps", 20)))
        numbered = "\n\n".join(f"Step {i}: {s}" for i, s in enumerate(steps, start=1))
        messages = chat_messages(spec, problem=problem, steps=numbered, n_steps=len(steps), solution=solution)
    else:
        raise PoolError(f"unknown judge mode {mode!r}; expected 'yes_no' or 'steps'", file=spec.get("_path"),
                        field="mode")
    completion: Completion = call_prompt(client, api, messages, **params)
    if not completion.choices:
        return JudgeOutcome(None, "unparsed", completion.prompt_tokens, completion.completion_tokens,
                            completion.latency_s, "")
    choice = completion.choices[0]
    if mode == "yes_no":
        score, method = yes_no_score(choice, spec)
    else:
        score, method = steps_score(choice.text, len(steps), spec.get("aggregate", "fraction"))
    prompt_tokens = completion.prompt_tokens
    if prompt_tokens is None:
        prompt_tokens = sum(estimate_tokens(m["content"]) for m in messages)
    output_tokens = completion.completion_tokens
    if output_tokens is None:
        output_tokens = choice.n_tokens if choice.n_tokens is not None else estimate_tokens(choice.text)
    return JudgeOutcome(score, method, prompt_tokens, output_tokens, completion.latency_s, choice.text)
