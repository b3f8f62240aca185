"""Answer equivalence on real MATH-500 gold answers, thread safety, and Reasoning Gym scoring.

Every verdict in the tables below was written by hand (what a careful human grader would say), never
computed by the code under test.
"""

from __future__ import annotations

import json
import multiprocessing
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import pytest

from pools.grading import (
    answers_equivalent,
    answers_match_gold,
    equivalence,
    make_reasoning_gym_items,
    normalize_answer,
    reasoning_gym_scorer,
)
from pools.grading.equivalence import call_with_timeout

REPO_ROOT = Path(__file__).resolve().parents[1]
MATH500_PATH = REPO_ROOT / ".." / "shared" / "data" / "problems" / "math500.jsonl"


@pytest.fixture(scope="module")
def math500_gold() -> dict[str, str]:
    """unique_id -> gold answer, read from the MATH-500 file next to the repository."""
    if not MATH500_PATH.is_file():
        pytest.fail(
            f"MATH-500 problems not found at {MATH500_PATH.resolve()} (expected ../shared/data/problems/"
            "math500.jsonl relative to the repository root); the equivalence table needs its gold answers."
        )
    with MATH500_PATH.open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return {row["unique_id"]: row["answer"] for row in rows}


# (unique_id without "test/" and ".json", the gold as printed in the file, a hand-written answer, verdict)
MATH500_PAIRS: list[tuple[str, str, str, bool]] = [
    # ordered pairs, tuples: rewrites are equivalent, swapped or changed entries are not
    ("precalculus/807", r"\left( 3, \frac{\pi}{2} \right)", r"(3, \pi/2)", True),
    ("precalculus/807", r"\left( 3, \frac{\pi}{2} \right)", r"(3,\dfrac{\pi}{2})", True),
    ("precalculus/807", r"\left( 3, \frac{\pi}{2} \right)", r"\left(\frac{\pi}{2}, 3\right)", False),
    ("intermediate_algebra/956", "(6,31,-1)", "(6, 31, -1)", True),
    ("intermediate_algebra/956", "(6,31,-1)", "(6,-1,31)", False),
    ("intermediate_algebra/47", "(-2,1)", r"\left( -2, 1 \right)", True),
    ("intermediate_algebra/47", "(-2,1)", "(1,-2)", False),
    ("precalculus/541", r"\left( \frac{3}{2}, -13 \right)", "(1.5, -13)", True),
    ("precalculus/541", r"\left( \frac{3}{2}, -13 \right)", r"\left( \frac{3}{2}, 13 \right)", False),
    ("intermediate_algebra/690", "(1,-16,-4,43)", "(1,-16,-4,-43)", False),
    # fractions, decimals, \dfrac, shorthand \frac43
    ("algebra/2584", r"\frac{14}{3}", "14/3", True),
    ("algebra/2584", r"\frac{14}{3}", r"\dfrac{14}{3}", True),
    ("algebra/2584", r"\frac{14}{3}", r"\frac{3}{14}", False),
    ("prealgebra/1558", "1.25", r"\frac{5}{4}", True),
    ("prealgebra/1558", "1.25", "1.250", True),
    ("prealgebra/572", "0.15", r"\frac{3}{20}", True),
    ("prealgebra/572", "0.15", ".15", True),
    ("prealgebra/572", "0.15", "0.015", False),
    ("intermediate_algebra/515", r"\frac43", r"\frac{4}{3}", True),
    ("intermediate_algebra/515", r"\frac43", "4/3", True),
    ("intermediate_algebra/515", r"\frac43", "1.33", False),
    ("prealgebra/153", r"\frac 59", "5/9", True),
    ("algebra/2257", r"\frac9{19}", r"\tfrac{9}{19}", True),
    ("counting_and_probability/377", r"\frac{448}{15625}", "0.028672", True),
    ("number_theory/410", ".35625", r"\frac{57}{160}", True),
    ("number_theory/598", ".0000672", "0.0000672", True),
    ("number_theory/598", ".0000672", r"6.72 \times 10^{-5}", True),
    ("prealgebra/1784", "326.5", r"\frac{653}{2}", True),
    ("geometry/947", r"-\frac{24}{25}", "-0.96", True),
    ("geometry/947", r"-\frac{24}{25}", r"\frac{24}{25}", False),
    ("intermediate_algebra/1279", r"\frac{2}{1005}", "2/1005", True),
    # mixed numbers
    ("geometry/826", r"1\frac{4}{5}", r"\frac{9}{5}", True),
    ("geometry/826", r"1\frac{4}{5}", "1.8", True),
    ("algebra/2470", r"137 \frac{1}{2}", "137.5", True),
    ("algebra/2470", r"137 \frac{1}{2}", r"\frac{275}{2}", True),
    # pi forms
    ("precalculus/1105", r"-\frac{\pi}{6}", r"\frac{-\pi}{6}", True),
    ("precalculus/1105", r"-\frac{\pi}{6}", r"\frac{\pi}{6}", False),
    ("geometry/686", r"18+2\pi", r"2\pi + 18", True),
    ("geometry/686", r"18+2\pi", r"18+\pi", False),
    ("intermediate_algebra/1111", r"\frac{20000}{\pi}", r"20000/\pi", True),
    ("intermediate_algebra/1111", r"\frac{20000}{\pi}", r"\frac{\pi}{20000}", False),
    ("precalculus/1056", r"288 \pi", r"288\pi", True),
    # square roots
    ("algebra/2036", r"3\sqrt{13}", r"\sqrt{117}", True),
    ("algebra/2036", r"3\sqrt{13}", r"3\sqrt{31}", False),
    ("prealgebra/1302", r"11\sqrt2", r"11\sqrt{2}", True),
    ("prealgebra/1302", r"11\sqrt2", r"\sqrt{242}", True),
    ("intermediate_algebra/1454", r"70 \sqrt{2}", r"70\sqrt2", True),
    ("algebra/1519", r"\frac{\sqrt{3}}{3}", r"\frac{1}{\sqrt{3}}", True),
    ("algebra/1078", r"(-\sqrt{3}, \sqrt{3})", r"(-\sqrt3,\sqrt3)", True),
    # complex numbers
    ("precalculus/990", "6 - 5i", "-5i+6", True),
    ("precalculus/990", "6 - 5i", "6+5i", False),
    ("intermediate_algebra/1063", "1+274i", "274i+1", True),
    # polynomials and expressions
    ("algebra/2046", "x^3+3x-6", "-6+3x+x^3", True),
    ("algebra/2046", "x^3+3x-6", "x^3+3x+6", False),
    ("prealgebra/1924", "2k+2", "2(k+1)", True),
    ("prealgebra/1924", "2k+2", "2k+1", False),
    ("intermediate_algebra/431", "(a+5)(b+2)", "ab+2a+5b+10", True),
    ("intermediate_algebra/1467", "8n^2 + 4n + 1", "4n+8n^2+1", True),
    ("intermediate_algebra/1467", "8n^2 + 4n + 1", "8n^2+4n-1", False),
    ("algebra/2735", r"\frac{11+9a}{20}", r"\frac{9a+11}{20}", True),
    ("precalculus/24313", r"\cot x", r"\frac{\cos x}{\sin x}", True),
    ("precalculus/24313", r"\cot x", r"\tan x", False),
    # equations and assignments
    ("algebra/2193", "x=5", "5", True),
    ("algebra/2193", "x=5", "x = 5.", True),
    ("algebra/2193", "x=5", "-5", False),
    ("precalculus/323", "y = 2x + 3", "2x+3", True),
    ("precalculus/323", "y = 2x + 3", "y=3x+2", False),
    ("precalculus/356", "y = -2x", "y=2x", False),
    ("precalculus/659", "5x - 7y + 11z + 4 = 0", "-5x+7y-11z-4=0", True),
    ("precalculus/659", "5x - 7y + 11z + 4 = 0", "5x-7y+11z-4=0", False),
    # intervals: open vs closed ends matter
    ("intermediate_algebra/558", "(3,4]", r"(3, 4]", True),
    ("intermediate_algebra/558", "(3,4]", "(3,4)", False),
    ("intermediate_algebra/558", "(3,4]", "[3,4]", False),
    ("intermediate_algebra/183", r"(2,\infty)", r"\left(2, \infty\right)", True),
    ("intermediate_algebra/183", r"(2,\infty)", r"[2,\infty)", False),
    ("precalculus/695", r"(-\infty, 0]", r"(-\infty,0)", False),
    ("algebra/2486", r"\left(\frac{3}{5},\frac{8}{3}\right]", "(0.6, 8/3]", True),
    ("algebra/2486", r"\left(\frac{3}{5},\frac{8}{3}\right]", r"[\frac{3}{5},\frac{8}{3}]", False),
    ("intermediate_algebra/1992", r"(0,9) \cup (9,36)", r"(0, 9)\cup(9, 36)", True),
    ("intermediate_algebra/1992", r"(0,9) \cup (9,36)", "(0,36)", False),
    ("algebra/2043", r"(-\infty, 2) \cup (3, \infty)", r"(2,3)", False),
    ("precalculus/499", r"\left[ \frac{\pi^2}{8}, \frac{5 \pi^2}{4} \right]", r"[\pi^2/8, 5\pi^2/4]", True),
    ("algebra/101", r"x \in [-2,7]", "[-2,7]", True),
    ("algebra/101", r"x \in [-2,7]", "(-2,7)", False),
    # lists and sets of solutions (order does not matter)
    ("intermediate_algebra/1388", "1,-2", "-2, 1", True),
    ("intermediate_algebra/1388", "1,-2", "1, 2", False),
    ("intermediate_algebra/428", "3, 5, 7", r"\{3, 5, 7\}", True),
    ("intermediate_algebra/662", r"1 \pm \sqrt{19}", r"1+\sqrt{19}, 1-\sqrt{19}", True),
    ("intermediate_algebra/2015", r"\{1\pm\sqrt{5},-2\}", r"-2, 1+\sqrt{5}, 1-\sqrt{5}", True),
    # vectors and matrices
    (
        "precalculus/1300",
        r"\begin{pmatrix} -1/3 \\ 2/3 \\ 5/3 \end{pmatrix}",
        r"\begin{pmatrix} -\frac{1}{3} \\ \frac{2}{3} \\ \frac{5}{3} \end{pmatrix}",
        True,
    ),
    (
        "precalculus/1300",
        r"\begin{pmatrix} -1/3 \\ 2/3 \\ 5/3 \end{pmatrix}",
        r"\begin{pmatrix} 1/3 \\ 2/3 \\ 5/3 \end{pmatrix}",
        False,
    ),
    (
        "precalculus/920",
        r"\begin{pmatrix} -1 & 0 \\ 0 & -1 \end{pmatrix}",
        r"\begin{pmatrix} 1 & 0 \\ 0 & 1 \end{pmatrix}",
        False,
    ),
    # \text{} wrappers, words, multiple choice
    ("algebra/1349", r"\text{Evelyn}", "Evelyn", True),
    ("algebra/1349", r"\text{Evelyn}", r"\text{Navin}", False),
    ("prealgebra/105", r"\text{east}", "East", True),
    ("prealgebra/105", r"\text{east}", r"\text{seat}", False),
    ("precalculus/819", r"\text{(C)}", "C", True),
    ("precalculus/819", r"\text{(C)}", "(C)", True),
    ("precalculus/819", r"\text{(C)}", r"\text{(D)}", False),
    # degrees and units
    ("precalculus/927", r"90^\circ", "90", True),
    ("precalculus/927", r"90^\circ", r"90 \text{ degrees}", True),
    ("geometry/183", r"145^\circ", r"145^{\circ}", True),
    ("geometry/183", r"145^\circ", "35", False),
    ("prealgebra/1003", r"\frac{270}7\text{ degrees}", r"\frac{270}{7}", True),
    ("prealgebra/1003", r"\frac{270}7\text{ degrees}", r"\frac{270}{7}^\circ", True),
    ("geometry/473", r"864 \mbox{ inches}^2", "864", True),
    ("geometry/473", r"864 \mbox{ inches}^2", "864 square inches", True),
    ("prealgebra/1114", r"15\mbox{ cm}^2", r"15 \text{ cm}^2", True),
    ("prealgebra/1044", r"5.4 \text{ cents}", "5.40", True),
    # money, thousands separators
    ("algebra/2626", r"\$32,\!348", "32348", True),
    ("algebra/2626", r"\$32,\!348", r"\$32,348", True),
    ("algebra/2780", r"\$18.90", "18.9", True),
    ("algebra/2780", r"\$18.90", "18.09", False),
    ("counting_and_probability/508", r"10,\!080", "10080", True),
    ("number_theory/417", r"11,\! 111,\! 111,\! 100", "11111111100", True),
    ("counting_and_probability/737", "58,500", "58500", True),
    ("intermediate_algebra/607", "13535", "13,535", True),
    # bases
    ("number_theory/847", "4210_{5}", "4210_5", True),
    ("number_theory/864", "52_8", "52_{8}", True),
    ("number_theory/864", "52_8", "42_8", False),
    # AIME-style leading zeros, AMC-style trailing ".0", plain integers
    ("number_theory/427", "25", "025", True),
    ("number_theory/515", "27", "27.0", True),
    ("number_theory/572", "9", "009", True),
    ("number_theory/572", "9", "6", False),
    ("intermediate_algebra/134", "-50", "50", False),
    ("intermediate_algebra/623", "0", "0.0", True),
    ("number_theory/737", "284", "284.", True),
]


@pytest.mark.parametrize(
    ("unique_id", "printed_gold", "answer", "expected"),
    MATH500_PAIRS,
    ids=[f"{row[0]}:{row[2]}" for row in MATH500_PAIRS],
)
def test_math500_answer_pairs(
    math500_gold: dict[str, str], unique_id: str, printed_gold: str, answer: str, expected: bool
) -> None:
    gold = math500_gold[f"test/{unique_id}.json"]
    assert gold == printed_gold, "the table's copy of the gold answer no longer matches the data file"
    assert answers_match_gold(answer, gold) is expected
    assert answers_equivalent(gold, answer) is expected
    assert answers_equivalent(answer, gold) is expected  # symmetric, as clustering needs


def test_table_is_large_and_mixed() -> None:
    verdicts = [row[3] for row in MATH500_PAIRS]
    assert len(MATH500_PAIRS) >= 60
    assert sum(verdicts) >= 30 and verdicts.count(False) >= 20


@pytest.mark.parametrize(
    ("answer", "key"),
    [
        (r"$\dfrac{1}{2}$.", r"\frac{1}{2}"),
        (r"\frac12", r"\frac{1}{2}"),
        ("1/2", r"\frac{1}{2}"),
        ("025", "25"),
        ("27.0", "27"),
        ("2.50", "2.5"),
        (".5", "0.5"),
        (r"\left( 1, 2 \right)", "(1,2)"),
        (r"\text{(B)}", "B"),
        (r"90^\circ", "90"),
        (r"90^{\circ}", "90"),
        ("45 degrees", "45"),
        (r"12 \text{ cm}^2", "12"),
        (r"\$1,\!000", "1000"),
        (r"\boxed{7}", "7"),
        ("x = 3", "3"),
        (r"2\pi r", r"2\pi r"),
        ("2m", "2m"),
        ("1, 2", "1,2"),
        ("10\\%", "10"),
        ("-0", "0"),
        ("   ", None),
        ("", None),
        (None, None),
    ],
)
def test_normalize_answer(answer: str | None, key: str | None) -> None:
    assert normalize_answer(answer) == key


@pytest.mark.parametrize("missing", [None, "", "  "])
def test_missing_answers_are_never_equivalent(missing: str | None) -> None:
    assert not answers_equivalent(missing, "5")
    assert not answers_equivalent("5", missing)
    assert not answers_equivalent(missing, missing)
    assert not answers_match_gold(missing, "5")


# --------------------------------------------------------------------------------------------------
# Threads: math-verify's own timeouts use signal.alarm, which fails off the main thread.
# --------------------------------------------------------------------------------------------------

THREAD_PAIRS: list[tuple[str, str, bool]] = [
    (r"\frac{1}{2}", "0.5", True),
    (r"3\sqrt{13}", r"\sqrt{117}", True),
    ("(3,4]", "(3,4)", False),
    ("x^3+3x-6", "-6+3x+x^3", True),
    (r"\frac{14}{3}", r"\frac{3}{14}", False),
    ("6 - 5i", "6+5i", False),
    (r"1 \pm \sqrt{19}", r"1+\sqrt{19}, 1-\sqrt{19}", True),
    ("(6,31,-1)", "(6,-1,31)", False),
    (r"\frac{448}{15625}", "0.028672", True),
    (r"-\frac{24}{25}", "-0.96", True),
]


def test_equivalence_works_in_a_thread_pool_with_main_thread_verdicts() -> None:
    on_main = [answers_equivalent(a, b) for a, b, _ in THREAD_PAIRS]
    assert on_main == [verdict for _, _, verdict in THREAD_PAIRS]
    seen_threads: set[str] = set()

    def judge(pair: tuple[str, str, bool]) -> bool:
        seen_threads.add(threading.current_thread().name)
        return answers_equivalent(pair[0], pair[1]) and answers_match_gold(pair[1], pair[0])

    with ThreadPoolExecutor(max_workers=4) as pool:
        in_pool = list(pool.map(judge, THREAD_PAIRS * 3))
    assert in_pool == on_main * 3
    assert threading.main_thread().name not in seen_threads


def test_unseen_answers_parse_correctly_off_the_main_thread() -> None:
    # Fresh strings (nothing cached yet) so parsing itself happens on the worker threads.
    pairs = [(f"\\frac{{{n}}}{{7}}", f"{n}/7") for n in range(1000, 1016)]
    pairs += [(f"\\frac{{{n}}}{{7}}", f"{n + 1}/7") for n in range(2000, 2008)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        verdicts = list(pool.map(lambda pair: answers_equivalent(*pair), pairs))
    assert verdicts == [True] * 16 + [False] * 8


def _judge_pairs(pairs: list[tuple[str, str, bool]]) -> list[bool]:
    return [answers_equivalent(a, b) for a, b, _ in pairs]


def test_equivalence_works_in_worker_processes() -> None:
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        halves = list(pool.map(_judge_pairs, [THREAD_PAIRS[:5], THREAD_PAIRS[5:]]))
    assert halves[0] + halves[1] == [verdict for _, _, verdict in THREAD_PAIRS]


def _spin(seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pass
    return "finished"


def test_timeout_interrupts_a_runaway_call_on_the_main_thread() -> None:
    previous_handler = signal.getsignal(signal.SIGALRM)
    started = time.monotonic()
    assert call_with_timeout(lambda: _spin(5.0), 0.2) == (False, None)
    assert time.monotonic() - started < 2.0
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0.0  # no alarm left armed
    assert signal.getsignal(signal.SIGALRM) is previous_handler
    assert call_with_timeout(lambda: _spin(0.01), 1.0) == (True, "finished")


def test_timeout_bounds_a_runaway_call_off_the_main_thread() -> None:
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=1) as pool:
        outcome = pool.submit(call_with_timeout, lambda: _spin(1.0), 0.1).result()
        finished = pool.submit(call_with_timeout, lambda: _spin(0.01), 1.0).result()
    assert outcome == (False, None)
    assert finished == (True, "finished")
    assert time.monotonic() - started < 1.0 + 0.9


@pytest.mark.parametrize("on_main_thread", [True, False])
def test_errors_inside_a_bounded_call_propagate(on_main_thread: bool) -> None:
    def fail() -> None:
        raise ZeroDivisionError("boom")

    if on_main_thread:
        with pytest.raises(ZeroDivisionError, match="boom"):
            call_with_timeout(fail, 1.0)
    else:
        with ThreadPoolExecutor(max_workers=1) as pool, pytest.raises(ZeroDivisionError, match="boom"):
            pool.submit(call_with_timeout, fail, 1.0).result()


def test_a_comparison_that_runs_out_of_time_is_not_equivalent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(equivalence, "_verify", lambda *args, **kwargs: _spin(0.5) == "finished")
    # Symbolic answers: two integers are compared exactly and never reach math-verify.
    assert answers_equivalent("x+1", "y", timeout_s=0.05) is False
    assert answers_equivalent("x+1", "y", timeout_s=5.0) is True  # the stub says yes when it may finish
    assert answers_equivalent("3", "3", timeout_s=0.05) is True  # equal keys never reach math-verify
    with ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(answers_equivalent, "x+1", "y", timeout_s=0.05).result() is False


# --------------------------------------------------------------------------------------------------
# Reasoning Gym: items and grading with each task's own score_answer
# --------------------------------------------------------------------------------------------------

RG_TASKS = ("basic_arithmetic", "gcd", "spell_backward")


@pytest.fixture(scope="module")
def rg_items() -> list[dict]:
    return make_reasoning_gym_items(RG_TASKS, size=3, seed=11)


def test_reasoning_gym_items_have_the_pool_fields(rg_items: list[dict]) -> None:
    assert len(rg_items) == 3 * len(RG_TASKS)
    assert [item["task"] for item in rg_items] == [task for task in RG_TASKS for _ in range(3)]
    assert len({item["item_id"] for item in rg_items}) == len(rg_items)
    for item in rg_items:
        assert set(item) == {"item_id", "problem", "gold", "task", "metadata"}
        assert item["problem"] and item["gold"]
        assert json.loads(json.dumps(item["metadata"])) == item["metadata"]


def test_reasoning_gym_items_are_reproducible(rg_items: list[dict]) -> None:
    assert make_reasoning_gym_items(RG_TASKS, size=3, seed=11) == rg_items
    assert make_reasoning_gym_items(RG_TASKS, size=3, seed=12) != rg_items


def test_reasoning_gym_gold_scores_correct_and_wrong_answers_do_not(rg_items: list[dict]) -> None:
    for item in rg_items:
        # Rebuild the scorer from what a pool stores: task, gold and metadata as a JSON string.
        stored = {"gold": item["gold"], "problem": item["problem"], "metadata": json.dumps(item["metadata"])}
        scorer = reasoning_gym_scorer(item["task"], stored)
        assert scorer(item["gold"]), item
        wrong = "wrong" if item["task"] == "spell_backward" else str(int(item["gold"]) + 1)
        assert not scorer(wrong), item
        assert not scorer(""), item


def test_reasoning_gym_partial_credit_is_not_correct() -> None:
    # gcd uses the base scorer: a gold "1" inside "1 or 2" earns len("1") / len("1 or 2") > 0.
    entry = {"question": "gcd?", "answer": "1", "metadata": {}}
    scorer = reasoning_gym_scorer("gcd", entry)
    assert scorer("1")
    assert not scorer("1 or 2")
    assert reasoning_gym_scorer("gcd", entry, threshold=0.1)("1 or 2")


def test_reasoning_gym_per_task_config() -> None:
    items = make_reasoning_gym_items(
        ["basic_arithmetic"], size=4, seed=3, config={"basic_arithmetic": {"min_terms": 2, "max_terms": 2}}
    )
    assert all(item["metadata"]["num_terms"] == 2 for item in items)
