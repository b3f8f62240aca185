"""``PATH@LAMBDA`` parsed once (agents.policy_spec): the saved policy, the lambda, and the exact bad-input lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.policy_spec import given_lambda, names_saved, split_at_lambda


@pytest.fixture
def saved(tmp_path: Path):
    """A folder 'run' standing for a saved policy, and a predicate that accepts only it."""
    (tmp_path / "run").mkdir()
    return tmp_path / "run", lambda text: text == str(tmp_path / "run")


def test_a_bare_path_and_a_path_with_a_lambda(saved):
    run, is_saved = saved
    assert split_at_lambda(run, is_saved) == (run, None)
    assert split_at_lambda(f"{run}@0.25", is_saved) == (run, 0.25)
    assert split_at_lambda(f"{run}x@0.25", is_saved) is None  # names nothing saved
    assert names_saved(f"{run}@anything", is_saved) and names_saved(run, is_saved)
    assert not names_saved(f"{run}x", is_saved)
    assert given_lambda(f"{run}@0.5", is_saved) == 0.5 and given_lambda(run, is_saved) is None


@pytest.mark.parametrize(("suffix", "what", "message"), [
    ("abc", "checkpoint spec", "expected PATH@LAMBDA with a number after '@', got 'abc'"),
    ("-1", "checkpoint spec", "expected a finite lambda >= 0 after '@', got '-1'"),
    ("nan", "model spec", "expected a finite lambda >= 0 after '@', got 'nan'"),
    ("1e9", "model spec", "expected a lambda from 0 to 1e\\+06 \\(the env's range\\) after '@', got '1e9'"),
])
def test_a_bad_lambda_is_one_line_naming_the_spec(saved, suffix, what, message):
    run, is_saved = saved
    with pytest.raises(ValueError, match=f"^{what} '.*run@{suffix}': {message}$"):
        split_at_lambda(f"{run}@{suffix}", is_saved, what)
