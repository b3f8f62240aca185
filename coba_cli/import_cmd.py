"""``coba pools import``: a foreign candidate file -> a pool directory.

The ``--format`` choices, each format's options with their help, and the checks "--X only apply to --format
F" / "--format F needs --X" are generated from the importers' own declarations (``pools.importers.
IMPORT_FORMATS``); nothing here names a format.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from coba_cli.arg_types import finite_float, positive_float
from coba_cli.errors import UsageError
from coba_cli.help_text import ExampleFormatter, examples
from coba_cli.out_option import older_form_note
from pools.errors import PoolError
from pools.importers import IMPORT_FORMATS, ImportFormat, ImportOption, import_pool
from pools.importers.relabel import LABEL_SOURCES
from pools.inspect import pool_summary
from pools.output_paths import check_output_dir
from pools.prices import parse_price
from pools.schema import TIERS, VERIFIER_NAME_PATTERN, VERIFIER_ROLES
from pools.store import save_pool

#: The argparse type of each option kind an importer may declare (``pools.importers.import_format.OPTION_KINDS``).
_KIND_TYPES: dict[str, Callable[[str], Any]] = {"text": str, "number": finite_float, "positive number": positive_float}


def _takers() -> dict[str, list[tuple[ImportFormat, ImportOption]]]:
    """Option name -> the formats taking it, with each one's declaration, in registry order."""
    out: dict[str, list[tuple[ImportFormat, ImportOption]]] = {}
    for fmt in IMPORT_FORMATS.values():
        for option in fmt.options:
            out.setdefault(option.name, []).append((fmt, option))
    return out


def _shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _note(fmt: ImportFormat, option: ImportOption, *, alone: bool) -> str:
    """What ``fmt`` does with ``option``: its declared note, else the importer's own default."""
    default = fmt.default(option.name)
    if option.note or default is None:
        return option.note
    return f"default{':' if alone else ''} {_shown(default)}"


def _option_help(declared: list[tuple[ImportFormat, ImportOption]]) -> str:
    """The option's meaning, then what each format does with it (formats saying the same thing grouped)."""
    notes: dict[str, list[str]] = {}
    for fmt, option in declared:
        note = _note(fmt, option, alone=len(declared) == 1)
        if note:
            notes.setdefault(note, []).append(fmt.name)
    needing = [fmt.name for fmt, option in declared if option.required]
    if len(declared) == 1:
        parts = [*notes, *(["required"] if needing else [])]
    else:
        parts = [f"{', '.join(names)}: {note}" for note, names in notes.items()]
        parts += [f"required by {', '.join(needing)}"] if needing else []
    text = "; ".join(parts)
    return (declared[0][1].help + (f" ({text})" if text else "")).replace("%", "%%")


def _add_format_options(parser: argparse.ArgumentParser) -> None:
    """One flag per declared option, grouped by the formats that take it."""
    groups: dict[tuple[str, ...], argparse._ArgumentGroup] = {}
    for name, declared in _takers().items():
        formats = tuple(fmt.name for fmt, _ in declared)
        if formats not in groups:
            groups[formats] = parser.add_argument_group(f"options of --format {', '.join(formats)}")
        option = declared[0][1]
        groups[formats].add_argument(option.flag, dest=name, type=_KIND_TYPES[option.kind],
                                     choices=list(option.choices) if option.choices else None,
                                     help=_option_help(declared))


def _format_options(args: argparse.Namespace, fmt: ImportFormat) -> dict[str, Any]:
    """The importer options given, checked against what ``fmt`` declares (before any work)."""
    takers = _takers()
    given = {name: getattr(args, name) for name in takers if getattr(args, name, None) is not None}
    wrong = [name for name in given if fmt.option(name) is None]
    if wrong:
        formats = [f.name for f, _ in takers[wrong[0]]]
        flags = ", ".join(takers[name][0][1].flag for name in wrong)
        raise UsageError(f"{flags} only apply to --format {', '.join(formats)}")
    missing = [o.flag for o in fmt.options if o.required and o.name not in given]
    if missing:
        raise UsageError(f"--format {fmt.name} needs {' and '.join(missing)} (the source does not say)")
    for name, value in given.items():
        option = fmt.option(name)
        problem = option.check(value) if option.check else None
        if problem:
            raise UsageError(f"{option.flag} {_shown(value)}: {problem}")
    return given


def _sources_and_dest(args: argparse.Namespace, fmt: ImportFormat) -> tuple[list[str], str, str]:
    """(sources, destination, how it was given): ``SRC... --out DEST``, or the older ``SRC... DEST``; each source
    checked to be a file (or a folder, for a format that reads folders)."""
    several = [f.name for f in IMPORT_FORMATS.values() if f.several_sources]
    if args.out is not None:
        if len(args.src) > 1 and not fmt.several_sources:
            raise UsageError(f"give the output once: --out {args.out} or DEST {args.src[-1]}, not both")
        sources, dest, given_as = list(args.src), args.out, "--out"
    elif len(args.src) < 2:
        raise UsageError("the output is missing: give --out DEST")
    else:
        sources, dest, given_as = list(args.src[:-1]), args.src[-1], "DEST"
    if len(sources) > 1 and not fmt.several_sources:
        raise UsageError(f"--format {fmt.name} imports one SRC; several only with --format {', '.join(several)}")
    return sources, dest, given_as


def _check_sources(sources: list[str], fmt: ImportFormat) -> None:
    """Every source is a regular file, or a folder for a format that reads folders."""
    for name in sources:
        src = Path(name)
        if not (src.is_file() or (fmt.folders and src.is_dir())):
            what = ("is a folder" if src.is_dir() else "not a regular file" if src.exists()
                    else "no such file or folder" if fmt.folders else "no such file")
            raise PoolError(f"{what}; expected the {'candidate file or folder' if fmt.folders else 'candidate file'} "
                            "to import", file=name)


def run(args: argparse.Namespace) -> int:
    """Import ``args.src`` into a new pool directory and print what it holds."""
    fmt = IMPORT_FORMATS[args.format]
    options = _format_options(args, fmt)
    roles = _verifier_roles(args.verifier_role or [])
    prices = _prices(args.price or [])
    sources, dest_arg, given_as = _sources_and_dest(args, fmt)
    dest = check_output_dir(dest_arg, force=args.force, option=given_as, inputs=sources, kind="pool")
    _check_sources(sources, fmt)
    pool = import_pool(sources if len(sources) > 1 else sources[0], fmt.name, labels=args.labels,
                       verifier_roles=roles, prices=prices, **options)  # everything in memory; nothing written yet
    save_pool(pool, dest, overwrite=args.force, inputs=sources)
    print(f"imported {', '.join(sources)} -> {dest}: {pool_summary(pool)}")
    agreement = pool.manifest["provenance"].get("grader_agreement") or {}
    if agreement.get("compared"):
        print(f"grader agrees with the source's correctness labels on {agreement['agree']}/"
              f"{agreement['compared']} candidates ({100 * agreement['rate']:.2f}%); labels used: {args.labels}")
        for line in disagreement_lines(agreement.get("disagreements") or []):
            print(line)
    older_form_note(dest_arg, given_as)
    return 0


def disagreement_lines(disagreements: list[dict]) -> list[str]:
    """One line per candidate where the source's label and the grader disagree, with both answers."""
    def verdict(value: object) -> str:
        return "correct" if value else "wrong"

    return [f"  disagree: dataset {d['dataset']} item {d['item_id']} generator {d['generator']} candidate "
            f"{d['candidate']}: answer {d['answer']!r}, gold {d['gold']!r}; source says {verdict(d['label'])}, "
            f"grader says {verdict(d['grader'])}" for d in disagreements]


def _prices(pairs: list[str]) -> dict[str, dict[str, float]]:
    """``--price MODEL=IN[,OUT]`` values as the manifest's prices, refusing malformed ones before any work."""
    prices = {}
    for pair in pairs:
        try:
            model, price = parse_price(pair)
        except ValueError as exc:
            raise UsageError(f"--price: {exc}") from None
        if model in prices:
            raise UsageError(f"--price names {model} twice; give each model once")
        prices[model] = price
    return prices


def _verifier_roles(pairs: list[str]) -> dict[str, str]:
    """``--verifier-role TIER=ROLE`` values as a dict, refusing unknown tiers and roles."""
    roles = {}
    for pair in pairs:
        tier, _, role = pair.partition("=")
        if not re.fullmatch(VERIFIER_NAME_PATTERN, tier) or role not in VERIFIER_ROLES:
            raise UsageError(f"--verifier-role {pair!r}: expected TIER=ROLE with TIER a verifier name (e.g. "
                             f"{list(TIERS)}) and ROLE one of {list(VERIFIER_ROLES)}")
        if tier in roles:
            raise UsageError(f"--verifier-role names tier {tier} twice ({tier}={roles[tier]} and {pair}); give each "
                             "tier once")
        roles[tier] = role
    return roles


def _src_help() -> str:
    several = [f.name for f in IMPORT_FORMATS.values() if f.several_sources]
    folders = [f.name for f in IMPORT_FORMATS.values() if f.folders and not f.several_sources]
    notes = ([f"{', '.join(several)}: files or folders, several into one pool"] if several else []) + \
        ([f"{', '.join(folders)}: a file or a folder"] if folders else [])
    return (f"source file{' (' + '; '.join(notes) + ')' if notes else ''}; without --out, the last one is the pool "
            "directory to create (the older form SRC DEST)")


def register(pools_subparsers: argparse._SubParsersAction) -> None:
    """Add ``import`` to the ``coba pools`` subcommands."""
    p = pools_subparsers.add_parser(
        "import", help="import a foreign candidate file into a pool directory",
        description="Import candidates into a new pool directory (see docs/POOLS.md). The pool is built and "
        "validated in memory first; nothing is written on failure.", formatter_class=ExampleFormatter,
        epilog=examples("coba pools import pool.jsonl --out runs/pools/mine --verifier-role V3=reward_model",
                        "coba pools import math_cot_100.jsonl --out runs/pools/qwen --format qwen-lists "
                        "--generator Qwen2.5-Math-7B-Instruct --generator-params-b 7.6",
                        "# the older form `coba pools import SRC DEST` still works"))
    p.add_argument("src", nargs="+", metavar="SRC", help=_src_help())
    p.add_argument("--out", dest="out", default=None, metavar="DEST", help="pool directory to create")
    p.add_argument("--format", choices=list(IMPORT_FORMATS), default="jsonl",
                   help="source format (default: jsonl; docs/POOLS.md describes each): " + "; ".join(
                       f"{f.name}: {f.description}" for f in IMPORT_FORMATS.values()).replace("%", "%%"))
    p.add_argument("--force", action="store_true", help="replace DEST if it is a pool coba-env wrote (a folder "
                   "holding anything else is never replaced)")
    p.add_argument("--verifier-role", action="append", metavar="TIER=ROLE",
                   help="what the verifier stored in TIER is (repeatable): ROLE one of "
                   f"{', '.join(VERIFIER_ROLES)}; default the paper tier's role (V1 cheap_judge, V2 "
                   "process_judge, V3 strong_verifier; qwen-lists: its reward model is reward_model). Policies "
                   "map the roles they need onto these (docs/POLICIES.md, 'Verifier roles')")
    p.add_argument("--labels", choices=list(LABEL_SOURCES), default="source",
                   help="correctness labels of the pool: the source's own (default) or the project's grader "
                   "(docs/GRADING.md); the import lists every candidate where they disagree")
    p.add_argument("--price", action="append", metavar="MODEL=IN[,OUT]",
                   help="price of MODEL in dollars per million input (and output) tokens, repeatable: gives the "
                   "pool the usd cost measure (docs/POOLS.md, 'Prices')")
    _add_format_options(p)
    p.set_defaults(func=run)
