"""``coba pools generate | verify | build``: real pools from OpenAI-compatible servers (see docs/GENERATION.md).

``register(pools_subparsers)`` adds the three subcommands to the ``coba pools`` group. The module also
runs on its own (``python -m coba_cli.generate_cmd generate ...``) with the same subcommands.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from coba_cli.arg_types import (
    add_ray_address,
    api_key_text,
    connect_ray_cluster,
    int_in,
    non_negative_float,
    positive_float,
    positive_int,
    probability,
    require_ray,
    seed_int,
)
from coba_cli.errors import EXIT_USAGE, UsageError, run_guarded
from coba_cli.out_option import add_out_option, chosen_out, older_form_note
from pools.client.openai_client import Endpoint, EndpointError, parse_endpoint
from pools.client.request_limits import BACKOFF_S, CALL_ATTEMPTS, CALL_TIMEOUT_S
from pools.errors import PoolError
from pools.limits import MAX_CANDIDATES, MAX_CONCURRENCY, MAX_TOKENS
from pools.output_paths import check_output_dir
from pools.schema import VERIFIER_ROLES

T = TypeVar("T")

#: Exit status after Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130

_DATASETS = ("math500", "aime2024", "aime2025", "amc2023", "reasoning_gym")


def _endpoints(specs: Sequence[str], model: str | None = None, params_b: float | None = None) -> list[Endpoint]:
    if not specs:
        raise UsageError("give at least one --endpoint URL,MODEL[,PARAMS_B]")
    try:
        return [parse_endpoint(s, model=model, params_b=params_b) for s in specs]
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _options(args: argparse.Namespace):
    from pools.generation.generate import RunOptions

    return RunOptions(concurrency=args.concurrency, timeout_s=args.timeout, max_attempts=args.max_attempts,
                      backoff_s=args.backoff, api_key=args.api_key, progress=not args.no_progress)


def _ray_options(args: argparse.Namespace, endpoints: Sequence[Endpoint] = ()):
    """``RayDataOptions`` for ``--ray-address`` (None without it), checked before any call; bad input exits 2.

    ``--ray-engine vllm`` loads the one ``--ray-model`` for every endpoint, so endpoints naming different models
    are refused (their candidates would all come from that model but be journaled under each endpoint's name)."""
    used = [o for o, v in (("--ray-engine", args.ray_engine), ("--ray-model", args.ray_model),
                           ("--ray-batch-size", args.ray_batch_size), ("--ray-actors", args.ray_actors))
            if v is not None]
    if args.ray_address is None:
        if used:
            raise UsageError(f"{', '.join(used)} need --ray-address")
        return None
    require_ray(args.ray_address)
    from pools.generation.ray_data_http import RayDataOptions

    options = RayDataOptions(address=args.ray_address, engine=args.ray_engine or "http",
                             batch_size=args.ray_batch_size or 4, actors_per_endpoint=args.ray_actors or 1,
                             model=args.ray_model)
    try:
        options.check(args.api)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    models = sorted({e.model for e in endpoints})
    if options.engine == "vllm" and len(models) > 1:
        raise UsageError(f"--ray-engine vllm loads the one --ray-model for every endpoint, but the endpoints name "
                         f"{len(models)} models ({', '.join(models)}); run one command per model")
    connect_ray_cluster(args.ray_address)  # before any call: an unreachable cluster is one line, exit 2
    return options


def _keeping_the_journal(calls: Callable[[], T], journal: str | Path) -> tuple[int, T | None]:
    """``(0, calls())``; a failing endpoint gives ``(2, None)`` and Ctrl-C ``(130, None)``, each after a line
    saying that ``journal`` keeps every call completed so far (or, when no call completed and there is no
    journal, that nothing was kept)."""

    def kept(when: str) -> str:
        if not Path(journal).is_file():
            return f"no call completed {when}, so nothing was kept (no journal {journal})"
        return f"every call completed {when} is kept in {journal}; run the same command again to continue"

    try:
        return 0, calls()
    except EndpointError as exc:
        print(f"coba: error: {exc}\ncoba: {kept('before the failure')}", file=sys.stderr)
        return EXIT_USAGE, None
    except KeyboardInterrupt:
        print(f"coba: interrupted; {kept('so far')}", file=sys.stderr)
        return EXIT_INTERRUPTED, None


def _run_calls(args: argparse.Namespace, calls: Callable[[], str]) -> int:
    """Run ``calls`` (model calls into ``args.workdir``; returns the summary line), then build ``--out`` if given.

    A failing endpoint exits 2 and Ctrl-C exits 130, both saying that the journal keeps every completed call.
    """
    _check_workdir(args.workdir, must_exist=False)
    if args.out:
        check_output_dir(args.out, force=args.force, option="--out", inputs=[args.workdir], kind="pool")
    status, summary = _keeping_the_journal(calls, f"{args.workdir}/journal.jsonl")
    if status:
        return status
    print(summary)
    if args.out:
        _build(args.workdir, args.out, args)
    return 0


def _check_workdir(workdir: str, *, must_exist: bool) -> None:
    """The work dir is a folder (created by generate when missing); checked before any call is made."""
    path = Path(workdir)
    if path.exists() and not path.is_dir():
        raise PoolError("exists and is not a folder; expected a work dir (a folder holding journal.jsonl)",
                        file=workdir)
    if must_exist and not (path / "journal.jsonl").is_file():
        raise PoolError("no journal here; run `coba pools generate` with this work dir first", file=workdir)


def _build(workdir: str, dest: str, args: argparse.Namespace) -> None:
    from pools.generation.generate import build_pool_from_workdir

    pool = build_pool_from_workdir(workdir, dest, n=getattr(args, "n_build", None), force=args.force,
                                   drop_incomplete=getattr(args, "drop_incomplete", False))
    m = pool.manifest
    print(f"built {dest}: {m['counts']['episodes']} episodes x {m['n_candidates']} candidates; "
          f"tiers {', '.join(m['tiers']) or 'none'}; verifications {m['counts']['verifications']}")


def _cmd_generate(args: argparse.Namespace) -> int:
    from pools.client.prompts import SamplingSettings
    from pools.generation.generate import generate
    from pools.problems import load_problems

    endpoints = _endpoints(args.endpoint)
    ray = _ray_options(args, endpoints)

    def calls() -> str:
        problems = load_problems(args.dataset or ["math500"], args.problems_dir, rgym_config=args.rgym_config,
                                 limit=args.limit)
        settings = SamplingSettings(n=args.n, temperature=args.temperature, top_p=args.top_p,
                                    max_tokens=args.max_tokens, seed=args.seed, n_per_request=args.n_per_request,
                                    api=args.api, prompt=args.prompt or "generate")
        stats = generate(args.workdir, problems, endpoints, settings, _options(args), ray=ray)
        return (f"generated {stats['candidates']} candidates in {stats['calls']} calls "
                f"({stats['already_done']} were already done) -> {args.workdir}")

    return _run_calls(args, calls)


def _cmd_verify_pool(args: argparse.Namespace, endpoints: list[Endpoint]) -> int:
    """``coba pools verify POOL``: score an imported or built pool in place (``pools.generation.verify_pool``)."""
    from pools.generation.verify_pool import journal_path, verify_pool

    if args.out:
        raise UsageError("--out applies to a work dir; a pool is updated in place")
    status, stats = _keeping_the_journal(
        lambda: verify_pool(args.workdir, args.tier, endpoints, role=args.role, prompt=args.prompt, api=args.api,
                            options=_options(args), limit=args.limit, context_tokens=args.context_tokens),
        journal_path(args.workdir))
    if status:
        return status
    print(f"{args.tier}: {stats['calls']} calls: {stats['scored']} scored; without a usable score: "
          f"{stats['refused']} refused by the server, {stats['unparsed']} unparsed; {stats['cut']} solutions cut "
          "to fit the context; "
          f"{stats['already_recorded']} already recorded, {stats['no_text']} without text -> {args.workdir}")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from pools.generation.verify_calls import verify

    endpoints = _endpoints(args.endpoint, args.model, args.params_b)
    ray = _ray_options(args, endpoints)
    if (Path(args.workdir) / "manifest.json").is_file():
        if ray is not None:
            raise UsageError("--ray-address applies to a work dir; a pool (POOL with manifest.json) is scored locally")
        return _cmd_verify_pool(args, endpoints)
    if args.role or args.context_tokens:
        raise UsageError("--role and --context-tokens apply to a pool (POOL with manifest.json), not a work dir")

    def calls() -> str:
        stats = verify(args.workdir, args.tier, endpoints, prompt=args.prompt, api=args.api, options=_options(args),
                       limit=args.limit, ray=ray)
        return (f"{args.tier}: scored {stats['scored']} candidates ({stats['unparsed']} without a usable score), "
                f"{stats['already_scored']} already scored")

    return _run_calls(args, calls)


def _cmd_build(args: argparse.Namespace) -> int:
    _check_workdir(args.workdir, must_exist=True)
    args.dest, given_as = chosen_out(args)
    check_output_dir(args.dest, force=args.force, option=given_as, inputs=[args.workdir], kind="pool")
    _build(args.workdir, args.dest, args)
    older_form_note(args.dest, given_as)
    return 0


def _add_call_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("calls")
    g.add_argument("--concurrency", type=int_in(1, MAX_CONCURRENCY), default=8, help="calls in flight at once (default: 8)")
    g.add_argument("--timeout", type=positive_float, default=CALL_TIMEOUT_S, help="seconds per call before it is "
                   "retried (default: %(default)g)")
    g.add_argument("--max-attempts", type=positive_int, default=CALL_ATTEMPTS, help="attempts per call on timeouts, "
                   "connection errors, HTTP 408, 409, 429 and 5xx, with exponential backoff (default: %(default)g)")
    g.add_argument("--backoff", type=non_negative_float, default=BACKOFF_S, help="first backoff in seconds, doubled per "
                   "attempt (default: %(default)g)")
    g.add_argument("--api", choices=("chat", "completions"), default="chat",
                   help="/v1/chat/completions (default) or /v1/completions")
    g.add_argument("--api-key", type=api_key_text, help="bearer token, if the server wants one")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.add_argument("--out", metavar="DEST", help="build the pool into DEST when done")
    g.add_argument("--force", action="store_true", help="replace DEST if it is a pool coba-env wrote")
    r = p.add_argument_group("Ray (the ray extra; docs/GENERATION.md, 'On a Ray cluster')")
    add_ray_address(r, "the calls go through Ray Data's LLM processors on that cluster (one HTTP processor per "
                       "--endpoint URL), into the same journal")
    r.add_argument("--ray-engine", choices=("http", "vllm"), default=None,
                   help="http: Ray Data's HTTP processor against the --endpoint servers (default); vllm: vLLM "
                   "engine stages on the cluster's GPU nodes load --ray-model themselves (--endpoint then only "
                   "names the model for the journal)")
    r.add_argument("--ray-model", metavar="SOURCE", help="--ray-engine vllm: Hugging Face id or path of the model")
    r.add_argument("--ray-batch-size", type=positive_int, default=None, metavar="ROWS",
                   help="rows per Ray Data batch (default: 4)")
    r.add_argument("--ray-actors", type=positive_int, default=None, metavar="K",
                   help="actors per endpoint (HTTP) or vLLM engine replicas (default: 1)")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``generate``, ``verify`` and ``build`` to the ``coba pools`` subcommands."""
    p = subparsers.add_parser(
        "generate", help="sample candidates through OpenAI-compatible servers into a work dir",
        description="Sample N candidates per item x generator through one or more OpenAI-compatible endpoints "
        "(vLLM, llama.cpp, ...) into WORKDIR/journal.jsonl. Re-running the same command resumes; see "
        "docs/GENERATION.md.")
    p.add_argument("workdir", help="work dir holding the journal (created if missing)")
    p.add_argument("--endpoint", action="append", default=[], metavar="URL,MODEL[,PARAMS_B]",
                   help="a server and the model it serves (repeatable: several models, or several servers per "
                   "model used round-robin); PARAMS_B defaults to the size in the model name")
    p.add_argument("--dataset", action="append", choices=_DATASETS, help="dataset(s) to sample (repeatable; "
                   "default: math500)")
    p.add_argument("--problems-dir", help="folder of the benchmark JSONL files (default: ../shared/data/problems "
                   "from the repository root)")
    p.add_argument("--rgym-config", help="Reasoning Gym subset YAML (default: pools/data/rgym_hard.yaml)")
    p.add_argument("--limit", type=positive_int, help="only the first LIMIT items of each dataset")
    p.add_argument("--n", type=int_in(1, MAX_CANDIDATES), default=16, help="candidates per episode (default: 16)")
    p.add_argument("--temperature", type=non_negative_float, default=0.6, help="sampling temperature (default: 0.6)")
    p.add_argument("--top-p", type=probability, default=0.95, help="nucleus sampling top-p (default: 0.95)")
    p.add_argument("--max-tokens", type=int_in(1, MAX_TOKENS), default=4096, help="output token cap per sample (default: 4096)")
    p.add_argument("--seed", type=seed_int, default=0, help="base seed; each request's seed derives from it")
    p.add_argument("--n-per-request", type=int_in(1, MAX_CANDIDATES), default=1, help="samples asked per request with the n parameter "
                   "(default: 1, which gives exact per-sample token counts and latencies)")
    p.add_argument("--prompt", help="sampling prompt YAML (default: pools/data/prompts/generate.yaml)")
    _add_call_options(p)
    p.set_defaults(func=_cmd_generate)

    p = subparsers.add_parser(
        "verify", help="score a work dir's or a pool's candidates with a verifier tier",
        description="Score every candidate in WORKDIR (a generation work dir, or a pool folder: imported or "
        "built) that has no TIER score yet: V1 a yes/no judge (score = P(yes) from logprobs), V2 a step judge, "
        "V3 a strong yes/no verifier. Re-running resumes. A pool is updated in place; its calls are journaled "
        "in POOL.verify-journal.jsonl until then (docs/GENERATION.md).")
    p.add_argument("workdir", metavar="WORKDIR|POOL", help="work dir written by `coba pools generate`, or a pool")
    p.add_argument("--tier", required=True, metavar="NAME", help="the verifier's name: V1, V2, V3 (the paper's "
                   "tiers) or, for a pool, any name given with --role (the pool's verifiers are data)")
    p.add_argument("--endpoint", action="append", default=[], metavar="URL[,MODEL[,PARAMS_B]]",
                   help="judge server (repeatable)")
    p.add_argument("--model", help="judge model name for endpoints that do not name one")
    p.add_argument("--params-b", type=positive_float, help="judge model size in billions, if not in its name")
    p.add_argument("--prompt", help="judge prompt YAML (default: pools/data/prompts/v1_judge.yaml, "
                   "v2_steps.yaml or v3_judge.yaml)")
    p.add_argument("--limit", type=positive_int, help="score at most LIMIT candidates this run")
    p.add_argument("--role", choices=list(VERIFIER_ROLES), help="pool only: what this verifier is (the manifest's "
                   "verifier_roles; default the tier's paper role; required for a new name; a verifier that is "
                   "not one of the paper's is prompted by its role)")
    p.add_argument("--context-tokens", type=positive_int, help="pool only: the judge's context in tokens; each "
                   "solution is cut by tokens so the prompt and the answer fit it (default: no cut by tokens; a "
                   "refused call is recorded without a score)")
    _add_call_options(p)
    p.set_defaults(func=_cmd_verify)

    p = subparsers.add_parser(
        "build", help="grade, validate and save a work dir as a pool",
        description="Extract answers, cluster, grade and validate the work dir's candidates and scores, then "
        "save the pool atomically to DEST.")
    p.add_argument("workdir", help="work dir written by `coba pools generate`")
    add_out_option(p, "pool directory to create")
    p.add_argument("--n", dest="n_build", type=int_in(1, MAX_CANDIDATES), help="use the first N candidates per episode (default: all)")
    p.add_argument("--drop-incomplete", action="store_true", help="leave out episodes with fewer than N "
                   "candidates instead of failing")
    p.add_argument("--force", action="store_true", help="replace DEST if it is a pool coba-env wrote (never a "
                   "folder holding anything else, never the work dir)")
    p.set_defaults(func=_cmd_build)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``generate``/``verify``/``build`` without the rest of ``coba`` (``python -m coba_cli.generate_cmd``)."""
    parser = argparse.ArgumentParser(prog="coba pools", description=__doc__.splitlines()[0])
    register(parser.add_subparsers(dest="pools_command", metavar="SUBCOMMAND"))
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    return run_guarded(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
