"""The ``coba`` command: subcommands listed with descriptions, and the shared argument types reject bad input."""

from __future__ import annotations

import re

import pytest

from coba_cli.main import main


def test_help_lists_every_subcommand_with_a_description(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name in ("pools", "bench", "train", "sweep", "solve"):
        line = next(ln for ln in out.splitlines() if ln.strip().startswith(name + " "))
        assert len(line.split(None, 1)[1]) > 10, line


def test_no_subcommand_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "usage: coba" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["train", "mlp", "--lambdas", "-1"], r"--lambdas: expected lambdas that are finite numbers >= 0, got '-1'"),
    (["train", "mlp", "--lambdas", "0.1,x"], r"--lambdas: expected numbers separated by commas, got 'x' in '0.1,x'"),
    (["sweep", "--lambdas", ""], r"--lambdas: expected one or more lambdas >= 0"),
    (["solve", "2+2?", "--max-calls", "0"], r"--max-calls: expected an integer >= 1, got 0"),
    (["solve", "2+2?", "--max-seconds", "-5"], r"--max-seconds: expected a number > 0, got -5"),
    (["solve", "2+2?", "--max-calls", "two"], r"--max-calls: expected an integer, got 'two'"),
    (["pools", "generate", "w", "--n", "0"], r"--n: expected an integer >= 1, got 0"),
])
def test_bad_numbers_exit_2_naming_the_option(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert re.search(message, capsys.readouterr().err)
