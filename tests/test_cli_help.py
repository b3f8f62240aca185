"""Help that teaches: examples under bench, sweep, train, solve and pools import that parse with the real
parser; ``coba train KIND --help`` per kind; ``coba pools --help`` naming every subcommand; ``--out`` as the
one way to name an output, the older positional DEST still working."""

from __future__ import annotations

import argparse
import shlex

import pytest

from coba_cli.arg_types import join_number_lists
from coba_cli.help_text import command_parser, example_lines
from coba_cli.main import build_parser, main

#: The pools subcommands docs/POOLS.md and docs/GENERATION.md describe.
POOLS_SUBCOMMANDS = ("import", "export", "validate", "inspect", "generate", "verify", "build", "simulate")


def _subparser(parser: argparse.ArgumentParser, *path: str) -> argparse.ArgumentParser:
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def _help(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("path", [("bench",), ("sweep",), ("train",), ("solve",), ("pools", "import"), ("pools",)])
def test_help_shows_examples_that_parse(path, capsys):
    parser = build_parser()
    lines = example_lines(_subparser(parser, *path))
    assert lines, f"coba {' '.join(path)} --help shows no example"
    assert "examples:" in _help([*path, "--help"], capsys)
    for line in lines:
        argv = shlex.split(line)
        assert argv[0] == "coba"
        args = build_parser().parse_args(join_number_lists(argv[1:]))  # exits 2 on an unknown option
        assert callable(args.func), line


@pytest.mark.parametrize("kind, shown, hidden", [
    ("mlp", ["--rounds", "--epochs", "--loss", "--lodo", "coba train mlp --pool tiny"], ["--timesteps"]),
    ("ppo", ["--timesteps", "--lodo", "MaskablePPO", "coba train ppo --pool tiny"], ["--rounds", "--epochs", "--loss"]),
    ("rollout", ["--lodo", "CoBa-Routed-Strong", "coba train rollout --lodo"], ["--timesteps", "--rounds"]),
    ("stop_gate", ["--lodo", "Learn-then-Test", "coba train stop_gate --lodo"], ["--timesteps", "--rounds"]),
    ("coba_search", ["--lodo", "Optuna", "coba train coba_search --lodo"], ["--timesteps", "--rounds"]),
    ("route_search", ["--lodo", "--env", "route", "coba train route_search --lodo --env route"],
     ["--timesteps", "--rounds"]),
])
def test_train_kind_help_is_that_kinds(kind, shown, hidden, capsys):
    out = _help(["train", kind, "--help"], capsys)
    assert out.startswith(f"usage: coba train {kind} ")
    for text in shown:
        assert text in out, text
    for text in hidden:
        assert text not in out, text


def test_train_help_without_kind_lists_every_option(capsys):
    out = _help(["train", "--help"], capsys)
    from agents.controller_kinds import controller_kinds

    kinds = "{" + ",".join(controller_kinds()) + "}"  # every declared kind (agents/controllers.yaml), routers too
    assert "knn_router" in kinds and "mlp" in kinds
    for text in ("--timesteps", "--rounds", kinds, "--problem-features", "--env {replay,route}",
                 "coba train KIND --help"):
        assert text in out, text


def test_pools_help_names_every_subcommand(capsys):
    out = _help(["pools", "--help"], capsys)
    description = out.split("positional arguments")[0]
    for name in POOLS_SUBCOMMANDS:
        assert name in description, name


def test_bench_policies_help_names_every_kind_of_item(capsys):
    out = " ".join(_help(["bench", "--help"], capsys).split())
    for text in ("'main'", "YAML", "FILE.py:Class", "module:Class", "checkpoint", "PATH@LAMBDA", ".zip"):
        assert text in out, text


@pytest.mark.parametrize("form", ["positional", "--out"])
def test_pools_import_takes_out_or_the_older_positional_dest(form, small_jsonl, tmp_path, capsys):
    jsonl = small_jsonl
    dest = tmp_path / "pool"
    argv = ["pools", "import", str(jsonl), *([str(dest)] if form == "positional" else ["--out", str(dest)])]
    assert main(argv) == 0
    assert (dest / "manifest.json").is_file()
    # The older form works, with a note naming the shared form; --out gives none.
    note = f"note: the positional DEST is the older form; `--out {dest}` is the one every command takes"
    assert capsys.readouterr().err.strip() == (note if form == "positional" else "")
    assert main(["pools", "export", str(dest), "--out", str(tmp_path / "back.jsonl")]) == 0
    assert (tmp_path / "back.jsonl").read_text().count("\n") == jsonl.read_text().count("\n")


@pytest.mark.parametrize("argv_tail, message", [
    ([], r"the output is missing: give --out DEST"),
    (["a", "--out", "b"], r"give the output once: --out b or DEST a, not both"),
])
def test_pools_import_output_given_once(argv_tail, message, small_jsonl, tmp_path, monkeypatch, capsys):
    jsonl = small_jsonl
    monkeypatch.chdir(tmp_path)
    assert main(["pools", "import", str(jsonl), *argv_tail]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    import re

    assert re.search(message, err), err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_command_parser_reads_help_description_and_examples_from_the_docstring():
    doc = """``coba demo``: do a demo thing.

    Replay the demo
    on every item.

    examples:
      coba demo --n 1
      coba demo --n 2

    A note for developers, never shown.
    """
    sub = argparse.ArgumentParser(prog="coba").add_subparsers()
    parser = command_parser(sub, "demo", doc.replace("\n    ", "\n"))
    assert (sub.choices["demo"], sub._choices_actions[0].help) == (parser, "do a demo thing")
    assert parser.description == "Replay the demo on every item."
    assert example_lines(parser) == ["coba demo --n 1", "coba demo --n 2"]
    assert "developers" not in parser.format_help()
