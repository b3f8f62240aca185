"""Hostile inputs per ``coba`` subcommand: each a command line, the exit code and the message it must give.

Paths are relative to the case folder (see ``tests/hostile_harness.py``): ``ok.jsonl`` (a valid candidate
file), ``pool`` (a valid pool), ``ck_ok`` / ``ck_nmax16`` (MLP checkpoints for N_max 3 and 16),
``ck_garbage`` (random bytes as model.pt), ``ck_badjson`` (controller.json not JSON), ``work`` (a generation
work dir with a journal) and ``problems`` (a problems folder). ``{url}`` is the fake server's address.
``scripts/count_hostile_cases.py`` prints how many cases each command has.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from tests.hostile_harness import Case

UNWRITABLE = "/proc/self/no-such-dir"  # nobody, root included, can create anything there


# ------------------------------------------------------------------------------------------------ setups
def _foreign_folder(name: str, *, with_source: bool = False):
    def setup(d: Path) -> None:
        (d / name).mkdir()
        (d / name / "notes.txt").write_text("mine, not coba's\n")
        if with_source:
            shutil.copy(d / "ok.jsonl", d / name / "src.jsonl")
    return setup


def _file(name: str, text: str = "x\n"):
    return lambda d: (d / name).write_text(text)


def _jsonl_edit(field: str, value, *, raw: str | None = None):
    """ok.jsonl with line 1's ``field`` set to ``value`` (or the raw JSON token ``raw``), as bad.jsonl."""
    def setup(d: Path) -> None:
        lines = (d / "ok.jsonl").read_text().splitlines()
        rec = json.loads(lines[0])
        rec[field] = "__RAW__" if raw is not None else value
        text = json.dumps(rec)
        lines[0] = text.replace('"__RAW__"', raw) if raw is not None else text
        (d / "bad.jsonl").write_text("\n".join(lines) + "\n")
    return setup


def _pool_edit(name: str, edit):
    """A copy of ``pool`` as ``name`` with ``edit(manifest_dict, folder)`` applied."""
    def setup(d: Path) -> None:
        shutil.copytree(d / "pool", d / name)
        manifest = json.loads((d / name / "manifest.json").read_text())
        edit(manifest, d / name)
        (d / name / "manifest.json").write_text(json.dumps(manifest))
    return setup


def _candidates_edit(name: str, drop):
    """A copy of ``pool`` as ``name`` with the candidate rows where ``drop(frame)`` holds removed."""
    def setup(d: Path) -> None:
        import pyarrow.parquet as pq

        shutil.copytree(d / "pool", d / name)
        frame = pq.read_table(d / name / "candidates.parquet").to_pandas()
        pq.write_table(pq.read_table(d / name / "candidates.parquet").filter(~drop(frame).to_numpy()),
                       d / name / "candidates.parquet")
    return setup


def _empty_pool(d: Path) -> None:
    from pools.store import load_pool, save_pool

    pool = load_pool(d / "pool")
    for table in ("episodes", "candidates", "verifications"):
        setattr(pool, table, pool.table(table).iloc[0:0])
    pool.manifest.pop("n_candidates", None)
    save_pool(pool, d / "empty")


def _journal_line(line: object) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        with open(d / "work" / "journal.jsonl", "a") as fh:
            fh.write(json.dumps(line) + "\n")
    return setup


def _unknown_tier_line(d: Path) -> None:
    first = next(json.loads(t) for t in (d / "work" / "journal.jsonl").read_text().splitlines()
                 if json.loads(t)["kind"] == "generation")
    line = {"kind": "verification", "dataset": first["dataset"], "item_id": first["item_id"],
            "generator": first["generator"], "candidate": 0, "tier": "V9", "model": "judge-1B", "params_b": 1.0,
            "score": 0.5, "method": "logprob", "prompt_tokens": 3, "output_tokens": 1, "latency_s": 0.1}
    _journal_line(line)(d)


def _yaml(text: str):
    return _file("spec.yaml", text)


def _symlink(name: str, target: str):
    return lambda d: (d / name).symlink_to(target)


GEN = ("pools", "generate", "work", "--endpoint", "{url},gen-1.5B", "--dataset", "amc2023", "--problems-dir",
       "problems", "--n", "5", "--no-progress", "--backoff", "0.01", "--max-attempts", "1")
VERIFY = ("pools", "verify", "work", "--tier", "V1", "--endpoint", "{url},judge-1B", "--no-progress",
          "--backoff", "0.01", "--max-attempts", "1")
SOLVE = ("solve", "--policy", "greedy", "--generator", "{url},gen-1.5B", "--sample-max-tokens", "16",
         "--max-attempts", "1", "--quiet")
USAGE_MSG = r"usage\.completion_tokens is .*expected a non-negative integer"
SERVE = ("serve", "--policy", "greedy", "--generator", "{url},gen-1.5B", "--max-attempts", "1", "--port", "0")

# ------------------------------------------------------------------------------------------------ cases
CASES: dict[str, list[Case]] = {
    "pools import": [
        Case("force-onto-folder-holding-source", ("pools", "import", "--force", "d/src.jsonl", "d"), 2,
             r"holds this command's input", setup=_foreign_folder("d", with_source=True)),
        Case("force-onto-foreign-folder", ("pools", "import", "--force", "ok.jsonl", "d"), 2,
             r"holds files coba-env did not write", setup=_foreign_folder("d")),
        Case("force-onto-regular-file", ("pools", "import", "--force", "ok.jsonl", "f"), 2,
             r"exists and is not a folder", setup=_file("f")),
        Case("force-onto-the-source-itself", ("pools", "import", "--force", "ok.jsonl", "ok.jsonl"), 2,
             r"is this command's input"),
        Case("existing-pool-without-force", ("pools", "import", "ok.jsonl", "pool"), 2,
             r"already exists \(pass --force"),
        Case("symlink-destination", ("pools", "import", "--force", "ok.jsonl", "link"), 2,
             r"exists and is not a folder", setup=_symlink("link", "pool")),
        Case("unwritable-destination", ("pools", "import", "ok.jsonl", f"{UNWRITABLE}/p"), 2, r"cannot write in"),
        Case("name-too-long", ("pools", "import", "ok.jsonl", "p" * 240), 2, r"the name p+\.\.\. is too long"),
        Case("missing-source", ("pools", "import", "nope.jsonl", "p"), 2, r"nope\.jsonl: no such file"),
        Case("source-is-a-folder", ("pools", "import", "pool", "p"), 2, r"pool: is a folder; expected the candidate"),
        Case("source-is-a-device", ("pools", "import", "/dev/null", "p"), 2, r"/dev/null: not a regular file"),
        Case("output-tokens-1e30", ("pools", "import", "bad.jsonl", "p"), 2,
             r"line 1, field 'output_tokens': expected an integer", setup=_jsonl_edit("output_tokens", 1e30)),
        Case("prompt-tokens-negative", ("pools", "import", "bad.jsonl", "p"), 2, r"line 1, field 'prompt_tokens'",
             setup=_jsonl_edit("prompt_tokens", -5)),
        Case("params-b-infinity-token", ("pools", "import", "bad.jsonl", "p"), 2, r"line 1, field 'generator_params_b'",
             setup=_jsonl_edit("generator_params_b", None, raw="Infinity")),
        Case("params-b-nan-token", ("pools", "import", "bad.jsonl", "p"), 2, r"line 1, field 'generator_params_b'",
             setup=_jsonl_edit("generator_params_b", None, raw="NaN")),
        Case("candidate-1.5", ("pools", "import", "bad.jsonl", "p"), 2, r"line 1, field 'candidate'",
             setup=_jsonl_edit("candidate", 1.5)),
        Case("empty-source", ("pools", "import", "e.jsonl", "p"), 2, r"no candidates found", setup=_file("e.jsonl", "")),
        Case("qwen-params-nan", ("pools", "import", "--format", "qwen-lists", "--generator", "g",
                                 "--generator-params-b", "nan", "ok.jsonl", "p"), 2, r"expected a finite number"),
    ],
    "pools export": [
        Case("existing-file-without-force", ("pools", "export", "pool", "ok.jsonl"), 2, r"already exists \(pass --force"),
        Case("destination-is-a-folder", ("pools", "export", "--force", "pool", "d"), 2, r"is a folder",
             setup=_foreign_folder("d")),
        Case("force-onto-the-pool-itself", ("pools", "export", "--force", "pool", "pool"), 2, r"is this command's input"),
        Case("force-onto-file-in-the-pool", ("pools", "export", "--force", "pool", "pool/manifest.json"), 2,
             r"the destination is inside this command's input pool"),
        Case("symlink-destination", ("pools", "export", "--force", "pool", "link"), 2, r"not a regular file",
             setup=_symlink("link", "ok.jsonl")),
        Case("unwritable-destination", ("pools", "export", "pool", f"{UNWRITABLE}/x.jsonl"), 2, r"cannot write in"),
        Case("pool-is-a-jsonl-file", ("pools", "export", "ok.jsonl", "x.jsonl"), 2, r"import it first: coba pools import"),
        Case("missing-pool", ("pools", "export", "nope", "x.jsonl"), 2, r"not a pool directory"),
    ],
    "pools validate": [
        Case("empty-pool", ("pools", "validate", "empty"), 2, r"0 episodes; expected at least one", setup=_empty_pool),
        Case("n-candidates-0", ("pools", "validate", "p0"), 2, r"n_candidates.*is 0; expected .* integer >= 1",
             setup=_pool_edit("p0", lambda m, _: m.update(n_candidates=0))),
        Case("n-candidates-string", ("pools", "validate", "p0"), 2, r"n_candidates.*expected a non-negative integer",
             setup=_pool_edit("p0", lambda m, _: m.update(n_candidates="3"))),
        # A pool may hold fewer candidates for some episodes (N is the most); these are malformed counts.
        Case("candidate-index-gap", ("pools", "validate", "p0"), 2,
             r"episode 0 has candidate indices \[0, 2\]; expected 0\.\.k-1 for some k from 1 to 3, without gaps",
             setup=_candidates_edit("p0", lambda f: (f["episode_id"] == 0) & (f["candidate"] == 1))),
        Case("pair-without-candidates", ("pools", "validate", "p0"), 2,
             r"table episodes, row 0 \(episode_id=0\), field 'episode_id': episode 0 has no candidates",
             setup=_candidates_edit("p0", lambda f: f["episode_id"] == 0)),
        Case("n-candidates-above-the-most", ("pools", "validate", "p0"), 2,
             r"n_candidates.*is 4, but the most candidates an episode holds is 3; expected 3",
             setup=_pool_edit("p0", lambda m, _: m.update(n_candidates=4))),
        Case("jsonl-file", ("pools", "validate", "ok.jsonl"), 2, r"import it first: coba pools import ok\.jsonl"),
        Case("manifest-not-json", ("pools", "validate", "p0"), 2, r"manifest\.json: not valid JSON",
             setup=lambda d: (shutil.copytree(d / "pool", d / "p0"), (d / "p0" / "manifest.json").write_text("{"))),
        Case("truncated-table", ("pools", "validate", "p0"), 2, r"unreadable or truncated Parquet",
             setup=_pool_edit("p0", lambda _, f: (f / "candidates.parquet").write_bytes(b"PAR1"))),
    ],
    "pools inspect": [
        Case("empty-pool", ("pools", "inspect", "empty"), 2, r"0 episodes", setup=_empty_pool),
        Case("jsonl-file", ("pools", "inspect", "ok.jsonl"), 2, r"import it first"),
    ],
    "pools merge": [
        Case("one-pool", ("pools", "merge", "pool", "--out", "m"), 2, r"merge joins two or more pools; give at least two"),
        Case("same-pool-twice", ("pools", "merge", "pool", "pool", "--out", "m"), 2,
             r"pool: generator '.+' is also a generator of pool; expected each generator in one pool"),
        Case("missing-pool", ("pools", "merge", "pool", "nope", "--out", "m"), 2, r"nope: not a pool directory"),
        Case("jsonl-file", ("pools", "merge", "pool", "ok.jsonl", "--out", "m"), 2, r"import it first: coba pools import"),
        Case("force-onto-an-input", ("pools", "merge", "pool", "pool", "--out", "pool", "--force"), 2,
             r"--out pool: the destination is this command's input pool"),
        Case("out-is-a-file", ("pools", "merge", "pool", "pool", "--out", "ok.jsonl"), 2, r"exists and is not a folder"),
        Case("unwritable-out", ("pools", "merge", "pool", "pool", "--out", f"{UNWRITABLE}/m"), 2, r"cannot write in"),
    ],
    "pools simulate": [
        Case("force-onto-foreign-folder", ("pools", "simulate", "--profile", "tiny", "--force", "--out", "d"), 2,
             r"holds files coba-env did not write", setup=_foreign_folder("d")),
        Case("out-is-a-file", ("pools", "simulate", "--profile", "tiny", "--out", "ok.jsonl"), 2, r"not a folder"),
        Case("existing-pool-without-force", ("pools", "simulate", "--profile", "tiny", "--out", "pool"), 2,
             r"already exists \(pass --force"),
        Case("unwritable-out", ("pools", "simulate", "--profile", "tiny", "--out", f"{UNWRITABLE}/p"), 2,
             r"cannot write in"),
        Case("seed-negative", ("pools", "simulate", "--profile", "tiny", "--seed", "-1", "--out", "p"), 2,
             r"expected a seed"),
        Case("seed-not-a-number", ("pools", "simulate", "--profile", "tiny", "--seed", "x", "--out", "p"), 2,
             r"expected an integer"),
        Case("missing-profile", ("pools", "simulate", "--profile", "nope.json", "--out", "p"), 2, r"nope\.json"),
    ],
    "pools generate": [
        Case("workdir-is-a-file", ("pools", "generate", "ok.jsonl", "--endpoint", "{url},gen-1.5B"), 2,
             r"ok\.jsonl: exists and is not a folder", no_calls=True),
        Case("temperature-negative", (*GEN, "--temperature", "-1"), 2, r"--temperature: expected a number >= 0"),
        Case("temperature-nan", (*GEN, "--temperature", "nan"), 2, r"--temperature: expected a finite number"),
        Case("top-p-zero", (*GEN, "--top-p", "0"), 2, r"--top-p: expected a number in \(0, 1\]"),
        Case("timeout-inf", (*GEN, "--timeout", "inf"), 2, r"--timeout: expected a finite number"),
        Case("n-zero", (*GEN, "--n", "0"), 2, r"--n: expected an integer >= 1"),
        Case("out-is-the-workdir", (*GEN, "--out", "work", "--force"), 2, r"is this command's input", no_calls=True),
        Case("out-unwritable", (*GEN, "--out", f"{UNWRITABLE}/p"), 2, r"cannot write in", no_calls=True),
        Case("out-foreign-folder", (*GEN, "--out", "d", "--force"), 2, r"holds files coba-env did not write",
             setup=_foreign_folder("d"), no_calls=True),
        Case("endpoint-params-inf", (*GEN[:4], "{url},gen,inf", *GEN[5:]), 2, r"PARAMS_B 'inf'; expected a finite",
             no_calls=True),
        Case("usage-not-an-integer", GEN, 2, USAGE_MSG, server={"usage_override": {"completion_tokens": "12.5"}}),
        Case("usage-negative", GEN, 2, USAGE_MSG, server={"usage_override": {"completion_tokens": -3}}),
        Case("zero-choices", GEN, 2, r"no choices", server={"no_choices": True}),
        Case("prompt-not-yaml", (*GEN, "--prompt", "p.yaml"), 2, r"p\.yaml: not a readable YAML prompt file",
             setup=_file("p.yaml", "user: [\n"), no_calls=True),
        Case("prompt-binary", (*GEN, "--prompt", "p.yaml"), 2, r"p\.yaml: not a readable YAML prompt file",
             setup=lambda d: (d / "p.yaml").write_bytes(b"\xff\xfe\x00bin"), no_calls=True),
        Case("rgym-task-not-a-mapping", ("pools", "generate", "w2", "--endpoint", "{url},gen-1.5B", "--dataset",
                                         "reasoning_gym", "--rgym-config", "rg.yaml"), 2,
             r"rg\.yaml, field 'tasks': task 'a': expected a mapping", setup=_file("rg.yaml", "tasks: {a: 1}\n"),
             may_create=("w2",), no_calls=True),
    ],
    "pools verify": [
        Case("usage-not-an-integer", VERIFY, 2, USAGE_MSG, server={"usage_override": {"completion_tokens": "abc"}}),
        Case("usage-fraction", VERIFY, 2, USAGE_MSG, server={"usage_override": {"completion_tokens": 3.5}}),
        Case("zero-choices", VERIFY, 2, r"no choices", server={"no_choices": True}),
        Case("no-journal", ("pools", "verify", "problems", "--tier", "V1", "--endpoint", "{url},judge-1B"), 2,
             r"no journal here", no_calls=True),
        Case("params-b-nan", (*VERIFY[:6], "{url},judge", "--params-b", "nan"), 2, r"expected a finite number"),
        Case("unknown-tier", (*VERIFY[:4], "V9", *VERIFY[5:]), 2, r"unknown tier 'V9'; a work dir takes the paper's"),
    ],
    "pools build": [
        Case("journal-line-is-a-list", ("pools", "build", "work", "p"), 2,
             r"journal\.jsonl, line \d+: expected a JSON object", setup=_journal_line([1, 2])),
        Case("journal-unknown-tier", ("pools", "build", "work", "p"), 2, r"unknown verifier tier 'V9'",
             setup=_unknown_tier_line),
        Case("dest-is-the-workdir", ("pools", "build", "--force", "work", "work"), 2, r"is this command's input"),
        Case("dest-foreign-folder", ("pools", "build", "--force", "work", "d"), 2, r"did not write",
             setup=_foreign_folder("d")),
        Case("workdir-missing", ("pools", "build", "nope", "p"), 2, r"no journal here"),
        Case("workdir-is-a-file", ("pools", "build", "ok.jsonl", "p"), 2, r"not a folder"),
        Case("existing-pool-without-force", ("pools", "build", "work", "pool"), 2, r"already exists"),
    ],
    "bench": [
        Case("seed-negative", ("bench", "--pool", "pool", "--seed", "-1"), 2, r"--seed: expected a seed"),
        Case("seed-huge", ("bench", "--pool", "pool", "--seed", str(2**40)), 2, r"--seed: expected a seed"),
        Case("pool-seed-text", ("bench", "--pool", "pool", "--pool-seed", "abc"), 2, r"expected an integer"),
        Case("pool-is-jsonl", ("bench", "--pool", "ok.jsonl", "--out", "b"), 2, r"import it first: coba pools import"),
        Case("pool-empty-string", ("bench", "--pool", "", "--out", "b"), 2, r"empty pool name"),
        Case("out-empty-string", ("bench", "--pool", "pool", "--out", ""), 2, r"--out \.: the destination holds"),
        Case("pool-empty", ("bench", "--pool", "empty", "--out", "b", "--no-progress"), 2, r"0 episodes",
             setup=_empty_pool),
        Case("out-is-a-file", ("bench", "--pool", "pool", "--out", "ok.jsonl"), 2, r"not a folder"),
        Case("out-foreign-folder", ("bench", "--pool", "pool", "--out", "d"), 2, r"did not write",
             setup=_foreign_folder("d")),
        Case("out-is-the-pool", ("bench", "--pool", "pool", "--out", "pool"), 2, r"is this command's input"),
        Case("out-is-another-pool", ("bench", "--pool", "pool", "--out", "p2"), 2, r"holds a coba-env pool, not a bench",
             setup=lambda d: shutil.copytree(d / "pool", d / "p2")),
        Case("out-is-a-checkpoint", ("bench", "--pool", "pool", "--out", "ck_ok"), 2, r"holds a coba-env checkpoint"),
        Case("out-unwritable", ("bench", "--pool", "pool", "--out", f"{UNWRITABLE}/b"), 2, r"cannot write in"),
        Case("checkpoint-garbage-weights", ("bench", "--pool", "pool", "--policies", "ck_garbage", "--out", "b"), 2,
             r"model\.pt: not a readable MLP weights file"),
        Case("checkpoint-bad-json", ("bench", "--pool", "pool", "--policies", "main,ck_badjson", "--out", "b"), 2,
             r"controller\.json: not valid JSON"),
        Case("checkpoint-lambda-nan", ("bench", "--pool", "pool", "--policies", "main,ck_ok@nan", "--out", "b"), 2,
             r"expected a finite lambda >= 0 after '@', got 'nan'"),
        Case("checkpoint-lambda-text", ("bench", "--pool", "pool", "--policies", "ck_ok@x", "--out", "b"), 2,
             r"expected PATH@LAMBDA with a number after '@', got 'x'"),
        Case("yaml-n-max-text", ("bench", "--pool", "pool", "--policies", "spec.yaml", "--out", "b"), 2,
             r"'n_max' of policy kind 'coba' is 'abc'; expected an integer",
             setup=_yaml("policies:\n  mine:\n    kind: coba\n    params:\n      n_max: \"abc\"\n")),
        Case("yaml-n-fraction", ("bench", "--pool", "pool", "--policies", "spec.yaml", "--out", "b"), 2,
             r"parameter 'n' of policy kind 'best_of_n' is 2\.5; expected an integer",
             setup=_yaml("policies:\n  mine:\n    kind: best_of_n\n    params:\n      n: 2.5\n")),
        Case("yaml-routes-nan", ("bench", "--pool", "pool", "--policies", "spec.yaml", "--out", "b"), 2,
             r"'strong_routes' of policy kind 'coba' is nan",
             setup=_yaml("policies:\n  mine:\n    kind: coba\n    params:\n      strong_routes: .nan\n")),
        Case("yaml-not-yaml", ("bench", "--pool", "pool", "--policies", "spec.yaml", "--out", "b"), 2,
             r"cannot parse policy spec file", setup=_yaml("policies: [\n")),
        Case("resamples-zero", ("bench", "--pool", "pool", "--resamples", "0"), 2, r"--resamples: expected an integer >= 1"),
        Case("workers-zero", ("bench", "--pool", "pool", "--workers", "0"), 2, r"--workers: expected an integer >= 1"),
        Case("unknown-policy", ("bench", "--pool", "pool", "--policies", "nope", "--out", "b"), 2, r"unknown policy nope"),
    ],
    "train": [
        Case("router-on-replay", ("train", "knn_router", "--pool", "pool", "--env", "replay", "--out", "t"), 2,
             r"knn_router trains on --env route only \(prompt-aware router, similarity-weighted kNN\); got --env "
             r"replay"),
        Case("lambdas-nan", ("train", "mlp", "--pool", "pool", "--lambdas", "nan", "--out", "t"), 2,
             r"--lambdas: expected lambdas that are finite numbers >= 0, got 'nan'"),
        Case("lambdas-inf", ("train", "mlp", "--pool", "pool", "--lambdas", "inf", "--out", "t"), 2, r"got 'inf'"),
        Case("lambdas-negative", ("train", "mlp", "--pool", "pool", "--lambdas", "-1", "--out", "t"), 2, r"got '-1'"),
        Case("lambdas-negative-list", ("train", "mlp", "--pool", "pool", "--lambdas", "-1,0.1", "--out", "t"), 2,
             r"got '-1' in '-1,0.1'"),
        Case("lambdas-text", ("train", "mlp", "--pool", "pool", "--lambdas", "a,b", "--out", "t"), 2,
             r"expected numbers separated by commas"),
        Case("seeds-negative", ("train", "mlp", "--lodo", "--pool", "pool", "--seeds", "-1"), 2,
             r"--seeds: expected a seed"),
        Case("seed-negative", ("train", "mlp", "--pool", "pool", "--seed", "-1"), 2, r"expected a seed"),
        Case("epochs-zero", ("train", "mlp", "--pool", "pool", "--epochs", "0"), 2, r"expected an integer >= 1"),
        Case("out-is-a-file", ("train", "mlp", "--pool", "pool", "--out", "ok.jsonl"), 2, r"not a folder"),
        Case("out-foreign-folder", ("train", "mlp", "--pool", "pool", "--force", "--out", "d"), 2, r"did not write",
             setup=_foreign_folder("d")),
        Case("out-existing-checkpoint", ("train", "mlp", "--pool", "pool", "--out", "ck_ok"), 2,
             r"already exists \(pass --force"),
        Case("out-is-the-pool", ("train", "mlp", "--pool", "pool", "--force", "--out", "pool"), 2,
             r"is this command's input"),
        Case("out-unwritable", ("train", "mlp", "--pool", "pool", "--out", f"{UNWRITABLE}/t"), 2, r"cannot write in"),
        Case("pool-is-jsonl", ("train", "mlp", "--pool", "ok.jsonl", "--out", "t"), 2, r"import it first"),
    ],
    "sweep": [
        Case("lambdas-nan", ("sweep", "--pool", "pool", "--lambdas", "nan"), 2, r"finite numbers >= 0, got 'nan'"),
        Case("lambdas-negative-list", ("sweep", "--pool", "pool", "--lambdas", "-1,0.1"), 2, r"got '-1' in '-1,0.1'"),
        Case("checkpoint-garbage-weights", ("sweep", "--pool", "pool", "--policies", "ck_garbage", "--out", "s"), 2,
             r"model\.pt: not a readable MLP weights file"),
        Case("checkpoint-bad-json", ("sweep", "--pool", "pool", "--policies", "ck_badjson", "--out", "s"), 2,
             r"controller\.json: not valid JSON"),
        Case("checkpoint-lambda-inf", ("sweep", "--pool", "pool", "--policies", "ck_ok@inf", "--out", "s"), 2,
             r"expected a finite lambda >= 0 after '@', got 'inf'"),
        Case("folder-without-controller", ("sweep", "--pool", "pool", "--policies", "problems", "--out", "s"), 2,
             r"a folder without controller\.json"),
        Case("checkpoint-cannot-run", ("sweep", "--pool", "pool", "--policies", "ck_nmax16", "--lambdas", "0.1",
                                       "--out", "s", "--no-progress"), 2,
             r"1 sweep point\(s\) cannot run on this pool \(ck_nmax16@0\.1: trained with N_max = 16"),
        Case("out-is-a-file", ("sweep", "--pool", "pool", "--out", "ok.jsonl"), 2, r"not a folder"),
        Case("out-foreign-folder", ("sweep", "--pool", "pool", "--out", "d"), 2, r"did not write",
             setup=_foreign_folder("d")),
        Case("policies-empty", ("sweep", "--pool", "pool", "--policies", ","), 2, r"--policies names nothing"),
        Case("out-unwritable", ("sweep", "--pool", "pool", "--out", f"{UNWRITABLE}/s"), 2, r"cannot write in"),
        Case("out-is-a-bench-folder", ("sweep", "--pool", "pool", "--out", "b"), 2, r"holds a coba-env bench, not a sweep",
             setup=lambda d: ((d / "b").mkdir(), (d / "b" / "results.json").write_text("{}"))),
    ],
    "solve": [
        Case("json-unwritable", (*SOLVE, "--json", f"{UNWRITABLE}/t.json", "What is 1+1?"), 2, r"cannot write in",
             no_calls=True),
        Case("json-existing-file", (*SOLVE, "--json", "ok.jsonl", "What is 1+1?"), 2, r"already exists \(pass --force",
             no_calls=True),
        Case("json-is-a-folder", (*SOLVE, "--json", "pool", "What is 1+1?"), 2, r"is a folder", no_calls=True),
        Case("record-existing-pool", (*SOLVE, "--record", "pool", "What is 1+1?"), 2, r"already exists", no_calls=True),
        Case("record-foreign-folder", (*SOLVE, "--force", "--record", "d", "What is 1+1?"), 2, r"did not write",
             setup=_foreign_folder("d"), no_calls=True),
        Case("record-is-a-file", (*SOLVE, "--record", "ok.jsonl", "What is 1+1?"), 2, r"not a folder", no_calls=True),
        Case("lam-nan", (*SOLVE, "--lam", "nan", "What is 1+1?"), 2, r"--lam: expected a finite number", no_calls=True),
        Case("lam-negative", (*SOLVE, "--lam=-1", "What is 1+1?"), 2, r"--lam: expected a number >= 0", no_calls=True),
        Case("temperature-negative", (*SOLVE, "--temperature=-1", "What is 1+1?"), 2, r"expected a number >= 0"),
        Case("max-tokens-inf", (*SOLVE, "--max-tokens", "inf", "What is 1+1?"), 2, r"expected a finite number"),
        Case("usage-not-an-integer", (*SOLVE, "What is 1+1?"), 2, USAGE_MSG,
             server={"usage_override": {"completion_tokens": "7.5"}}),
        Case("zero-choices", (*SOLVE, "What is 1+1?"), 2, r"no choices", server={"no_choices": True}),
        Case("policy-garbage-weights", ("solve", "--policy", "ck_garbage", "--generator", "{url},gen-1.5B",
                                        "What is 1+1?"), 2, r"not a readable MLP weights file", no_calls=True),
        Case("policy-bad-json", ("solve", "--policy", "ck_badjson", "--generator", "{url},gen-1.5B", "What is 1+1?"),
             2, r"controller\.json: not valid JSON", no_calls=True),
        Case("policy-lambda-nan", ("solve", "--policy", "ck_ok@nan", "--generator", "{url},gen-1.5B", "1+1?"), 2,
             r"expected a finite lambda >= 0 after '@', got 'nan'", no_calls=True),
        Case("endpoint-params-nan", ("solve", "--policy", "greedy", "--generator", "{url},gen,nan", "1+1?"), 2,
             r"--generator: bad endpoint .*PARAMS_B 'nan'; expected a finite", no_calls=True),
        Case("empty-problem", (*SOLVE, "  "), 2, r"PROBLEM is empty", no_calls=True),
        Case("n-max-zero", (*SOLVE, "--n-max", "0", "What is 1+1?"), 2, r"--n-max: expected an integer >= 1",
             no_calls=True),
        Case("budget-nan", (*SOLVE, "--budget", "nan", "What is 1+1?"), 2, r"--budget: expected a finite number",
             no_calls=True),
    ],
    # Every serve case must be refused before the server listens (a case that starts it would never end).
    "serve": [
        Case("record-foreign-folder", (*SERVE, "--record", "d"), 2, r"--record d: holds .*coba serve did not write",
             setup=_foreign_folder("d"), no_calls=True),
        Case("record-is-a-file", (*SERVE, "--record", "ok.jsonl"), 2, r"--record ok\.jsonl: exists and is not a folder",
             no_calls=True),
        Case("lam-nan", (*SERVE, "--lam", "nan"), 2, r"--lam: expected a finite number", no_calls=True),
        Case("lambda-range-backwards", (*SERVE, "--lambda-range", "1,0"), 2, r"--lambda-range '1,0': expected LO,HI",
             no_calls=True),
        Case("max-body-bytes-zero", (*SERVE, "--max-body-bytes", "0"), 2, r"--max-body-bytes: expected an integer",
             no_calls=True),
        Case("dataset-control-character", (*SERVE, "--dataset", "a\tb"), 2, r"--dataset: .*control character",
             no_calls=True),
        Case("policy-garbage-weights", ("serve", "--policy", "ck_garbage", "--generator", "{url},gen-1.5B", "--port",
                                        "0"), 2, r"not a readable MLP weights file", no_calls=True),
        Case("policy-lambda-nan", ("serve", "--policy", "ck_ok@nan", "--generator", "{url},gen-1.5B", "--port", "0"),
             2, r"expected a finite lambda >= 0 after '@', got 'nan'", no_calls=True),
        Case("routing-policy-one-generator", ("serve", "--policy", "route_cheapest_coba", "--generator",
                                              "{url},gen-1.5B", "--port", "0"), 2, r"routes between generators",
             no_calls=True),
    ],
    "calibrate": [
        Case("target-without-generator", ("calibrate", "always_largest", "--pool", "pool", "--target", "share=0.3"), 2,
             r"--target: target 'share=0\.3': expected share:GENERATOR=FRACTION"),
        Case("existing-out-without-force", ("calibrate", "always_largest", "--pool", "pool", "--target",
                                            "accuracy=0.5", "--out", "r.json"), 2,
             r"--out r\.json: already exists \(pass --force", setup=_file("r.json")),
        Case("unwritable-out", ("calibrate", "always_largest", "--pool", "pool", "--target", "accuracy=0.5", "--out",
                                f"{UNWRITABLE}/r.json"), 2, r"cannot write in"),
    ],
    "pools embed": [
        Case("unknown-item-id", ("pools", "embed", "pool", "bad.jsonl"), 2,
             r"bad\.jsonl, row 1, field 'item_id': the pool has no item with item_id 'zzz'",
             setup=_file("bad.jsonl", '{"item_id": "zzz", "embedding": [1.0, 2.0]}\n')),
        Case("no-embedding-field", ("pools", "embed", "pool", "ok.jsonl"), 2,
             r"ok\.jsonl, row 1, field 'embedding': expected a non-empty list of numbers"),
        Case("missing-file", ("pools", "embed", "pool", "nope.npz"), 2,
             r"nope\.npz: no such file; expected an embedding file"),
    ],
}


def _add_edge_cases() -> None:
    """Issue 25's cases (``tests/hostile_cases_edges.py``) run in the same harness, under the same commands."""
    from tests.hostile_cases_edges import EDGE_CASES

    for command, cases in EDGE_CASES.items():
        CASES[command].extend(cases)


_add_edge_cases()


def _add_stats_cases() -> None:
    """Issue 39's presentation cases (``tests/hostile_cases_stats.py``: no policy can run, --reference, --grid)."""
    from tests.hostile_cases_stats import STATS_CASES

    for command, cases in STATS_CASES.items():
        CASES[command].extend(cases)


_add_stats_cases()


def _add_issue_39_cases() -> None:
    """Issue 39's cases (``tests/hostile_cases_user_code.py``): user code contained, and the left-overs."""
    from tests.hostile_cases_user_code import user_code_cases

    for command, cases in user_code_cases().items():
        CASES[command].extend(cases)


_add_issue_39_cases()


def case_counts() -> dict[str, int]:
    """Number of hostile cases per command."""
    return {command: len(cases) for command, cases in CASES.items()}
