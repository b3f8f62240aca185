"""What ``coba bench --policies`` names, resolved to policy objects for one episode grouping.

A selection mixes registered names, the keywords ``all`` / ``main`` (their rules live in the registry:
``agents.registry.select_policies``), YAML spec files (their policies run, merged over the built-in specs),
``FILE.py:Class`` / ``module:Class`` references and checkpoints (``PATH[@LAMBDA]``, ``agents.policy_spec``).
Bad input raises ``BenchInputError`` with one line naming what was expected; the CLI exits 2 on it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from agents.base import Policy
from agents.registry import POLICY_SETS, UnknownPolicyError, select_policies
from agents.routing_base import written_for
from eval.envs import ENV_GROUPING

#: What a bench on each grouping needs at least one of.
NEEDED: dict[str, str] = {"pair": "policy written for one generator per episode",
                          "item": "routing policy or route oracle"}


class BenchInputError(ValueError):
    """Bad bench input (unknown policy, empty selection, unknown cost model); the CLI exits 2 on it."""


def _is_spec_file(text: str) -> bool:
    """A YAML spec file: only a name ending in .yaml / .yml is read as YAML (a .zip alone is a model)."""
    return text.endswith((".yaml", ".yml"))


def _spec_file_names(text: str) -> list[str]:
    """The policy names a YAML spec file defines (its policies are run)."""
    if not Path(text).is_file():
        raise BenchInputError(f"policy spec file {text!r} does not exist")
    import yaml

    from pools.strict_yaml import load_yaml

    try:
        data = load_yaml(Path(text).read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise BenchInputError(f"cannot parse policy spec file {text!r}: {' '.join(str(exc).split())}") from None
    except (UnicodeDecodeError, RecursionError) as exc:
        from pools.parse_boundary import parse_problem

        raise BenchInputError(f"cannot parse policy spec file {text!r}: {parse_problem(exc)}") from None
    if isinstance(data, dict) and "policies" in data:
        data = data["policies"]
    if not isinstance(data, dict) or not data:
        raise BenchInputError(f"policy spec file {text!r} names no policies")
    _check_policy_names(data, text)
    return [str(k) for k in data]


def parse_policies(value: str | Sequence[str] | None) -> tuple[list[str] | None, list[str]]:
    """Split ``--policies`` into (selection, YAML spec files). The selection mixes names, 'all', 'main',
    ``FILE.py:Class`` / ``module:Class`` references and checkpoints; a YAML file contributes its names."""
    if value is None:
        return None, []
    parts = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    names: list[str] = []
    files: list[str] = []
    for text in (p.strip() for p in parts):
        if not text:
            continue
        if _is_spec_file(text):
            names.extend(_spec_file_names(text))
            files.append(text)
        elif text.endswith(".py"):
            raise BenchInputError(f"policy {text!r}: a Python file; name the class in it as {text}:ClassName")
        else:
            names.append(text)
    if not names:
        raise BenchInputError("no policy named; give comma-separated names, 'all', 'main', YAML spec files, "
                              "FILE.py:Class or checkpoints")
    return list(dict.fromkeys(names)), files  # a repeated name runs once


def _check_policy_names(data: dict, source: str) -> None:
    """Policy names go into the report's tables and file names: printable text on one line."""
    from pools.safe_names import MAX_NAME_CHARS, control_character

    for name in data:
        bad = control_character(str(name))
        if not isinstance(name, str) or bad is not None or not name.strip() or len(name) > MAX_NAME_CHARS:
            why = f"holds the control character {bad}" if bad else "is not a name"
            raise BenchInputError(f"policy spec file {source!r}: the policy name {str(name)[:60]!r} {why}; expected "
                                  f"printable text on one line, at most {MAX_NAME_CHARS} characters")


def is_policy_set(policies: str | Sequence[str | Policy] | None) -> bool:
    """Whether ``--policies`` is the default selection: nothing, or one of the keywords ``POLICY_SETS``."""
    return policies is None or (isinstance(policies, str) and policies.strip() in POLICY_SETS)


def resolve_policy_objects(policies: str | Sequence[str | Policy] | None, specs: str | Path | None,
                           grouping: str = "pair") -> list[Policy]:
    """The policy objects of a ``--policies`` value for episodes of ``grouping``, in the caller's order ("all" /
    "main" expand in place; a name already chosen runs once); names must be unique."""
    from agents.learned import is_checkpoint
    from agents.plugins import is_class_ref
    from agents.registry import load_specs

    spec_files: list[str | Path] = [] if specs is None else [specs]
    items: list[str | Policy]
    if policies is None or isinstance(policies, str):
        names, from_files = parse_policies(policies)
        spec_files += from_files
        items = list(names) if names is not None else ["all"]
    else:
        items = list(policies)
    try:
        table = load_specs(spec_files)
    except ValueError as exc:
        raise BenchInputError(str(exc)) from exc

    def outside_table(text: str) -> bool:  # a checkpoint or the user's own class, built by make_policy
        return is_checkpoint(text) or (text not in table and is_class_ref(text))

    texts = [str(i).strip() for i in items if isinstance(i, str)]
    _selected([t for t in texts if t not in table and t not in POLICY_SETS and not outside_table(t)], table, grouping)
    objs: list[Policy] = []
    chosen: set[str] = set()
    for item in items:
        if isinstance(item, Policy):
            objs.append(item)
            continue
        item = str(item).strip()
        for name in [item] if outside_table(item) else _selected([item], table, grouping):
            if name not in chosen:
                chosen.add(name)
                objs.append(_make(name, table))
    return _unique(objs)


def _selected(names: list[str], table: dict, grouping: str) -> list[str]:
    """``agents.registry.select_policies``, its unknown-name error as a ``BenchInputError`` (no names: none)."""
    if not names:
        return []
    try:
        return select_policies(names, table, grouping)
    except UnknownPolicyError as exc:
        raise BenchInputError(str(exc)) from None


def _make(name: str, table: dict) -> Policy:
    """The policy ``name`` of ``table`` (or a checkpoint / class reference), with a one-line error."""
    from agents.learned import is_checkpoint
    from agents.policy_spec import given_lambda
    from agents.registry import make_policy

    try:
        policy = make_policy(name, specs=table)
    except (ValueError, FileNotFoundError, TypeError) as exc:
        what = "checkpoint" if is_checkpoint(name) else "policy"
        raise BenchInputError(str(exc) if str(exc).startswith("policy ") else
                              f"{what} {name!r}: {' '.join(str(exc).split())}") from exc
    if is_checkpoint(name) and given_lambda(name, is_checkpoint) is None and getattr(policy, "lam", None) is not None:
        print(f"note: checkpoint {name} runs at lambda {policy.lam:g} (its training default); "
              f"give {name}@LAMBDA to choose", file=sys.stderr)
    return policy


def _unique(objs: list[Policy]) -> list[Policy]:
    """``objs``, refusing an empty selection and two policies of one name."""
    if not objs:
        raise BenchInputError("no policy selected")
    names = [p.name for p in objs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise BenchInputError(f"policy names must be unique; repeated: {', '.join(dupes)}")
    return objs


def grouping_problem(policies: Sequence[Policy], grouping: str) -> str | None:
    """Why a bench on ``grouping`` cannot run ``policies`` (none of them is written for it), else None."""
    if not policies or any(written_for(p) == grouping for p in policies):
        return None
    names = ", ".join(p.name for p in policies[:5]) + (", ..." if len(policies) > 5 else "")
    env = next(e for e, g in ENV_GROUPING.items() if g == grouping)
    return (f"--env {env}: none of the selected policies ({names}) runs on the {env} env; expected at least one "
            f"{NEEDED[grouping]} (give no --policies for all of them, or see docs/POLICIES.md "
            "'Routing between generators')")
