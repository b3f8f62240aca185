"""``coba serve``: an OpenAI-compatible endpoint answering every request with a routing policy.

Serve POST /v1/chat/completions, GET /v1/models and GET /health. Each request is answered by a routing policy
acting live over the model endpoints given here (SAMPLE calls a generator, VERIFY a judge); the response's usage
totals every internal call and its 'coba' field carries the path. A request picks the policy by its model name
(POLICY or POLICY@LAMBDA) and may lower the budgets within the limits set here.

examples:
  coba serve --policy coba_light --generator http://127.0.0.1:8000/v1,Qwen3-8B --judge http://127.0.0.1:8001/v1,Qwen3-1.7B
  coba serve --policy route_cheapest_coba --allow route_largest_coba --generator small=http://127.0.0.1:8000/v1,Qwen3-1.7B --generator large=http://127.0.0.1:8001/v1,Qwen3-14B --judge http://127.0.0.1:8002/v1,Qwen3-1.7B --record runs/served

Parses the options and calls ``eval.serving.server``; the endpoint options are ``coba solve``'s (docs/SERVE.md).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from pathlib import Path

from coba_cli.arg_types import (
    api_key_text,
    int_in,
    lambda_value,
    non_negative_float,
    positive_float,
    positive_int,
)
from coba_cli.endpoint_options import add_endpoint_options, add_live_env_options
from coba_cli.errors import UsageError
from coba_cli.help_text import command_parser
from pools.limits import MAX_CONCURRENCY

#: Environment variable holding the key clients must send (keeps it off the command line and out of ``ps``).
API_KEY_ENV = "COBA_SERVE_API_KEY"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``coba serve``."""
    p = command_parser(subparsers, "serve", __doc__)
    p.add_argument("--policy", required=True, metavar="[ID=]SPEC",
                   help="the default policy: a registered name, a trained controller's checkpoint or FILE.py:Class; "
                        "ID is the model name requests use for it (default: the name)")
    p.add_argument("--allow", action="append", default=[], metavar="[ID=]SPEC",
                   help="another policy a request may name (repeat)")
    p.add_argument("--policies-file", metavar="YAML", help="a policy spec YAML merged over agents/policies.yaml")
    add_endpoint_options(p.add_argument_group("model endpoints (as coba solve: URL,MODEL[,PARAMS_B])"),
                         "--upstream-api-key")
    s = p.add_argument_group("the server")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    s.add_argument("--port", type=int_in(0, 65535), default=8090, help="port (default: 8090; 0 picks a free one)")
    s.add_argument("--api-key", type=api_key_text,
                   help=f"the key clients must send as 'Authorization: Bearer KEY' (or set ${API_KEY_ENV})")
    s.add_argument("--served-name", default="coba", help="model name that means the default policy (default: coba)")
    s.add_argument("--concurrency", type=int_in(1, MAX_CONCURRENCY), default=8,
                   help="requests answered at once, one worker thread each (default: 8)")
    s.add_argument("--queue", type=int_in(0, 100_000), default=32,
                   help="requests waiting beyond those; more are answered 429 at once (default: 32)")
    s.add_argument("--endpoint-concurrency", type=int_in(1, MAX_CONCURRENCY), default=4,
                   help="internal calls in flight per model server URL, over all requests (default: 4)")
    s.add_argument("--max-body-bytes", type=int_in(256, 1 << 30), default=1 << 20,
                   help="largest request body (default: 1 MiB; larger: 413)")
    s.add_argument("--max-messages", type=int_in(1, 100_000), default=64, help="most messages a request holds")
    s.add_argument("--keepalive", type=positive_float, default=10.0,
                   help="seconds between keep-alive comments of a stream while the policy works (default: 10)")
    s.add_argument("--grace", type=non_negative_float, default=5.0,
                   help="on Ctrl-C / SIGTERM, seconds running requests may finish before they are cancelled")
    s.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    b = p.add_argument_group("hard budgets per request (a request may ask for less, never more)")
    b.add_argument("--max-tokens", type=positive_float, metavar="N", help="prompt + output tokens of all its calls")
    b.add_argument("--max-calls", type=positive_int, default=64, metavar="N", help="model calls (default: 64)")
    b.add_argument("--max-seconds", type=positive_float, default=300.0, metavar="S",
                   help="seconds from arrival to answer, time in the queue included (default: 300)")
    e = p.add_argument_group("sampling and environment (as coba solve; a request may ask for other sampling "
                             "settings)")
    add_live_env_options(e)
    e.add_argument("--lam", type=lambda_value, help="lambda of requests that give none (default: the policy's, "
                                                    "else 0.1)")
    e.add_argument("--lambda-range", default="0,1", metavar="LO,HI",
                   help="the lambdas a request may ask for (default: 0,1)")
    o = p.add_argument_group("recording")
    o.add_argument("--record", metavar="DIR", help="append every request to DIR as canonical JSONL (episodes-n<N>."
                                                   "jsonl for coba pools import; requests.jsonl)")
    o.add_argument("--dataset", default="served", help="dataset name of recorded requests (default: served)")
    p.set_defaults(func=run)


def _lambda_range(text: str) -> tuple[float, float]:
    parts = text.split(",")
    try:
        low, high = (lambda_value(x.strip()) for x in parts) if len(parts) == 2 else (None, None)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"--lambda-range {text!r}: {exc}") from None
    if low is None or low > high:
        raise UsageError(f"--lambda-range {text!r}: expected LO,HI with 0 <= LO <= HI")
    return low, high


def _record_dir(path: str | None) -> Path | None:
    """``--record DIR``: a new folder, or one holding only what coba serve writes (it is appended to)."""
    from eval.serving.record import REQUESTS_FILE

    if path is None:
        return None
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--record {path}: exists and is not a folder")
    if folder.is_dir():
        foreign = sorted(p.name for p in folder.iterdir()
                         if p.name != REQUESTS_FILE and not (p.name.startswith("episodes-n") and p.suffix == ".jsonl"))
        if foreign:
            raise UsageError(f"--record {path}: holds {', '.join(foreign[:3])}, which coba serve did not write; "
                             "give a new folder or one of its own records")
    return folder


def _config(args: argparse.Namespace):
    """The server's ``ServeConfig`` from the options (one line and exit 2 for a bad one)."""
    from coba_cli.endpoint_options import generators, judges, sampling_settings
    from eval.serving.config import ServeConfig
    from pools.errors import PoolError
    from pools.safe_names import check_data_name

    try:
        check_data_name(args.dataset, what="dataset", field="--dataset")
    except PoolError as exc:
        raise UsageError(f"--dataset: {exc}") from None
    key = args.api_key or os.environ.get(API_KEY_ENV) or None
    if key is not None and not args.api_key:
        try:
            api_key_text(key)
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"${API_KEY_ENV}: {exc}") from None
    return ServeConfig(
        generators=generators(args.generator), judges=judges(args), policy=args.policy, also_allow=tuple(args.allow),
        policies_file=args.policies_file, served_name=args.served_name, lam=args.lam,
        lambda_range=_lambda_range(args.lambda_range), max_tokens=args.max_tokens, max_calls=args.max_calls,
        max_seconds=args.max_seconds, sampling=sampling_settings(args), cost=args.cost,
        n_max=args.n_max, budget=args.budget, reference=args.reference, call_timeout=args.timeout,
        max_attempts=args.max_attempts, upstream_api_key=args.upstream_api_key, api_key=key,
        concurrency=args.concurrency, queue=args.queue, endpoint_concurrency=args.endpoint_concurrency,
        max_body_bytes=args.max_body_bytes, max_messages=args.max_messages, keepalive_s=args.keepalive,
        record=_record_dir(args.record), dataset=args.dataset)


def run(args: argparse.Namespace) -> int:
    """Check everything, then serve until Ctrl-C / SIGTERM."""
    config = _config(args)
    try:
        from eval.serving.server import bind_socket, make_server
    except ImportError as exc:
        raise UsageError(f"coba serve needs the serve extra ({exc.name} is not installed): "
                         "pip install -e '.[serve]'") from None
    try:
        sock = bind_socket(args.host, args.port)
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    try:
        server = make_server(config, host=args.host, port=args.port, grace=args.grace, log_level=args.log_level)
    except ValueError as exc:
        sock.close()
        raise UsageError(str(exc)) from None
    host, port = sock.getsockname()[:2]
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}/v1"
    if config.api_key is None and not _loopback(args.host):
        print(f"coba serve: warning: listening on {args.host} without an API key: anyone who can reach this "
              f"address can spend your model servers' time (give --api-key or ${API_KEY_ENV})", file=sys.stderr)
    ids = server.jobs.engine.policy_ids
    print(f"coba serve: listening on {url} (policies {', '.join(ids)}; model {config.served_name!r} = {ids[0]}; "
          f"generators {', '.join(config.generators)}; judges {', '.join(config.judges) or 'none'})",
          file=sys.stderr, flush=True)
    server.run(sockets=[sock])
    return 0


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
