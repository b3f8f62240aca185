"""``coba sweep --grid NAME=v1,v2,...``: a parameter of any policy (the user's own class, a registered policy, a
policy of a YAML file) swept into a front, written as a table and a figure with 95% error bars; bad grids are
one line and exit 2.

Expected values come from other paths: a class sampling k candidates then stopping at k = 1 is greedy (benched
by ``coba bench``), the registered best-of-n at n = 1, 2, 4 is the sweep's own best_of_n family, and the figure's
bars are checked against the table's intervals."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from coba_cli.main import main
from eval.front_figure import fronts_figure
from tests.test_bench_statistics import bars_of

K_THEN_STOP = '''
from agents.base import Policy


class KThenStop(Policy):
    """Sample k candidates, then stop on the fusion rank."""

    selection = "fusion"

    def __init__(self, k: int = 2):
        super().__init__()
        self.k = k

    def act(self, observation, action_mask, evidence):
        if evidence.n_revealed < self.k and action_mask[self.sample_id]:
            return self.sample_id
        return self.stop_id
'''


def sweep(tmp_path: Path, *args: str) -> Path:
    out = tmp_path / "sweep"
    assert main(["sweep", "--pool", "tiny", "--out", str(out), "--no-progress", *args]) == 0
    return out


def test_a_grid_over_the_users_own_class_writes_a_front_with_a_figure(tmp_path, capsys):
    rule = tmp_path / "k_then_stop.py"
    rule.write_text(K_THEN_STOP)
    out = sweep(tmp_path, "--policies", f"{rule}:KThenStop", "--grid", "k=1,2,4,8")
    printed = capsys.readouterr().out
    table = pd.read_csv(out / "frontier.csv").set_index("policy")
    assert list(table.index) == [f"KThenStop[k={k}]" for k in (1, 2, 4, 8)]
    assert set(table["family"]) == {"KThenStop"} and list(table["param"]) == ["k=1", "k=2", "k=4", "k=8"]
    assert list(table["calls"]) == [1.0, 2.0, 4.0, 8.0]  # k samples, nothing else
    # k = 1 is greedy: the same accuracy and cost as coba bench measures for it.
    bench = tmp_path / "bench"
    assert main(["bench", "--pool", "tiny", "--policies", "greedy", "--out", str(bench), "--no-figures",
                 "--no-progress"]) == 0
    greedy = json.loads((bench / "results.json").read_text())["policies"]["greedy"]
    assert table.loc["KThenStop[k=1]", "acc"] == pytest.approx(greedy["macro"]["acc"])
    assert table.loc["KThenStop[k=1]", "cost"] == pytest.approx(greedy["macro"]["p_tokens"])
    # Its interval too: the same bootstrap (items, 2,000 resamples, seed 0) on the same records.
    assert table.loc["KThenStop[k=1]", ["acc_low", "acc_high"]].tolist() == pytest.approx(greedy["ci95"]["acc"])
    # The front and the figure, with error bars spanning the table's intervals.
    assert "KThenStop[k=8]" in (out / "frontier.md").read_text()
    for ext in ("png", "svg"):
        assert (out / f"frontier.{ext}").stat().st_size > 10_000
    fig = fronts_figure(table.reset_index(), "p_tokens")
    drawn = bars_of(fig.axes[0])
    for name, row in table.iterrows():
        (x0, x1), (y0, y1) = drawn[name]
        assert (x0, x1) == pytest.approx((row["cost_low"], row["cost_high"]))
        assert (y0, y1) == pytest.approx((row["acc_low"], row["acc_high"]))
    assert sorted(t.get_text() for t in fig.axes[0].texts) == ["k=1", "k=2", "k=4", "k=8"]  # which value is which
    plt.close(fig)
    assert f"written: {out}/frontier.csv, {out}/frontier.md, {out}/frontier.png (and .svg)" in printed


def test_a_grid_over_a_registered_policy_equals_the_fixed_family(tmp_path):
    grid = pd.read_csv(sweep(tmp_path / "grid", "--policies", "bon4_majority", "--grid", "n=1,2,4",
                             "--no-figures") / "frontier.csv").set_index("param")
    family = pd.read_csv(sweep(tmp_path / "family", "--policies", "best_of_n", "--no-figures") / "frontier.csv")
    family = family.set_index("param")
    assert list(grid.index) == ["n=1", "n=2", "n=4"]
    for param in grid.index:
        for column in ("acc", "cost", "calls", "acc_low", "acc_high"):
            assert grid.loc[param, column] == pytest.approx(family.loc[param, column]), (param, column)
    assert not (tmp_path / "grid" / "sweep" / "frontier.png").exists()  # --no-figures


def test_a_grid_over_a_policy_of_a_yaml_file(tmp_path):
    spec = tmp_path / "mine.yaml"
    spec.write_text("policies:\n  my_vote:\n    kind: best_of_n\n    label: My vote\n    params: {n: 2}\n")
    table = pd.read_csv(sweep(tmp_path, "--policies", str(spec), "--grid", "n=2,8", "--no-figures")
                        / "frontier.csv")
    assert list(table["policy"]) == ["my_vote[n=2]", "my_vote[n=8]"] and list(table["calls"]) == [2.0, 8.0]


@pytest.mark.parametrize(("policies", "grid", "message"), [
    ("RULE", ["k"], "--grid 'k': expected NAME=v1,v2,... with NAME a parameter name"),
    ("RULE", ["k="], "--grid 'k=': no value after '='"),
    ("RULE", ["2k=1"], "--grid '2k=1': expected NAME=v1,v2,... with NAME a parameter name"),
    ("RULE", ["k=1,,2"], "--grid 'k=1,,2': an empty value between commas; expected NAME=v1,v2,..."),
    ("RULE", ["k=1,2,"], "--grid 'k=1,2,': an empty value between commas; expected NAME=v1,v2,..."),
    ("RULE", ["k=1", "k=2"], "--grid names 'k' twice; give all its values in one option"),
    ("RULE", ["k=nan"], "--grid value 'nan': expected a finite number"),
    ("RULE", ["depth=1,2"], "--grid depth=1: policy 'RULE': policy 'KThenStop': __init__() raised TypeError: "
                            "KThenStop.__init__() got an unexpected keyword argument 'depth'"),
    ("bon4_majority", ["k=1"], "--grid k=1: policy 'bon4_majority': unknown parameter(s) ['k'] for policy kind "
                               "'best_of_n'; expected some of ['n']"),
    ("coba", ["n_max=2"], "--grid sweeps a parameter of a policy: the family 'coba' has its own grid; name its "
                          "policy (coba_strong) to sweep one of its parameters"),
    (None, ["k=1"], "--grid sweeps a parameter of the policies you name: give them with --policies"),
    ("RULE", [f"k={','.join(map(str, range(201)))}"], "--grid makes 201 points; at most 200"),
])
def test_a_bad_grid_exits_2_with_one_line(policies, grid, message, tmp_path, capsys):
    rule = tmp_path / "k_then_stop.py"
    rule.write_text(K_THEN_STOP)
    ref = f"{rule}:KThenStop"
    argv = ["sweep", "--pool", "tiny", "--out", str(tmp_path / "s"), "--no-progress"]
    if policies is not None:
        argv += ["--policies", policies.replace("RULE", ref)]
    for option in grid:
        argv += ["--grid", option]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.endswith(message.replace("RULE", ref))
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(("options", "expected"), [
    (["k=1,2,1"], {"k": (1, 2)}),                  # a repeated value is one point
    (["k=1,true,1.0"], {"k": (1, True, 1.0)}),     # but 1, true and 1.0 are three (Python: True == 1 == 1.0)
    (["k=2", "mode=a,b"], {"k": (2,), "mode": ("a", "b")}),
])
def test_grid_values_are_read_as_yaml_scalars(options, expected):
    from train.sweep_grid import parse_grid

    grid = parse_grid(options)
    assert grid == expected
    assert [[type(v) for v in values] for values in grid.values()] == [[type(v) for v in values]
                                                                       for values in expected.values()]
