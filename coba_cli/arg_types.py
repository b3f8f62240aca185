"""Argument types shared by the ``coba`` subcommands: argparse ``type=`` callables with clear messages.

Every number is checked here, before any work: integers are integers, floats are finite (``nan``, ``inf``
and overflowing literals such as ``1e999`` are refused) and in range.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from coba_env.costs import COST_MEASURES
from coba_env.rules.config import LAM_MAX
from eval.envs import ENV_NAMES

#: The cost measures a subcommand may charge in: the env's own (see docs/ENV.md, "Costs and budget").
COST_CHOICES: tuple[str, ...] = tuple(COST_MEASURES)

#: What every ``--cost`` option's help says of its default (``coba_env.costs.default_cost_model``).
DEFAULT_COST_HELP = ("default: p_tokens, parameter-weighted tokens; on a pool that gives a model no size, the first "
                     "measure the pool supports, said in one line")


def add_cost_option(parser: Any, what: str) -> None:
    """``--cost``, the cost measure of ``what``; not given, the pool's default (``DEFAULT_COST_HELP``)."""
    parser.add_argument("--cost", default=None, choices=COST_CHOICES, help=f"{what} ({DEFAULT_COST_HELP})")


#: Options whose value is a comma-separated number list that may start with "-" (argparse would read
#: "-1,0.1" as an unknown option); ``main`` joins them as ``--opt=VALUE`` so the type check can explain.
NUMBER_LIST_OPTIONS = ("--lambdas", "--eval-lambdas")

T = TypeVar("T")


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _checked(parse: Callable[[str], T], *rules: tuple[Callable[[T], bool], str], name: str,
             doc: str) -> Callable[[str], T]:
    """An argparse type: ``parse`` the text, then each ``(holds, expected)`` rule in turn; the first that does
    not hold refuses the value with "expected <expected>, got <text>"."""
    def check(text: str) -> T:
        value = parse(text)
        for holds, expected in rules:
            if not holds(value):
                raise argparse.ArgumentTypeError(f"expected {expected}, got {text}")
        return value

    check.__name__, check.__qualname__, check.__doc__ = name, name, doc
    return check


positive_int = _checked(_int, (lambda v: v >= 1, "an integer >= 1"), name="positive_int", doc="An integer >= 1.")
non_negative_int = _checked(_int, (lambda v: v >= 0, "an integer >= 0"), name="non_negative_int",
                            doc="An integer >= 0.")
seed_int = _checked(_int, (lambda v: 0 <= v < 2**32, f"a seed, an integer from 0 to {2**32 - 1}"), name="seed_int",
                    doc="A random seed: an integer in [0, 2**32 - 1] (what numpy's generators accept).")


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer from ``low`` to ``high`` (a size with an upper bound, so a typo is one line,
    not a MemoryError)."""
    return _checked(_int, (lambda v: v >= low, f"an integer >= {low}"),
                    (lambda v: v <= high, f"an integer >= {low} and <= {high}"),
                    name=f"integer from {low} to {high}", doc=f"An integer from {low} to {high}.")


lambda_value = _checked(_finite, (lambda v: v >= 0, "a number >= 0"),
                        (lambda v: v <= LAM_MAX, f"a number >= 0 and <= {LAM_MAX:g}"), name="lambda_value",
                        doc="A cost weight lambda: a finite number from 0 to the env's largest "
                            "(``coba_env.rules.config.LAM_MAX``).")


def api_key_text(text: str) -> str:
    """A bearer token: one line of printable ASCII (a line break would split the HTTP header)."""
    if not (text.isprintable() and text.isascii()) or not text.strip():
        raise argparse.ArgumentTypeError("expected the key as one line of printable text (it holds a line break, "
                                         "a control character or non-ASCII text, or is empty)")
    return text


finite_float = _checked(_finite, name="finite_float", doc="Any finite number.")
positive_float = _checked(_finite, (lambda v: v > 0, "a number > 0"), name="positive_float",
                          doc="A finite number > 0.")
non_negative_float = _checked(_finite, (lambda v: v >= 0, "a number >= 0"), name="non_negative_float",
                              doc="A finite number >= 0.")
probability = _checked(_finite, (lambda v: 0 < v <= 1, "a number in (0, 1]"), name="probability",
                       doc="A number in (0, 1] (top-p).")


def dataset_list(text: str) -> list[str]:
    """One or more dataset names separated by commas (checked against the pool when it is loaded)."""
    names = list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not names:
        raise argparse.ArgumentTypeError(f"expected dataset names separated by commas, got {text!r}")
    return names


def lambda_list(text: str) -> list[float]:
    """One or more finite lambdas >= 0, separated by commas or spaces."""
    parts = text.replace(",", " ").split()
    if not parts:
        raise argparse.ArgumentTypeError(f"expected one or more lambdas >= 0 separated by commas, got {text!r}")
    values = []
    for part in parts:
        try:
            value = float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {part!r} in {text!r}") from None
        if not math.isfinite(value) or value < 0:
            raise argparse.ArgumentTypeError(f"expected lambdas that are finite numbers >= 0, got {part!r} in {text!r}")
        if value > LAM_MAX:
            raise argparse.ArgumentTypeError(f"expected lambdas from 0 to {LAM_MAX:g} (the env's range), got {part!r}")
        values.append(value)
    return values


def join_number_lists(argv: Sequence[str]) -> list[str]:
    """``[..., "--lambdas", "-1,0.1", ...]`` -> ``[..., "--lambdas=-1,0.1", ...]``: a value starting with "-"
    reaches the type check (which refuses it with a clear message) instead of argparse's "expected one argument"."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if arg in NUMBER_LIST_OPTIONS and nxt is not None and nxt.startswith("-") and nxt[1:2] not in ("-", ""):
            out.append(f"{arg}={nxt}")
            i += 2
            continue
        out.append(arg)
        i += 1
    return out


def add_ray_address(parser: argparse.ArgumentParser, what: str) -> None:
    """Add ``--ray-address ADDR`` (the optional Ray extra) to ``parser``; ``what`` says what runs on the cluster."""
    parser.add_argument("--ray-address", default=None, metavar="ADDR",
                        help=f"address of a Ray cluster (HOST:6379 of `ray start --head`, ray://HOST:10001, 'auto'): "
                             f"{what}; needs the ray extra: pip install -e '.[ray]' in the checkout (docs/RAY.md)")


def require_ray(address: str | None) -> None:
    """Before any work: with a ``--ray-address``, Ray must be installed (else the one-line hint, exit 2)."""
    if address is None:
        return
    import importlib.util

    from coba_cli.errors import UsageError
    from coba_env.parallel import RAY_MISSING

    if not address.strip():
        raise UsageError("--ray-address is empty; expected a Ray cluster address such as HOST:6379")
    if importlib.util.find_spec("ray") is None:
        raise UsageError(RAY_MISSING)


def connect_ray_cluster(address: str | None) -> None:
    """Before any work: connect to the Ray cluster at ``address`` (none: nothing to do); one line, exit 2, when
    Ray is missing or nothing answers there."""
    if address is None:
        return
    require_ray(address)
    from coba_cli.errors import UsageError
    from pools.ray_connect import RayUnavailable, connect_ray

    try:
        connect_ray(address)
    except RayUnavailable as exc:
        raise UsageError(str(exc)) from exc


def add_episode_options(parser: argparse.ArgumentParser, route_adds: str = "") -> None:
    """``--env`` and ``--datasets``: which episodes of the pool a command replays (``route_adds``: what the route
    env adds to this command's output, appended to ``--env``'s help)."""
    parser.add_argument("--datasets", type=dataset_list, default=None, metavar="A,B",
                        help="evaluate only these datasets of the pool (default: every dataset)")
    parser.add_argument("--env", default="replay", choices=ENV_NAMES,
                        help="replay (default): coba/Replay-v0, one episode per problem and generator; route: "
                             "coba/Route-v0, one episode per problem, the routing policies choose the generator"
                             + (f"; {route_adds}" if route_adds else ""))
