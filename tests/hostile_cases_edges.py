"""Hostile inputs of issue 25 ("nothing lost at the edges"), in the format of ``tests/hostile_cases.py``.

Each case is one root cause seen from one command: input that never becomes a traceback at the parse
boundary (JSON nested 100,000 deep, bytes that are not UTF-8, lone surrogates, integers past int64), numbers
and sizes past their upper bound, names that would break a report or a path, options given twice or out of
the env's range. The shared harness asserts one error line, exit 2 and an unchanged case folder (hash
before and after). The cases that need a second process, a signal or a timer are in
``tests/test_hostile_edges.py``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.hostile_harness import Case

DEEP = "[" * 100_000 + "]" * 100_000  # past Python's recursion limit for json.loads
LONE_SURROGATE = '"\\ud800 alone"'


def _jsonl_line(edit):
    """ok.jsonl with ``edit(line_text) -> line_text`` applied to line 1, as bad.jsonl."""
    def setup(d: Path) -> None:
        lines = (d / "ok.jsonl").read_text().splitlines()
        lines[0] = edit(lines[0])
        (d / "bad.jsonl").write_text("\n".join(lines) + "\n")
    return setup


def _field(name: str, raw: str):
    """Line 1 of ok.jsonl with field ``name`` set to the raw JSON token ``raw``."""
    def edit(text: str) -> str:
        rec = json.loads(text)
        rec[name] = "__RAW__"
        return json.dumps(rec).replace('"__RAW__"', raw)
    return _jsonl_line(edit)


def _pool_copy_with(name: str, edit_file):
    """A copy of ``pool`` as ``name`` with ``edit_file(folder)`` applied."""
    def setup(d: Path) -> None:
        shutil.copytree(d / "pool", d / name)
        edit_file(d / name)
    return setup


def _table_value(table: str, column: str, value):
    """Rewrite one cell of a pool table with pyarrow (save_pool would refuse the value)."""
    def edit(folder: Path) -> None:
        import pyarrow.parquet as pq

        frame = pq.read_table(folder / f"{table}.parquet").to_pandas()
        frame.loc[0, column] = value
        frame.to_parquet(folder / f"{table}.parquet", index=False)
    return edit


def _write(name: str, data: str | bytes):
    def setup(d: Path) -> None:
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            (d / name).write_bytes(data)
        else:
            (d / name).write_text(data)
    return setup


def _checkpoint_json(name: str, text: str):
    def setup(d: Path) -> None:
        shutil.copytree(d / "ck_ok", d / name)
        (d / name / "controller.json").write_text(text)
    return setup


def _append_journal(raw: bytes):
    def setup(d: Path) -> None:
        with open(d / "work" / "journal.jsonl", "ab") as fh:
            fh.write(raw + b"\n")
    return setup


def _problems_with_repeated_id(d: Path) -> None:
    rows = [{"item_id": "a", "problem": "What is 1 + 1?", "gold": "2"},
            {"item_id": "a", "problem": "What is 2 + 2?", "gold": "4"}]
    (d / "probs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


SOLVE = ("solve", "--policy", "greedy", "--generator", "{url},gen-1.5B", "--sample-max-tokens", "16",
         "--max-attempts", "1", "--quiet")
GEN = ("pools", "generate", "work", "--endpoint", "{url},gen-1.5B", "--dataset", "amc2023", "--problems-dir",
       "problems", "--n", "5", "--no-progress", "--backoff", "0.01", "--max-attempts", "1")
BENCH = ("bench", "--pool", "pool", "--out", "b", "--no-progress", "--no-figures")

EDGE_CASES: dict[str, list[Case]] = {
    "pools import": [
        Case("output-tokens-10-to-the-30", ("pools", "import", "bad.jsonl", "p"), 2,
             r"line 1, field 'output_tokens': is 1000000000000000000000000000000; expected a value in \[0, 1e\+09\]",
             setup=_field("output_tokens", str(10**30))),
        Case("params-b-1e308", ("pools", "import", "bad.jsonl", "p"), 2,
             r"field 'generator_params_b': is 1e\+308; expected a value in \[0, 100000\]",
             setup=_field("generator_params_b", "1e308")),
        Case("json-nested-100000-deep", ("pools", "import", "bad.jsonl", "p"), 2,
             r"bad\.jsonl, line 1: unreadable JSON \(nested too deeply", setup=_jsonl_line(lambda _: DEEP)),
        Case("integer-of-5000-digits", ("pools", "import", "bad.jsonl", "p"), 2,
             r"line 1: unreadable JSON \(holds an integer with thousands of digits",
             setup=_field("output_tokens", "9" * 5000)),
        Case("lone-surrogate-in-text", ("pools", "import", "bad.jsonl", "p"), 2,
             r"line 1, field 'problem': holds a lone surrogate", setup=_field("problem", LONE_SURROGATE)),
        Case("dataset-name-with-newline", ("pools", "import", "bad.jsonl", "p"), 2,
             r"field 'dataset': dataset name .* holds the control character \\n",
             setup=_field("dataset", json.dumps("math\nevil"))),
        Case("dataset-name-300-chars", ("pools", "import", "bad.jsonl", "p"), 2,
             r"field 'dataset': dataset name .* is 300 characters long; expected at most 200",
             setup=_field("dataset", json.dumps("d" * 300))),
        Case("verifier-role-given-twice", ("pools", "import", "--verifier-role", "V3=reward_model", "--verifier-role",
                                           "V3=strong_verifier", "ok.jsonl", "p"), 2,
             r"--verifier-role names tier V3 twice"),
    ],
    "pools validate": [
        Case("manifest-nested-deep", ("pools", "validate", "p0"), 2, r"manifest\.json: nested too deeply",
             setup=_pool_copy_with("p0", lambda f: (f / "manifest.json").write_text(DEEP))),
        Case("manifest-not-utf8", ("pools", "validate", "p0"), 2, r"manifest\.json: not UTF-8 text",
             setup=_pool_copy_with("p0", lambda f: (f / "manifest.json").write_bytes(b'{"a": "\xff\xfe"}'))),
        Case("output-tokens-2-to-the-62", ("pools", "validate", "p0"), 2,
             r"table candidates, row 0 .*field 'output_tokens': is 4611686018427387904; expected from 0 to 1e\+09",
             setup=_pool_copy_with("p0", _table_value("candidates", "output_tokens", 2**62))),
        Case("params-b-1e308", ("pools", "validate", "p0"), 2, r"field 'params_b': is 1e\+308; expected a number",
             setup=_pool_copy_with("p0", _table_value("models", "params_b", 1e308))),
        Case("dataset-name-with-newline", ("pools", "validate", "p0"), 2,
             r"table items, row 0 .*field 'dataset': is 'a\\nb'; expected printable text of at most 200 characters",
             setup=_pool_copy_with("p0", _table_value("items", "dataset", "a\nb"))),
        Case("cluster-past-int64-range-of-ids", ("pools", "validate", "p0"), 2,
             r"field 'cluster': is 4611686018427387904; expected -1 or a cluster id from 0 to 4095",
             setup=_pool_copy_with("p0", _table_value("candidates", "cluster", 2**62))),
    ],
    "pools simulate": [
        Case("profile-n-items-huge", ("pools", "simulate", "--profile", "prof.json", "--out", "p"), 2,
             r"n_items.*expected an integer >= 1 and <= 10000000",
             setup=lambda d: _write("prof.json", json.dumps(_tiny_profile(n_items=10**12)))(d)),
        Case("profile-nested-deep", ("pools", "simulate", "--profile", "prof.json", "--out", "p"), 2,
             r"prof\.json: nested too deeply", setup=_write("prof.json", DEEP)),
    ],
    "pools generate": [
        Case("seed-2-to-the-32", (*GEN, "--seed", str(2**32)), 2, r"--seed: expected a seed", no_calls=True),
        Case("api-key-with-newline", (*GEN, "--api-key", "abc\r\nX-Evil: 1"), 2,
             r"--api-key: expected the key as one line", no_calls=True),
        Case("endpoint-port-not-a-number", (*GEN[:4], "http://127.0.0.1:abc,gen-1.5B", *GEN[5:]), 2,
             r"bad endpoint .*: bad URL", no_calls=True),
        Case("endpoint-ipv6-unclosed", (*GEN[:4], "http://[::1,gen-1.5B", *GEN[5:]), 2, r"bad endpoint",
             no_calls=True),
        Case("n-100000", (*GEN, "--n", "100000"), 2, r"--n: expected an integer >= 1 and <= 4096",
             no_calls=True),
        Case("concurrency-10-to-the-6", (*GEN, "--concurrency", str(10**6)), 2,
             r"--concurrency: expected an integer >= 1 and <= 1024", no_calls=True),
        Case("endpoint-params-1e308", (*GEN[:4], "{url},gen,1e308", *GEN[5:]), 2, r"at most 100000", no_calls=True),
    ],
    "pools build": [
        Case("journal-line-nested-deep", ("pools", "build", "work", "p"), 2,
             r"journal\.jsonl, line \d+: unreadable journal line \(nested too deeply",
             setup=_append_journal(DEEP.encode())),
        Case("journal-not-utf8", ("pools", "build", "work", "p"), 2, r"journal\.jsonl: the journal is not UTF-8",
             setup=_append_journal(b'{"kind": "\xff"}')),
        Case("journal-lone-surrogate", ("pools", "build", "work", "p"), 2,
             r"journal\.jsonl, line \d+, field 'kind': holds a lone surrogate",
             setup=_append_journal(b'{"kind": "\\udc80"}')),
        Case("journal-line-missing-field", ("pools", "build", "work", "p"), 2,
             r"journal\.jsonl, line \d+: journal line lacks the field 'dataset'$",
             setup=_append_journal(b'{"kind": "generation"}')),
    ],
    "bench": [
        Case("pool-output-tokens-2-to-the-62", ("bench", "--pool", "p0", "--out", "b", "--no-progress"), 2,
             r"field 'output_tokens': is 4611686018427387904; expected from 0 to 1e\+09",
             setup=_pool_copy_with("p0", _table_value("candidates", "output_tokens", 2**62))),
        Case("pool-params-1e308", ("bench", "--pool", "p0", "--out", "b", "--no-progress"), 2,
             r"field 'params_b': is 1e\+308", setup=_pool_copy_with("p0", _table_value("models", "params_b", 1e308))),
        Case("yaml-duplicate-policy", (*BENCH[:3], "--policies", "spec.yaml", *BENCH[3:]), 2,
             r"the key 'mine' is given twice \(first on line 2\)",
             setup=_write("spec.yaml", "policies:\n  mine:\n    kind: coba\n  mine:\n    kind: best_of_n\n")),
        Case("policy-name-with-newline", (*BENCH[:3], "--policies", "spec.yaml", *BENCH[3:]), 2,
             r"the policy name 'a\\nb' holds the control character \\n",
             setup=_write("spec.yaml", 'policies:\n  "a\\nb":\n    kind: coba\n')),
        Case("checkpoint-lambda-1e7", (*BENCH[:3], "--policies", "ck_ok@1e7", *BENCH[3:]), 2,
             r"expected a lambda from 0 to 1e\+06 \(the env's range\) after '@', got '1e7'"),
        Case("resamples-10-to-the-12", (*BENCH, "--resamples", str(10**12)), 2,
             r"--resamples: expected an integer >= 1 and <= 1000000"),
        Case("existing-non-yaml-file-alone", (*BENCH[:3], "--policies", "ok.jsonl", *BENCH[3:]), 2,
             r"unknown policy ok\.jsonl"),
    ],
    "sweep": [
        Case("lambdas-1e7", ("sweep", "--pool", "pool", "--lambdas", "1e7"), 2,
             r"--lambdas: expected lambdas from 0 to 1e\+06 \(the env's range\), got '1e7'"),
        Case("checkpoint-json-nested-deep", ("sweep", "--pool", "pool", "--policies", "ck_deep", "--out", "s"), 2,
             r"controller\.json: not valid JSON \(nested too deeply", setup=_checkpoint_json("ck_deep", DEEP)),
        Case("checkpoint-hidden-huge", ("sweep", "--pool", "pool", "--policies", "ck_big", "--out", "s"), 2,
             r"field 'hidden' is \[1000000000\]; expected a list of 1 to 64 layer sizes",
             setup=lambda d: _big_hidden(d)),
    ],
    "solve": [
        Case("seed-2-to-the-32", (*SOLVE, "--seed", str(2**32), "1+1?"), 2, r"--seed: expected a seed", no_calls=True),
        Case("seed-negative", (*SOLVE, "--seed=-1", "1+1?"), 2, r"--seed: expected a seed", no_calls=True),
        Case("api-key-with-newline", (*SOLVE, "--api-key", "k\nX: y", "1+1?"), 2, r"--api-key: expected the key",
             no_calls=True),
        Case("lam-1e7", (*SOLVE, "--lam", "1e7", "1+1?"), 2, r"--lam: expected a number >= 0 and <= 1e\+06",
             no_calls=True),
        Case("n-max-10-to-the-9", (*SOLVE, "--n-max", str(10**9), "1+1?"), 2,
             r"--n-max: expected an integer >= 1 and <= 4096", no_calls=True),
        Case("record-repeated-id", (*SOLVE, "--record", "r", "--file", "probs.jsonl"), 2,
             r"probs\.jsonl, problem 2: id 'a' .* is used by problem 1 too; --record needs each id once",
             setup=_problems_with_repeated_id, no_calls=True),
        Case("generator-port-not-a-number", ("solve", "--policy", "greedy", "--generator",
                                             "http://127.0.0.1:abc,gen-1.5B", "1+1?"), 2,
             r"--generator: bad endpoint .*bad URL", no_calls=True),
    ],
}


def _tiny_profile(**overrides) -> dict:
    from pools.simulate.profiles import load_profile

    data = json.loads(json.dumps(load_profile("tiny").data))
    for dataset in data["datasets"].values():
        dataset.update(overrides)
    return data


def _big_hidden(d: Path) -> None:
    shutil.copytree(d / "ck_ok", d / "ck_big")
    config = json.loads((d / "ck_big" / "controller.json").read_text())
    config["hidden"] = [10**9]
    (d / "ck_big" / "controller.json").write_text(json.dumps(config))
