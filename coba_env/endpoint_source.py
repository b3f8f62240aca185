"""Model endpoints as an evidence source of ``LiveEnv``: generator and judge calls to OpenAI-compatible servers.

``EndpointSource`` samples from one generator endpoint or several named ones and scores with one judge endpoint per
verifier (any verifier names, each with a declared role; ``coba_env.live_sources`` states the source interface).
It computes nothing the environment computes: each call returns the raw evidence (answer cluster, tokens, cap
hit, score) and its cost in every measure of ``coba_env.costs.COST_TABLE``.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from coba_env.compiled import verifier_axis
from coba_env.costs import call_costs
from coba_env.live_sources import (
    CallBound,
    CallInterrupted,
    EvidenceSource,
    LiveEndpointError,
    Revealed,
    Scored,
)
from coba_env.rules.roles import ROLE_NAMES, declared_roles
from pools.client.judges import DEFAULT_JUDGES, ROLE_JUDGES, judge
from pools.client.openai_client import Endpoint, EndpointError, OpenAIClient
from pools.client.prompts import SamplingSettings, call_prompt, chat_messages, derive_seed, load_prompt
from pools.grading import AnswerClusterer, extract_answer, uses_task_scorer
from pools.problems import Problem
from pools.schema import PAPER_TIER_ROLES, TIERS, VERIFIER_NAME_PATTERN, VERIFIER_ROLES
from pools.tokens import estimate_tokens

__all__ = ["CHAT_TEMPLATE_TOKENS", "TIER_ROLES", "EndpointSource"]

#: How messages name the paper verifiers' endpoints (another verifier: by its name and role, ``verifier_role``).
TIER_ROLES = {"V1": "judge (V1)", "V2": "step judge (V2)", "V3": "verifier (V3)"}
#: Tokens a chat template may add around the messages (special tokens, a default system prompt).
CHAT_TEMPLATE_TOKENS = 256


def _bytes(text: str | None) -> int:
    return len((text or "").encode("utf-8"))


class EndpointSource(EvidenceSource):
    """Samples from generator endpoints and scores with judge endpoints (``pools.client.openai_client``).

    ``generator``: one endpoint (SAMPLE, the replay layout), or several by name (``{name: endpoint}``, in
    action order: ``SAMPLE_<name>`` each, the item grouping). Every generator's answers of a problem go into
    the problem's one ``AnswerClusterer``, so answers are clustered across generators by the project's one
    grading code; a sample costs its tokens x its own generator's parameters. The k-th sample of a generator
    is seeded by (seed, dataset, item, model, k), so one generator alone draws exactly what it always drew.

    ``judges``: one endpoint per verifier, by name (any verifier names; the paper's V1, V2, V3 keep their axis);
    ``roles``: each verifier's role (``pools.schema.VERIFIER_ROLES``; a paper name defaults to its tier's role,
    any other name needs one). A verifier is prompted with ``prompts[name]``, else its paper tier's prompt, else
    its role's (``pools.client.judges.ROLE_JUDGES``).

    Prompts, sampling settings and judge scoring are those of ``coba pools generate`` / ``verify``
    (``pools.generation.generate``, ``pools.generation.verify_calls``); answers are extracted with ``pools.grading`` and clustered
    as a pool build would (``pools.grading.AnswerClusterer``). Token bounds: a prompt has at most one token
    per UTF-8 byte of its messages plus ``CHAT_TEMPLATE_TOKENS`` (the generator prompt's exact count is used
    once the first call has reported it); output at most the request's ``max_tokens``.
    """

    def __init__(self, problems: Sequence[Problem], generator: Endpoint | Mapping[str, Endpoint],
                 judges: Mapping[str, Endpoint], *, roles: Mapping[str, str] | None = None,
                 settings: SamplingSettings | None = None, prompts: Mapping[str, str] | None = None,
                 request_timeout_s: float = 600.0, max_attempts: int = 3, backoff_s: float = 1.0,
                 api_key: str | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self._set_verifiers(judges, roles)
        if not problems:
            raise ValueError("no problem given")
        self.problems = list(problems)
        named = dict(generator) if isinstance(generator, Mapping) else {"": generator}
        if not named or any(not isinstance(ep, Endpoint) for ep in named.values()):
            raise ValueError("expected a generator endpoint, or several by name")
        if len(named) > 1 and not all(isinstance(n, str) and n for n in named):
            raise ValueError(f"several generators need non-empty names, got {list(named)}")
        #: The generator endpoints in action order (``generator_names``); ``generator`` is the first.
        self.generators = list(named.values())
        self.generator = self.generators[0]
        self.generator_names = tuple(named) if len(named) > 1 else ("",)
        self.generator_params = tuple(float(ep.params_b) for ep in self.generators)
        self.settings = settings or SamplingSettings(n=1)
        self.gen_spec = load_prompt(self.settings.prompt)
        prompts = dict(prompts or {})
        role = dict(zip(self.verifiers, self.verifier_roles, strict=True))
        self.judge_specs = {v: load_prompt(prompts.get(v) or DEFAULT_JUDGES.get(v) or ROLE_JUDGES[role[v]])
                            for v in self.tiers}
        self.request_timeout_s = request_timeout_s
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.api_key = api_key
        self._sleep = sleep
        self.records: list[dict[str, Any]] = []

    def _set_verifiers(self, judges: Mapping[str, Endpoint], roles: Mapping[str, str] | None) -> None:
        """The verifier axis, the verifiers present and their declared roles, from the judge endpoints by name."""
        names = list(judges)
        bad = [v for v in names if not isinstance(v, str) or not re.fullmatch(VERIFIER_NAME_PATTERN, v)]
        if bad:
            raise ValueError(f"verifier name(s) {bad} cannot name a VERIFY action; expected names matching "
                             f"{VERIFIER_NAME_PATTERN}")
        given = dict(roles or {})
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise ValueError(f"roles name verifier(s) {unknown} without a judge endpoint; the judges are {names}")
        missing = [v for v in names if v not in given and v not in PAPER_TIER_ROLES]
        if missing:
            raise ValueError(f"verifier(s) {missing} have no role; expected roles={{name: role}} with a role of "
                             f"{list(VERIFIER_ROLES)}")
        self.judges = dict(judges)
        self.verifiers = verifier_axis(names) if names else TIERS
        self.tiers = tuple(v for v in self.verifiers if v in self.judges)
        self.verifier_roles = declared_roles(given, self.verifiers)

    def verifier_role(self, name: str) -> str:
        """How messages name verifier ``name``'s endpoint: the paper tiers' words, else its name and role."""
        if name in TIER_ROLES:
            return TIER_ROLES[name]
        return f"verifier {name} ({ROLE_NAMES[self.verifier_roles[self.verifiers.index(name)]]})"

    @property
    def n_episodes(self) -> int:
        """Problems given."""
        return len(self.problems)

    def begin(self, episode: int) -> dict[str, Any]:
        """Start problem ``episode``: fresh answer clusters and an empty record."""
        p = self.problems[episode]
        self.problem = p
        self._clusters = AnswerClusterer(literal=uses_task_scorer(p.task, p.metadata))
        self._messages = chat_messages(self.gen_spec, problem=p.problem)
        self._gen_prompt_tokens: list[int | None] = [None] * len(self.generators)
        self._drawn = [0] * len(self.generators)
        self.records = []
        model = "+".join(self.generator_names) if len(self.generators) > 1 else self.generator.model
        return {"dataset": p.dataset, "item_id": p.item_id, "generator": model, "labels": None,
                "problem": {"dataset": p.dataset, "item_id": p.item_id, "problem": p.problem}}

    # -- calls --------------------------------------------------------------------------------------
    def check_endpoints(self, timeout_s: float = 10.0) -> None:
        """Raise ``LiveEndpointError`` naming the first endpoint that does not answer GET /v1/models."""
        generators = [(self._generator_role(g), ep) for g, ep in enumerate(self.generators)]
        for role, ep in [*generators, *[(self.verifier_role(v), self.judges[v]) for v in self.tiers]]:
            client = OpenAIClient(ep.url, ep.model, api_key=self.api_key, timeout_s=timeout_s, max_attempts=1)
            try:
                client.models()
            except EndpointError as exc:
                raise LiveEndpointError(f"{role} endpoint {ep.url} (model {ep.model}) is not usable: {exc}") from None

    def _call(self, role: str, ep: Endpoint, fn: Callable[[OpenAIClient], Any], timeout_s: float | None) -> Any:
        """Run ``fn(client)``; with ``timeout_s`` the call (retries included) is cut at that many seconds."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s

        def sleep(delay: float) -> None:  # backoff between retries never runs past the deadline
            if deadline is not None and time.monotonic() + delay >= deadline:
                raise CallInterrupted(f"the time budget ran out while retrying the {role} call")
            self._sleep(delay)

        per_request = self.request_timeout_s if timeout_s is None else max(min(self.request_timeout_s, timeout_s),
                                                                             1e-3)
        client = OpenAIClient(ep.url, ep.model, api_key=self.api_key, timeout_s=per_request,
                              max_attempts=self.max_attempts, backoff_s=self.backoff_s, sleep=sleep)
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["value"] = fn(client)
            except BaseException as exc:  # handed to the caller's thread
                outcome["error"] = exc

        if timeout_s is None:
            run()
        else:
            worker = threading.Thread(target=run, daemon=True, name="coba-live-call")
            worker.start()
            worker.join(max(deadline - time.monotonic(), 0.0))
            if worker.is_alive():  # abandoned: the daemon thread ends with its socket timeout
                raise CallInterrupted(f"the time budget ran out during the {role} call")
        error = outcome.get("error")
        if isinstance(error, EndpointError):
            if deadline is not None and time.monotonic() >= deadline and error.status is None:
                raise CallInterrupted(f"the time budget ran out during the {role} call")
            raise LiveEndpointError(f"{role} endpoint {ep.url} (model {ep.model}): {error}") from None
        if error is not None:
            raise error
        return outcome["value"]

    def _generator_role(self, generator: int) -> str:
        """``generator``, or ``generator <name>`` when there are several (for messages)."""
        return "generator" if len(self.generators) == 1 else f"generator {self.generator_names[generator]}"

    def sample(self, candidate: int, timeout_s: float | None, generator: int = 0) -> Revealed:
        """One call to generator ``generator``; the answer is extracted and clustered with the earlier ones."""
        s, p, ep, role = self.settings, self.problem, self.generators[generator], self._generator_role(generator)
        k = self._drawn[generator]  # this generator's k-th sample (= candidate with one generator)
        seed = derive_seed(s.seed, p.dataset, p.item_id, ep.model, k)
        params = {"temperature": s.temperature, "top_p": s.top_p, "max_tokens": s.max_tokens, "seed": seed,
                  "extra_body": self.gen_spec.get("request") or None}
        completion = self._call(role, ep, lambda c: call_prompt(c, s.api, self._messages, **params), timeout_s)
        if not completion.choices:
            raise LiveEndpointError(f"{role} endpoint {ep.url} (model {ep.model}) returned no choices")
        self._drawn[generator] += 1
        choice = completion.choices[0]
        prompt_tokens = completion.prompt_tokens
        estimated = prompt_tokens is None
        if estimated:
            prompt_tokens = sum(estimate_tokens(m["content"]) for m in self._messages)
        else:
            self._gen_prompt_tokens[generator] = prompt_tokens
        output_tokens = completion.completion_tokens
        if output_tokens is None:
            output_tokens = choice.n_tokens if choice.n_tokens is not None else estimate_tokens(choice.text)
            estimated = estimated or choice.n_tokens is None
        found = extract_answer(choice.text)
        cluster = self._clusters.add(found.answer)
        cost = call_costs(prompt_tokens, output_tokens, ep.params_b, completion.latency_s, ep.model)  # no prices
        cap_hit = choice.finish_reason == "length"
        self.records.append({"text": choice.text, "finish_reason": choice.finish_reason, "prompt_tokens":
                             int(prompt_tokens), "output_tokens": int(output_tokens), "tokens_estimated": estimated,
                             "latency_s": float(completion.latency_s), "answer": found.answer,
                             "extraction_status": found.status, "incomplete_boxed": found.incomplete_boxed,
                             "cluster": cluster, "seed": seed, "scores": {}})
        detail = {"generator": self.generator_names[generator]} if len(self.generators) > 1 else {}
        if detail:
            self.records[-1].update(detail, model=ep.model, params_b=ep.params_b)
        detail |= {"model": ep.model, "prompt_tokens": int(prompt_tokens), "output_tokens": int(output_tokens),
                  "latency_s": float(completion.latency_s), "finish_reason": choice.finish_reason,
                  "answer": found.answer, "extraction_status": found.status, "text": choice.text}
        return Revealed(cluster, found.answer, float(output_tokens), cap_hit, cost,
                        [v in self.judges for v in self.verifiers], detail)

    def verify(self, candidate: int, tier: int, timeout_s: float | None) -> Scored:
        """One judge call with the tier's prompt file; a reply without a usable score gives NaN."""
        name = self.verifiers[tier]
        ep, spec, rec = self.judges[name], self.judge_specs[name], self.records[candidate]
        out = self._call(self.verifier_role(name), ep, lambda c: judge(c, spec, self.problem.problem, rec["text"] or "",
                                                               api=self.settings.api), timeout_s)
        score = math.nan if out.score is None else float(out.score)
        cost = call_costs(out.prompt_tokens or 0, out.output_tokens or 0, ep.params_b, out.latency_s, ep.model)
        rec["scores"][name] = {"score": out.score, "model": ep.model, "params_b": ep.params_b,
                               "prompt_tokens": int(out.prompt_tokens or 0), "output_tokens": int(out.output_tokens or 0),
                               "latency_s": float(out.latency_s)}
        return Scored(score, cost, {"model": ep.model, "tier": name, "score": out.score, "method": out.method,
                                    "prompt_tokens": out.prompt_tokens, "output_tokens": out.output_tokens,
                                    "latency_s": float(out.latency_s), "reply": out.reply[:200]})

    # -- bounds -------------------------------------------------------------------------------------
    def sample_bound(self, candidate: int, generator: int = 0) -> CallBound:
        """Prompt tokens (exact once that generator has reported them) + the request's max_tokens."""
        prompt = self._gen_prompt_tokens[generator]
        if prompt is None:
            prompt = sum(_bytes(m["content"]) for m in self._messages) + CHAT_TEMPLATE_TOKENS
        return CallBound(float(prompt + self.settings.max_tokens))

    def verify_bound(self, candidate: int, tier: int) -> CallBound:
        """Bytes of the judge prompt's template, problem and (clipped) solution, + max_tokens; inf if unbounded."""
        spec = self.judge_specs[self.verifiers[tier]]
        if spec.get("max_tokens") is None:
            return CallBound(math.inf)
        text = self.records[candidate]["text"] or ""
        limit = int(spec.get("max_solution_chars", 12000))
        solution = min(_bytes(text), 4 * limit + 16)
        steps = spec.get("mode") == "steps"
        template = (spec.get("system") or "") + spec["user"]
        n_problem = template.count("{{problem}}")
        n_solution = template.count("{{solution}}") + (template.count("{{steps}}") if steps else 0)
        overhead = 16 * int(spec.get("max_steps", 20)) + 8 if steps else 0  # "Step K: " labels, {{n_steps}}
        prompt = (_bytes(template) + n_problem * _bytes(self.problem.problem) + n_solution * solution + overhead
                  + CHAT_TEMPLATE_TOKENS)
        return CallBound(float(prompt + int(spec["max_tokens"])))
