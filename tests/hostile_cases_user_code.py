"""Hostile cases of issue 39, in the format of ``tests/hostile_cases.py``: user code that must not crash the tool.

A policy class from ``rules.py`` (written into the case folder) raises, exits, recurses or returns something
that is not an action id, in ``__init__`` or ``act``, under ``coba bench``, ``coba sweep`` and ``coba solve``.
Each must end in one line naming the policy, where it happened and what the code did, exit 2, with nothing
written (the bench's other policies ran, but no result folder appears as if it were complete). Actions are
never coerced: 0.9 is not 0, ``'4'`` and ``True`` are refused, as the env refuses ``step(2.7)``. The other
cases of this issue (the env's spaces, manifests, checkpoints, and what was left from before) follow.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tests.hostile_harness import Case

#: The user's file: one Policy class per misbehaviour (line numbers are part of the expected messages).
RULES = '''\
import sys
from agents.base import Policy
class Raises(Policy):
    def act(self, obs, mask, ev):
        return 1 / 0
class InitRaises(Policy):
    def __init__(self):
        raise RuntimeError("no init")
    def act(self, obs, mask, ev):
        return 0
class ReturnsNone(Policy):
    def act(self, obs, mask, ev):
        return None
class Float(Policy):
    def act(self, obs, mask, ev):
        return 0.9
class Str(Policy):
    def act(self, obs, mask, ev):
        return '4'
class Bool(Policy):
    def act(self, obs, mask, ev):
        return True
class Outside(Policy):
    def act(self, obs, mask, ev):
        return 7
class Masked(Policy):
    def act(self, obs, mask, ev):
        return 1
class Exits(Policy):
    def act(self, obs, mask, ev):
        sys.exit(0)
class Recurses(Policy):
    def act(self, obs, mask, ev):
        return self.act(obs, mask, ev)
class InitExits(Policy):
    def __init__(self):
        sys.exit(3)
    def act(self, obs, mask, ev):
        return 0
class InitRecurses(Policy):
    def __init__(self):
        self.__init__()
    def act(self, obs, mask, ev):
        return 0
class BatchFloat(Policy):
    batched = True
    def act(self, obs, mask, ev):
        return 0
    def act_batch(self, observations, action_masks, venv):
        return [0.0] * len(observations)
class BatchRaises(Policy):
    batched = True
    def act(self, obs, mask, ev):
        return 0
    def act_batch(self, observations, action_masks, venv):
        raise KeyError('row')
'''


def _rules(d: Path) -> None:
    (d / "rules.py").write_text(RULES)


def _exits_at_import(d: Path) -> None:
    (d / "quits.py").write_text("import sys\nsys.exit(0)\n")


def _line(cls: str) -> int:
    """The line of ``cls``'s misbehaving statement in ``RULES`` (two lines below its ``class`` line)."""
    return RULES.splitlines().index(f"class {cls}(Policy):") + 3


EPISODE = r"episode 0 \(episode_id 0: math/m1, gen-small\)"
PROBLEM = r"problem 'problem-1'"
NOT_AN_ID = r"; expected an integer action id from 0 to 4 \(actions are never rounded or converted\)"
#: class -> (what the message says it did, after "policy 'Class' on PLACE: ").
IN_ACT: dict[str, str] = {
    "Raises": r"act\(\) raised ZeroDivisionError: division by zero " + rf"\(rules\.py, line {_line('Raises')}\)$",
    "ReturnsNone": r"act\(\) returned None \(NoneType\)" + NOT_AN_ID,
    "Float": r"act\(\) returned 0\.9 \(float\)" + NOT_AN_ID,
    "Str": r"act\(\) returned '4' \(str\)" + NOT_AN_ID,
    "Bool": r"act\(\) returned True \(bool\)" + NOT_AN_ID,
    "Outside": r"act\(\) returned an illegal action: action 7 is outside the action space 0\.\.4",
    "Masked": r"act\(\) returned an illegal action: action 1 \(VERIFY_V1\) is not allowed now",
    "Exits": rf"act\(\) called sys\.exit\(0\) \(rules\.py, line {_line('Exits')}\)$",
    "Recurses": r"act\(\) recursed too deeply \(RecursionError: maximum recursion depth exceeded\) "
                rf"\(rules\.py, line {_line('Recurses')}\)$",
}
IN_INIT: dict[str, str] = {
    "InitRaises": rf"__init__\(\) raised RuntimeError: no init \(rules\.py, line {_line('InitRaises')}\)$",
    "InitExits": rf"__init__\(\) called sys\.exit\(3\) \(rules\.py, line {_line('InitExits')}\)$",
    "InitRecurses": rf"__init__\(\) recursed too deeply .*\(rules\.py, line {_line('InitRecurses')}\)$",
}

BENCH = ("bench", "--pool", "pool", "--out", "b", "--no-progress", "--no-figures", "--policies")
SWEEP = ("sweep", "--pool", "pool", "--out", "s", "--no-progress", "--policies")
SOLVE = ("solve", "--generator", "{url},gen-1.5B", "--sample-max-tokens", "16", "--max-attempts", "1", "--quiet",
         "--json", "t.json", "--policy")


#: The batched form (``act_batch``, the bench's default replay): class -> what the message says it did.
IN_ACT_BATCH: dict[str, str] = {
    "BatchFloat": r"act_batch\(\) returned an array of float64 of shape \(\d+,\); expected \d+ integer action ids from 0 "
                  r"to 4 \(actions are never rounded or converted\)",
    "BatchRaises": r"act_batch\(\) raised KeyError: 'row' " + rf"\(rules\.py, line {_line('BatchRaises') + 3}\)$",
}


def _user_code_cases(command: str) -> list[Case]:
    """Every misbehaviour of ``RULES`` under one command (the bench runs greedy beside it: nothing is written)."""
    argv, place = {"bench": (BENCH, EPISODE), "sweep": (SWEEP, EPISODE), "solve": (SOLVE, PROBLEM)}[command]
    tail = ("What is 1+1?",) if command == "solve" else ()
    given = (lambda cls: f"greedy,rules.py:{cls}") if command == "bench" else (lambda cls: f"rules.py:{cls}")
    cases = [Case(f"act-{cls}", (*argv, given(cls), *tail), 2, rf"policy '{cls}' on {place}: {what}", setup=_rules,
                  no_calls=True) for cls, what in IN_ACT.items()]
    cases += [Case(f"init-{cls}", (*argv, given(cls), *tail), 2, rf"policy '{cls}': {what}", setup=_rules,
                   no_calls=True) for cls, what in IN_INIT.items()]
    if command == "bench":
        cases += [Case(f"act-batch-{cls}", (*argv, given(cls)), 2, rf"policy '{cls}' on {place}: {what}", setup=_rules,
                       no_calls=True) for cls, what in IN_ACT_BATCH.items()]
    quits = "greedy,quits.py:X" if command == "bench" else "quits.py:X"
    cases.append(Case("sys-exit-at-import", (*argv, quits, *tail), 2,
                      r"policy 'quits\.py:X': quits\.py, line 2: error while importing it: it called sys\.exit\(0\)",
                      setup=_exits_at_import, no_calls=True))
    return cases


# ------------------------------------------------------------------------------------------ the left-overs
def _fifo(name: str):
    return lambda d: os.mkfifo(d / name)


def _write(name: str, text: str):
    return lambda d: (d / name).write_text(text)


def _journal_generation_edit(field: str, value) -> callable:
    """The work dir's journal with its first generation line's ``field`` set to ``value`` (as the user wrote it)."""
    def setup(d: Path) -> None:
        path = d / "work" / "journal.jsonl"
        lines = path.read_text().splitlines()
        k = next(i for i, t in enumerate(lines) if json.loads(t).get("kind") == "generation")
        rec = json.loads(lines[k])
        rec[field] = value
        lines[k] = json.dumps(rec)
        path.write_text("\n".join(lines) + "\n")
    return setup


def _pool_manifest(name: str, edit):
    def setup(d: Path) -> None:
        shutil.copytree(d / "pool", d / name)
        manifest = json.loads((d / name / "manifest.json").read_text())
        edit(manifest)
        (d / name / "manifest.json").write_text(json.dumps(manifest))
    return setup


def _checkpoint(name: str, edit):
    def setup(d: Path) -> None:
        shutil.copytree(d / "ck_ok", d / name)
        config = json.loads((d / name / "controller.json").read_text())
        edit(config)
        (d / name / "controller.json").write_text(json.dumps(config))
    return setup


SOLVE_PLAIN = ("solve", "--policy", "greedy", "--generator", "{url},gen-1.5B", "--sample-max-tokens", "16",
               "--max-attempts", "1", "--quiet")
YAML_PYTHON_OBJECT = "policies:\n  mine: !!python/object:os.system {}\n"
N_INPUTS = 26  # the MLP checkpoints of the harness: 21 features and the 5-action mask

def _routellm_gold_twice(d: Path) -> None:
    """A RouteLLM response CSV and a GSM8K gold file that holds its question twice (which line's gold is it?)."""
    import csv

    question = "Ducks lay 16 eggs; 7 are used. Each sells for $2. How much per day?"
    with open(d / "responses.csv", "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows([["prompt", "weak", "strong", "weak_response", "strong_response"],
                                  [question, "True", "True", "#### 18", "So $18."]])
    gold = [{"question": question, "answer": "9 * 2 = 18\n#### 18"}, {"question": question, "answer": "#### 19"}]
    (d / "test.jsonl").write_text("".join(json.dumps(g) + "\n" for g in gold))


LEFTOVER_CASES: dict[str, list[Case]] = {
    "pools import": [
        Case("routellm-gold-question-twice", ("pools", "import", "responses.csv", "--out", "rl", "--format", "routellm",
                                              "--gold", "test.jsonl"), 2,
             r"test\.jsonl, line 2, field 'question': the question of line 1 again; expected each question once",
             setup=_routellm_gold_twice),
    ],
    "solve": [
        Case("file-is-a-fifo", (*SOLVE_PLAIN, "--file", "probs.jsonl"), 2,
             r"probs\.jsonl: not a regular file \(a FIFO\); expected a JSONL file of problems", setup=_fifo("probs.jsonl"),
             no_calls=True),
        Case("policies-file-python-object-tag", (*SOLVE_PLAIN[:3], *SOLVE_PLAIN[3:], "--policies-file", "spec.yaml",
                                                  "1+1?"), 2,
             r"spec\.yaml: cannot parse the policy spec file: .*python/object", setup=_write("spec.yaml", YAML_PYTHON_OBJECT),
             no_calls=True),
        Case("generator-name-with-newline", ("solve", "--policy", "greedy", "--generator", "a\nb={url},gen-1.5B", "1+1?"),
             2, r"--generator .*: NAME 'a\\nb' holds the control character \\n; expected a name on one line",
             no_calls=True),
    ],
    "pools build": [
        Case("prompt-tokens-as-text", ("pools", "build", "work", "p"), 2,
             r"journal\.jsonl, line \d+, field 'prompt_tokens': expected an integer, got '19' \(str\)",
             setup=_journal_generation_edit("prompt_tokens", "19")),
    ],
    "bench": [
        Case("yaml-share-min-negative", (*BENCH[:-1], "--policies", "spec.yaml"), 2,
             r"policy 'mine': parameter 'share_min' of policy kind 'coba' is -1; expected a number from 0 to 1",
             setup=_write("spec.yaml", "policies:\n  mine:\n    kind: coba\n    params:\n      share_min: -1\n")),
        Case("manifest-generation-null", (*BENCH[:-1], "--policies", "greedy", "--pool", "p0"), 2,
             r"manifest\.json, table manifest, field 'generation': is None; expected an object",
             setup=_pool_manifest("p0", lambda m: m.update(generation=None))),
        Case("manifest-max-output-tokens-text", (*BENCH[:-1], "--policies", "greedy", "--pool", "p0"), 2,
             r"field 'generation': max_output_tokens is 'abc'; expected a number of tokens from 1 to 1e\+09",
             setup=_pool_manifest("p0", lambda m: m.update(generation={"max_output_tokens": "abc"}))),
        Case("checkpoint-feature-mean-wrong-length", (*BENCH[:-1], "--policies", "ck_mean"), 2,
             rf"ck_mean/controller\.json: field 'feature_mean' has 5 values; expected {N_INPUTS} finite numbers",
             setup=_checkpoint("ck_mean", lambda c: c.update(feature_mean=[0.0] * 5))),
        Case("checkpoint-feature-scale-zero", (*BENCH[:-1], "--policies", "ck_scale"), 2,
             rf"ck_scale/controller\.json: field 'feature_scale' holds 0\.0 at index 0; expected {N_INPUTS} finite "
             r"numbers > 0",
             setup=_checkpoint("ck_scale", lambda c: c.update(feature_scale=[0.0] * N_INPUTS))),
        Case("checkpoint-max-output-tokens-zero", (*BENCH[:-1], "--policies", "ck_mot"), 2,
             r"ck_mot/controller\.json: field 'max_output_tokens' is 0; expected a finite number > 0",
             setup=_checkpoint("ck_mot", lambda c: c.update(max_output_tokens=0))),
        Case("checkpoint-budget-tiny", (*BENCH[:-1], "--policies", "ck_budget"), 2,
             r"ck_budget/controller\.json: field 'budget' is 1e-300; expected a finite number > 0, from 1e-06 to 1e\+15",
             setup=_checkpoint("ck_budget", lambda c: c.update(budget=1e-300))),
        Case("checkpoint-cost-model-unknown", (*BENCH[:-1], "--policies", "ck_cost"), 2,
             r"ck_cost/controller\.json: field 'cost_model' is 'bogus'; expected one of \['tokens', 'p_tokens'",
             setup=_checkpoint("ck_cost", lambda c: c.update(cost_model="bogus"))),
    ],
    "pools validate": [
        Case("manifest-generation-null", ("pools", "validate", "p0"), 2,
             r"field 'generation': is None; expected an object",
             setup=_pool_manifest("p0", lambda m: m.update(generation=None))),
        Case("manifest-max-output-tokens-text", ("pools", "validate", "p0"), 2,
             r"field 'generation': max_output_tokens is 'abc'; expected a number of tokens from 1 to 1e\+09",
             setup=_pool_manifest("p0", lambda m: m.update(generation={"max_output_tokens": "abc"}))),
        Case("manifest-grader-agreement-text", ("pools", "validate", "p0"), 2,
             r"field 'provenance': grader_agreement is abc; expected an object \(rate, groups, \.\.\.\)",
             setup=_pool_manifest("p0", lambda m: m["provenance"].update(grader_agreement="abc"))),
        Case("manifest-provenance-a-list", ("pools", "validate", "p0"), 2,
             r"field 'provenance': is \[1\]; expected an object",
             setup=_pool_manifest("p0", lambda m: m.update(provenance=[1]))),
    ],
    "pools inspect": [
        Case("manifest-grader-agreement-group-text", ("pools", "inspect", "p0"), 2,
             r"field 'provenance': grader_agreement\.groups\[0\] is abc; expected an object of dataset, generator and "
             r"the counts agree <= compared",
             setup=_pool_manifest("p0", lambda m: m["provenance"].update(grader_agreement={"groups": ["abc"]}))),
    ],
    "sweep": [
        Case("checkpoint-feature-scale-zero", ("sweep", "--pool", "pool", "--policies", "ck_scale", "--out", "s"), 2,
             r"field 'feature_scale' holds 0\.0 at index 0",
             setup=_checkpoint("ck_scale", lambda c: c.update(feature_scale=[0.0] * N_INPUTS))),
    ],
}


def user_code_cases() -> dict[str, list[Case]]:
    """Issue 39's cases by command: user code per command, then the other left-overs."""
    out = {command: _user_code_cases(command) for command in ("bench", "sweep", "solve")}
    for command, cases in LEFTOVER_CASES.items():
        out.setdefault(command, []).extend(cases)
    return out
