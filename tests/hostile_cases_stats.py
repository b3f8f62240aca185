"""Hostile inputs of issue 39's presentation half, in the format of ``tests/hostile_cases.py``.

A bench in which no requested policy can run (it used to print "No policy ran" and exit 0), a ``--reference``
that is not benched, and ``coba sweep --grid`` options that are malformed or name a parameter the policy does not
take. The shared harness asserts one error line, exit 2 and an unchanged case folder.
"""

from __future__ import annotations

from pathlib import Path

from tests.hostile_harness import Case

#: A user's policy class for ``--grid``: k samples, then STOP.
K_THEN_STOP = '''
from agents.base import Policy


class KThenStop(Policy):
    selection = "fusion"

    def __init__(self, k: int = 2):
        super().__init__()
        self.k = k

    def act(self, observation, action_mask, evidence):
        if evidence.n_revealed < self.k and action_mask[self.sample_id]:
            return self.sample_id
        return self.stop_id
'''


def _rule(d: Path) -> None:
    (d / "rule.py").write_text(K_THEN_STOP)


def _grid(case_id: str, grid: tuple[str, ...], message: str, policies: str | None = "rule.py:KThenStop") -> Case:
    argv = ("sweep", "--pool", "pool", "--out", "s", "--no-progress")
    argv += ("--policies", policies) if policies is not None else ()
    for option in grid:
        argv += ("--grid", option)
    return Case(f"grid-{case_id}", argv, 2, message, setup=_rule)


STATS_CASES: dict[str, list[Case]] = {
    "bench": [
        Case("no-requested-policy-can-run", ("bench", "--pool", "pool", "--policies", "bon16_majority", "--out", "b"),
             2, r"no requested policy can run on this pool \(bon16_majority: Best-of-16 majority needs 16 candidates "
                r"per episode; the env allows N_max = 3\)"),
        Case("reference-not-selected", ("bench", "--pool", "pool", "--policies", "greedy,coba_strong", "--reference",
                                        "bon4_majority", "--out", "b"),
             2, r"--reference 'bon4_majority' is not among the selected policies; expected one of greedy, coba_strong$"),
        Case("reference-unknown", ("bench", "--pool", "pool", "--reference", "nosuch", "--out", "b"),
             2, r"--reference 'nosuch' is not among the selected policies; expected one of greedy, "),
        Case("reference-empty", ("bench", "--pool", "pool", "--policies", "greedy,pool_oracle", "--reference", "",
                                 "--out", "b"),
             2, r"--reference '' is not among the selected policies; expected one of greedy, pool_oracle$"),
        Case("reference-one-generator-policy-on-route", ("bench", "--pool", "pool", "--env", "route", "--policies",
                                                         "route_cascade,model_switch", "--reference", "greedy",
                                                         "--out", "b"),
             2, r"--reference 'greedy' is not among the selected policies; expected one of route_cascade, "
                r"model_switch$"),
    ],
    "sweep": [
        _grid("no-equals", ("k",), r"--grid 'k': expected NAME=v1,v2,\.\.\. with NAME a parameter name"),
        _grid("no-value", ("k=",), r"--grid 'k=': no value after '='"),
        _grid("empty-value", ("k=1,,2",), r"--grid 'k=1,,2': an empty value between commas"),
        _grid("name-not-identifier", ("2k=1",), r"--grid '2k=1': expected NAME=v1,v2,\.\.\. with NAME a parameter"),
        _grid("name-twice", ("k=1", "k=2"), r"--grid names 'k' twice; give all its values in one option"),
        _grid("value-nan", ("k=nan",), r"--grid value 'nan': expected a finite number"),
        _grid("value-inf", ("k=1,-inf",), r"--grid value '-inf': expected a finite number"),
        _grid("too-many-points", ("k=" + ",".join(map(str, range(1, 202))),), r"--grid makes 201 points; at most 200"),
        _grid("class-has-no-such-parameter", ("depth=1,2",),
              r"--grid depth=1: policy 'rule\.py:KThenStop': policy 'KThenStop': __init__\(\) raised TypeError: "
              r"KThenStop\.__init__\(\) got an unexpected keyword "
              r"argument 'depth'"),
        _grid("kind-has-no-such-parameter", ("k=1",), r"--grid k=1: policy 'bon4_majority': unknown parameter\(s\) "
                                                      r"\['k'\] for policy kind 'best_of_n'; expected some of \['n'\]",
              policies="bon4_majority"),
        _grid("value-not-an-integer", ("n=2.5",), r"--grid n=2\.5: policy 'bon4_majority': parameter 'n' of policy "
                                                  r"kind 'best_of_n' is 2\.5; expected an integer",
              policies="bon4_majority"),
        _grid("value-text-for-an-integer", ("n=abc",), r"parameter 'n' of policy kind 'best_of_n' is 'abc'; "
                                                       r"expected an integer", policies="bon4_majority"),
        _grid("point-cannot-run", ("n=2,16",), r"1 sweep point\(s\) cannot run on this pool \(bon4_majority\[n=16\]: "
                                               r"Best-of-4 majority n=16 needs 16 candidates per episode",
              policies="bon4_majority"),
        _grid("of-a-family", ("n_max=2",), r"--grid sweeps a parameter of a policy: the family 'coba' has its own "
                                           r"grid; name its policy \(coba_strong\)", policies="coba"),
        _grid("without-policies", ("k=1",), r"--grid sweeps a parameter of the policies you name: give them with "
                                            r"--policies", policies=None),
    ],
}
