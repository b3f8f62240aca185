"""``coba pools ...``: import, export, validate and inspect pools; generate and simulate where those modules exist."""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

from coba_cli.arg_types import finite_float, positive_float
from coba_cli.errors import UsageError
from coba_cli.help_text import ExampleFormatter, examples
from coba_cli.out_option import add_out_option, chosen_out, older_form_note
from pools.errors import PoolError
from pools.export import export_jsonl
from pools.importers import IMPORTERS, MULTI_SOURCE_FORMATS, import_pool
from pools.importers.qwen_lists import DEFAULT_RM_MODEL, DEFAULT_RM_PARAMS_B, SCORE_TRANSFORMS
from pools.inspect import format_inspection, inspect_pool
from pools.output_paths import check_output_dir, check_output_file
from pools.prices import PRICES_KEY, parse_price
from pools.schema import TIERS, VERIFIER_NAME_PATTERN, VERIFIER_ROLES
from pools.store import Pool, load_pool, save_pool
from pools.strict_json import strict_dumps
from pools.validate import validate_pool

#: Importer options each --format takes (option dest == importer keyword), and those it requires.
_FORMAT_OPTIONS: dict[str, tuple[str, ...]] = {
    "jsonl": ("dataset",),
    "qwen-lists": ("generator", "generator_params_b", "dataset", "rm_tier", "rm_model", "rm_params_b",
                   "score_transform"),
    "tot-game24": ("generator", "generator_params_b", "puzzles", "dataset"),
    "rg-eval": ("generator", "generator_params_b", "dataset"),
    "llm-monkeys": ("generator", "generator_params_b", "dataset"),
    "routellm": ("gold",),
}
_REQUIRED_OPTIONS: dict[str, tuple[str, ...]] = {
    "qwen-lists": ("generator", "generator_params_b"),
    "tot-game24": ("generator_params_b",),
    "rg-eval": ("generator_params_b",),
    "llm-monkeys": ("generator", "generator_params_b"),
}
_ALL_OPTIONS: tuple[str, ...] = tuple(dict.fromkeys(o for opts in _FORMAT_OPTIONS.values() for o in opts))


def _flag(option: str) -> str:
    return "--" + option.replace("_", "-")


#: Modules of other layers that add their own ``coba pools`` subcommands through ``register(sub)``.
OPTIONAL_SUBCOMMAND_MODULES: tuple[str, ...] = ("coba_cli.generate_cmd", "coba_cli.simulate_cmd")


def _summary(pool: Pool) -> str:
    m = pool.manifest
    datasets = ", ".join(f"{k} {v}" for k, v in m["datasets"].items())
    return (f"{m['counts']['episodes']} episodes x {m['n_candidates']} candidates; items {m['counts']['items']} "
            f"({datasets}); models {m['counts']['models']}; tiers {', '.join(m['tiers']) or 'none'}; "
            f"verifications {m['counts']['verifications']}")


def _import_sources_and_dest(args: argparse.Namespace) -> tuple[list[str], str, str]:
    """(sources, destination, how it was given): ``SRC... --out DEST``, or the older ``SRC... DEST``."""
    if args.out is not None:
        if len(args.src) > 1 and args.format not in MULTI_SOURCE_FORMATS:
            raise UsageError(f"give the output once: --out {args.out} or DEST {args.src[-1]}, not both")
        return list(args.src), args.out, "--out"
    if len(args.src) < 2:
        raise UsageError("the output is missing: give --out DEST")
    return list(args.src[:-1]), args.src[-1], "DEST"


def _cmd_import(args: argparse.Namespace) -> int:
    given = {opt: getattr(args, opt) for opt in _ALL_OPTIONS if getattr(args, opt, None) is not None}
    wrong = [opt for opt in given if opt not in _FORMAT_OPTIONS[args.format]]
    if wrong:
        takers = [fmt for fmt, opts in _FORMAT_OPTIONS.items() if wrong[0] in opts]
        raise UsageError(f"{', '.join(_flag(o) for o in wrong)} only apply to --format {', '.join(takers)}")
    missing = [_flag(o) for o in _REQUIRED_OPTIONS.get(args.format, ()) if o not in given]
    if missing:
        raise UsageError(f"--format {args.format} needs {' and '.join(missing)} (the source does not say)")
    if "generator_params_b" in given and not given["generator_params_b"] > 0:
        raise UsageError(f"--generator-params-b {given['generator_params_b']:g}: expected the generator's size in "
                         "billions of parameters, a number > 0 (a size of 0 would make every call free under the "
                         "parameter-weighted cost p_tokens)")
    options = dict(given)
    roles = _verifier_roles(args.verifier_role or [])
    prices = _prices(args.price or [])
    sources, dest_arg, given_as = _import_sources_and_dest(args)
    if len(sources) > 1 and args.format not in MULTI_SOURCE_FORMATS:
        raise UsageError(f"--format {args.format} imports one SRC; several only with --format "
                         f"{', '.join(MULTI_SOURCE_FORMATS)}")
    dest = check_output_dir(dest_arg, force=args.force, option=given_as, inputs=sources, kind="pool")
    folder_ok = args.format in ("llm-monkeys", "rg-eval")  # a folder of sample YAMLs / of results files
    for name in sources:
        src = Path(name)
        if not (src.is_file() or (folder_ok and src.is_dir())):
            what = ("is a folder" if src.is_dir() else "not a regular file" if src.exists()
                    else "no such file or folder" if folder_ok else "no such file")
            raise PoolError(f"{what}; expected the {'candidate file or folder' if folder_ok else 'candidate file'} "
                            "to import", file=name)
    pool = import_pool(sources if len(sources) > 1 else sources[0], args.format, labels=args.labels,
                       **options)  # everything in memory; nothing written yet
    if roles:
        pool.manifest["verifier_roles"] = {**(pool.manifest.get("verifier_roles") or {}), **roles}
        validate_pool(pool, source=sources[0])  # a role for a verifier the pool does not have is refused
    if prices:
        unknown = [m for m in prices if m not in set(pool.models["name"])]
        if unknown:
            raise UsageError(f"--price {unknown[0]}=...: no such model in the pool; its models are "
                             f"{', '.join(pool.models['name'])}")
        pool.manifest[PRICES_KEY] = {**(pool.manifest.get(PRICES_KEY) or {}), **prices}  # --price wins per model
    save_pool(pool, dest, overwrite=args.force, inputs=sources)
    print(f"imported {', '.join(sources)} -> {dest}: {_summary(pool)}")
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


def _cmd_export(args: argparse.Namespace) -> int:
    args.dest, given_as = chosen_out(args)
    dest = check_output_file(args.dest, force=args.force, option=given_as, inputs=[args.pool])
    pool = load_pool(args.pool)
    export_jsonl(pool, dest, overwrite=args.force, inputs=[args.pool])
    print(f"exported {args.pool} -> {dest}: {len(pool.candidates)} lines")
    older_form_note(args.dest, given_as)
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    pool = load_pool(args.pool)
    print(f"ok: {args.pool}: {_summary(pool)}")
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    stats = inspect_pool(load_pool(args.pool))
    print(strict_dumps(stats, indent=2) if args.json else format_inspection(stats))  # NaN statistics -> null
    return 0


def _register_optional(sub: argparse._SubParsersAction, module: str) -> None:
    """Call ``module.register(sub)`` when that module is installed (it is another layer's, added separately)."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return
        raise
    mod.register(sub)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``coba pools`` and its subcommands."""
    parser = subparsers.add_parser("pools", help="make, import, check and inspect candidate pools (coba pools "
                                   "--help lists every subcommand)", formatter_class=ExampleFormatter,
                                   epilog=examples("coba pools simulate --profile tiny --out runs/pools/tiny",
                                                   "coba pools import pool.jsonl --out runs/pools/mine",
                                                   "coba pools inspect runs/pools/mine"))
    sub = parser.add_subparsers(dest="pools_command", metavar="SUBCOMMAND")

    p = sub.add_parser("import", help="import a foreign candidate file into a pool directory",
                       description="Import candidates into a new pool directory (see docs/POOLS.md). The pool "
                       "is built and validated in memory first; nothing is written on failure.",
                       formatter_class=ExampleFormatter,
                       epilog=examples("coba pools import pool.jsonl --out runs/pools/mine --verifier-role V3=reward_model",
                                       "coba pools import math_cot_100.jsonl --out runs/pools/qwen --format qwen-lists "
                                       "--generator Qwen2.5-Math-7B-Instruct --generator-params-b 7.6",
                                       "# the older form `coba pools import SRC DEST` still works"))
    p.add_argument("src", nargs="+", metavar="SRC", help="source file (rg-eval: files or folders, several into one "
                   "pool); without --out, the last one is the pool directory to create (the older form SRC DEST)")
    p.add_argument("--out", dest="out", default=None, metavar="DEST", help="pool directory to create")
    p.add_argument("--format", choices=list(IMPORTERS), default="jsonl",
                   help="source format (default: jsonl; see docs/POOLS.md for each)")
    p.add_argument("--force", action="store_true", help="replace DEST if it is a pool coba-env wrote (a folder "
                   "holding anything else is never replaced)")
    p.add_argument("--verifier-role", action="append", metavar="TIER=ROLE",
                   help="what the verifier stored in TIER is (repeatable): ROLE one of "
                   f"{', '.join(VERIFIER_ROLES)}; default the paper tier's role (V1 cheap_judge, V2 "
                   "process_judge, V3 strong_verifier; qwen-lists: its reward model is reward_model). Policies "
                   "map the roles they need onto these (docs/POLICIES.md, 'Verifier roles')")
    m = p.add_argument_group("model options (qwen-lists, tot-game24, rg-eval, llm-monkeys)")
    m.add_argument("--generator", help="generator model name (tot-game24: default from the file name; rg-eval: "
                   "default the file's 'model')")
    m.add_argument("--generator-params-b", type=finite_float, help="generator size in billions of parameters "
                   "(> 0; rg-eval: every model of the files)")
    p.add_argument("--dataset", help="dataset name of the items (qwen-lists: default math; llm-monkeys: default "
                   "the directory's name; rg-eval: default each task's name; jsonl, tot-game24: renames the "
                   "source's one dataset)")
    p.add_argument("--labels", choices=("source", "grader"), default="source",
                   help="correctness labels of the pool: the source's own (default) or the project's grader "
                   "(docs/GRADING.md); the import lists every candidate where they disagree")
    p.add_argument("--price", action="append", metavar="MODEL=IN[,OUT]",
                   help="price of MODEL in dollars per million input (and output) tokens, repeatable: gives the "
                   "pool the usd cost measure (docs/POOLS.md, 'Prices')")
    t = p.add_argument_group("tot-game24 options")
    t.add_argument("--puzzles", help="the puzzles file 24.csv (default: 24.csv next to SRC)")
    q = p.add_argument_group("qwen-lists options")
    q.add_argument("--rm-tier", choices=list(TIERS), help="tier the reward-model scores go to (default: V3)")
    q.add_argument("--rm-model", help=f"reward-model name (default: {DEFAULT_RM_MODEL})")
    q.add_argument("--rm-params-b", type=positive_float, help=f"reward-model size in billions (default: {DEFAULT_RM_PARAMS_B:g})")
    q.add_argument("--score-transform", choices=list(SCORE_TRANSFORMS),
                   help="map reward-model scores to [0, 1]: auto = sigmoid when any is outside [0, 1] (default)")
    r = p.add_argument_group("routellm options")
    r.add_argument("--gold", help="the GSM8K test split with the gold answers (default: test.jsonl next to SRC)")
    p.set_defaults(func=_cmd_import)

    p = sub.add_parser("export", help="write a pool as canonical JSONL", description="Write POOL as canonical "
                       "JSONL, one line per candidate, atomically.")
    p.add_argument("pool", help="pool directory")
    add_out_option(p, "JSONL file to write")
    p.add_argument("--force", action="store_true", help="replace DEST if it is an existing regular file")
    p.set_defaults(func=_cmd_export)

    p = sub.add_parser("validate", help="check a pool directory", description="Load and validate POOL; print "
                       "'ok: ...' and exit 0, or print the first problem and exit 2.")
    p.add_argument("pool", help="pool directory")
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser("inspect", help="per dataset x generator statistics of a pool",
                       description="Accuracy of first-sample, majority@N and pass@N, tokens, score coverage per "
                       "tier and grader agreement, per dataset x generator.")
    p.add_argument("pool", help="pool directory")
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")
    p.set_defaults(func=_cmd_inspect)

    for module in OPTIONAL_SUBCOMMAND_MODULES:
        _register_optional(sub, module)
    # Listed from the parser itself, so a subcommand added later is named too.
    parser.description = f"Candidate pools, one subcommand each: {', '.join(sub.choices)}."
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
