"""The live commands' shared options (``coba solve``, ``coba serve``): model endpoints and the live env's settings,
declared once with their parsing, so that the two commands cannot drift apart."""

from __future__ import annotations

import argparse

from coba_cli.arg_types import (
    COST_CHOICES,
    api_key_text,
    int_in,
    non_negative_float,
    positive_float,
    positive_int,
    probability,
    seed_int,
)
from coba_cli.errors import UsageError
from eval.solve import DEFAULT_N_MAX
from pools.client.request_limits import CALL_TIMEOUT_S
from pools.limits import MAX_CANDIDATES, MAX_TOKENS

#: An endpoint option's value.
ENDPOINT = "URL,MODEL[,PARAMS_B]"
#: Attempts per live call: fewer than a generation run's (``request_limits.CALL_ATTEMPTS``), because a person or a
#: client is waiting for the answer and the problem's own budgets (--max-seconds) bound it anyway.
LIVE_CALL_ATTEMPTS = 3
#: The judge options: flag -> the verifier tier it calls.
JUDGE_TIERS = {"--judge": "V1", "--step-judge": "V2", "--verifier": "V3"}


def add_endpoint_options(group: argparse._ArgumentGroup, key_flag: str) -> None:
    """``--generator``, the judges, the API, the model servers' key (``key_flag``), timeout and attempts."""
    group.add_argument("--generator", required=True, action="append", metavar=f"[NAME=]{ENDPOINT}",
                       help="the generator (SAMPLE); repeat it to route between generators with a routing policy "
                            "(SAMPLE_<NAME> each, NAME defaults to MODEL and must be unique)")
    group.add_argument("--judge", metavar=ENDPOINT, help="the cheap outcome judge (VERIFY_V1)")
    group.add_argument("--step-judge", metavar=ENDPOINT, help="the step judge (VERIFY_V2)")
    group.add_argument("--verifier", metavar=ENDPOINT, help="the strong verifier (VERIFY_V3)")
    group.add_argument("--api", choices=("chat", "completions"), default="chat",
                       help="API of every model call (default: chat)")
    group.add_argument(key_flag, type=api_key_text, help="bearer token, if the model servers want one")
    group.add_argument("--timeout", type=positive_float, default=CALL_TIMEOUT_S,
                       help="seconds per model call before it is retried (default: %(default)g; --max-seconds cuts "
                            "it shorter)")
    group.add_argument("--max-attempts", type=positive_int, default=LIVE_CALL_ATTEMPTS,
                       help="attempts per model call on timeouts, connection errors, HTTP 408, 409, 429 and 5xx "
                            "(default: %(default)g)")


def add_live_env_options(group: argparse._ArgumentGroup) -> None:
    """How the generator samples and the live env's cost model and scales (lambda is each command's own)."""
    group.add_argument("--sample-max-tokens", type=int_in(1, MAX_TOKENS), default=4096,
                       help="output token cap of one generator call (default: 4096)")
    group.add_argument("--temperature", type=non_negative_float, default=0.6,
                       help="generator temperature (default: 0.6)")
    group.add_argument("--top-p", type=probability, default=0.95, help="generator top-p (default: 0.95)")
    group.add_argument("--seed", type=seed_int, default=0,
                       help="base seed; each sample's seed derives from it (default: 0)")
    group.add_argument("--prompt", help="sampling prompt YAML (default: pools/data/prompts/generate.yaml)")
    group.add_argument("--cost", default="p_tokens", choices=COST_CHOICES,
                       help="cost model of the reward and the budget_used feature (default: p_tokens: every "
                            "endpoint has a size, so p_tokens can always weigh its calls)")
    group.add_argument("--n-max", type=int_in(1, MAX_CANDIDATES), default=None,
                       help=f"most candidates per problem and generator (default: the reference pool's N, else "
                            f"{DEFAULT_N_MAX})")
    group.add_argument("--reference", metavar="POOL",
                       help="pool (directory or simulator profile) whose N_max, budget B and max output tokens set "
                            "the feature scales: give the pool a trained controller was trained on")
    group.add_argument("--budget", type=positive_float, metavar="B",
                       help="B in the cost model (default: the reference pool's, else N_max generator calls at the "
                            "cap)")


def sampling_settings(args: argparse.Namespace):
    """The ``SamplingSettings`` of one generator call from ``add_live_env_options``'s options."""
    from pools.client.prompts import SamplingSettings

    return SamplingSettings(n=1, temperature=args.temperature, top_p=args.top_p, max_tokens=args.sample_max_tokens,
                            seed=args.seed, api=args.api, prompt=args.prompt or "generate")


def endpoint(spec: str | None, option: str):
    """The ``Endpoint`` of one ``URL,MODEL[,PARAMS_B]`` option (None when not given); a bad one exits 2."""
    from pools.client.openai_client import parse_endpoint

    if spec is None:
        return None
    try:
        return parse_endpoint(spec)
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from None


def judges(args: argparse.Namespace) -> dict:
    """``{tier: Endpoint}`` of the judge options given (``JUDGE_TIERS``)."""
    given = {tier: endpoint(getattr(args, flag[2:].replace("-", "_")), flag) for flag, tier in JUDGE_TIERS.items()}
    return {tier: ep for tier, ep in given.items() if ep is not None}


def generators(specs: list[str]) -> dict:
    """``{name: Endpoint}`` of the ``--generator`` options (``[NAME=]URL,MODEL[,PARAMS_B]``), names unique."""
    from pools.safe_names import control_character

    out: dict = {}
    for spec in specs:
        head, sep, rest = spec.partition("=")
        named = bool(sep) and "://" not in head and rest.strip().startswith(("http://", "https://"))
        name = head.strip() if named else None
        bad = control_character(head) if named else None
        if bad is not None:  # a name goes into action names, reports and the recorded pool: one line only
            raise UsageError(f"--generator {spec!r}: NAME {head!r} holds the control character {bad}; expected a name "
                             "on one line")
        ep = endpoint(rest if named else spec, "--generator")
        if named and (not name or any(ch in name for ch in " \t,=")):
            raise UsageError(f"--generator {spec!r}: bad NAME {head!r}; expected a name without spaces, commas "
                             "or '=' before =URL,MODEL[,PARAMS_B]")
        name = name or ep.model
        if name in out:
            raise UsageError(f"--generator {spec!r}: duplicate generator name {name!r}; each generator needs its "
                             "own name: give NAME=URL,MODEL[,PARAMS_B]")
        out[name] = ep
    return out
