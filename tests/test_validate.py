"""Malformed pools and JSONL files: each is refused with a message naming where and what was expected.

Every case runs twice: through the Python API (``pytest.raises(PoolError, match=...)``) and through the
command line (exit code 2, the same message on stderr, nothing written at the destination).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coba_cli.main import main
from pools.errors import PoolError
from pools.importers import import_jsonl
from pools.store import Pool, load_pool, save_pool
from pools.validate import validate_pool
from tests.conftest import small_jsonl_records, write_jsonl

# --------------------------------------------------------------------------------------------------
# Mutations of a saved pool directory (written with plain pyarrow, so nothing coerces them back)
# --------------------------------------------------------------------------------------------------


def edit_table(name: str, edit: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[Path], None]:
    def mutate(pool_dir: Path) -> None:
        f = pool_dir / f"{name}.parquet"
        df = edit(pq.read_table(f).to_pandas())
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), f)

    return mutate


def edit_manifest(edit: Callable[[dict], None]) -> Callable[[Path], None]:
    def mutate(pool_dir: Path) -> None:
        manifest = json.loads((pool_dir / "manifest.json").read_text())
        edit(manifest)
        (pool_dir / "manifest.json").write_text(json.dumps(manifest))

    return mutate


def truncate(name: str) -> Callable[[Path], None]:
    def mutate(pool_dir: Path) -> None:
        f = pool_dir / f"{name}.parquet"
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])

    return mutate


def _set(df: pd.DataFrame, row: int, col: str, value) -> pd.DataFrame:
    df = df.copy()
    if isinstance(value, str) and not pd.api.types.is_string_dtype(df[col]):
        df[col] = df[col].astype(object)
    df.loc[row, col] = value
    return df


def _shift_first_episode(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df.loc[df["episode_id"] == 0, "candidate"] += 1
    return df


def _swap_first_clusters(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()  # episode 0's answers are 2, 3, 2 -> clusters 0, 1, 0; make them 1, 0, 1
    df.loc[df["episode_id"] == 0, "cluster"] = [1, 0, 1]
    return df


def _drop_row(df: pd.DataFrame, row: int) -> pd.DataFrame:
    return df.drop(index=row).reset_index(drop=True)


POOL_CASES = [
    ("missing column", edit_table("candidates", lambda df: df.drop(columns="latency_s")),
     r"candidates\.parquet, table candidates, field 'latency_s': missing column\(s\) \['latency_s'\]"),
    ("string in int column", edit_table("candidates", lambda df: df.astype({"prompt_tokens": str})),
     r"table candidates, row 0 \(episode_id=0, candidate=0\), field 'prompt_tokens': expected an integer"),
    ("null in required string", edit_table("items", lambda df: _set(df, 1, "problem", None)),
     r"table items, row 1 \(dataset='math', item_id='m2'\), field 'problem': expected a string \(str\), found a null"),
    ("duplicate episode ids", edit_table("episodes", lambda df: _set(df, 1, "episode_id", 0)),
     r"table episodes, row 1 \(episode_id=0\), field 'episode_id': duplicate key \('episode_id',\); first used at row 0"),
    ("duplicate candidate", edit_table("candidates", lambda df: _set(df, 1, "candidate", 0)),
     r"table candidates, row 1 \(episode_id=0, candidate=0\), field 'candidate': duplicate key "
     r"\('episode_id', 'candidate'\)"),
    ("duplicate model", edit_table("models", lambda df: _set(df, 1, "name", "gen-small")),
     r"table models, row 1 \(name='gen-small'\), field 'name': duplicate key"),
    ("candidate indices not 0..N-1", edit_table("candidates", _shift_first_episode),
     r"field 'candidate': episode 0 has candidate indices \[1, 2, 3\]; expected 0\.\.k-1 for some k from 1 to 3, "
     r"without gaps \(manifest n_candidates=3\)"),
    ("candidate index gap", edit_table("candidates", lambda df: _drop_row(df, 1)),
     r"row 0 \(episode_id=0, candidate=0\), field 'candidate': episode 0 has candidate indices \[0, 2\]; expected "
     r"0\.\.k-1 for some k from 1 to 3, without gaps"),
    ("score above 1", edit_table("verifications", lambda df: _set(df, 2, "score", 1.5)),
     r"table verifications, row 2 \(episode_id=0, candidate=1, tier='V1'\), field 'score': score 1\.5 outside \[0, 1\]"),
    ("score below 0", edit_table("verifications", lambda df: _set(df, 0, "score", -0.25)),
     r"row 0 \(episode_id=0, candidate=0, tier='V1'\), field 'score': score -0\.25 outside \[0, 1\]"),
    ("verifier without a role", edit_table("verifications", lambda df: _set(df, 3, "tier", "V7")),
     r"table verifications, row 3 .*field 'tier': verifier 'V7' has no role; expected it in the manifest's "
     r"verifier_roles"),
    ("malformed verifier name", edit_table("verifications", lambda df: _set(df, 3, "tier", "V 7!")),
     r"table verifications, row 3 .*field 'tier': verifier name 'V 7!'; expected a name matching"),
    *[(f"verifier named like the action code {name}", edit_table("verifications", lambda df, n=name: _set(df, 3, "tier", n)),
       rf"table verifications, row 3 .*field 'tier': verifier name '{name}'; expected a name matching")
      for name in ("S", "STOP", "SAMPLE", "SAMPLE_gen")],
    ("verifier names equal up to case", edit_table("verifications", lambda df: _set(df, 3, "tier", "v1")),
     r"table verifications, row 3 .*field 'tier': verifier name 'v1' differs only in case from verifier 'V1'"),
    ("unknown item", edit_table("episodes", lambda df: _set(df, 2, "item_id", "m9")),
     r"table episodes, row 2 \(episode_id=2\), field 'item_id': points at an unknown item"),
    ("unknown generator model", edit_table("episodes", lambda df: _set(df, 0, "generator", "ghost")),
     r"table episodes, row 0 \(episode_id=0\), field 'generator': unknown generator model 'ghost'"),
    ("unknown verifier model", edit_table("verifications", lambda df: _set(df, 1, "model", "ghost-judge")),
     r"table verifications, row 1 .*field 'model': unknown verifier model 'ghost-judge'"),
    ("verifier without the role", edit_table("verifications", lambda df: _set(df, 1, "model", "gen-small")),
     r"field 'model': model 'gen-small' does not have a verifier role"),
    ("unknown episode", edit_table("candidates", lambda df: _set(df, 4, "episode_id", 99)),
     r"table candidates, row 4 \(episode_id=99, candidate=1\), field 'episode_id': points at an unknown episode 99"),
    ("unknown candidate", edit_table("verifications", lambda df: _set(df, 0, "candidate", 7)),
     r"table verifications, row 0 .*field 'candidate': points at an unknown candidate"),
    ("cluster ids out of order", edit_table("candidates", _swap_first_clusters),
     r"row 0 \(episode_id=0, candidate=0\), field 'cluster': cluster id 1 appears before cluster 0"),
    ("cluster -1 with an answer", edit_table("candidates", lambda df: _set(df, 0, "cluster", -1)),
     r"field 'cluster': is -1 \(no answer\) but answer_key is set"),
    ("negative tokens", edit_table("candidates", lambda df: _set(df, 5, "output_tokens", -3)),
     r"table candidates, row 5 \(episode_id=1, candidate=2\), field 'output_tokens': is -3; expected >= 0"),
    ("negative latency", edit_table("verifications", lambda df: _set(df, 0, "latency_s", -1.0)),
     r"table verifications, row 0 .*field 'latency_s': is -1\.0; expected >= 0"),
    ("truncated parquet file", truncate("candidates"),
     r"candidates\.parquet, table candidates: unreadable or truncated Parquet"),
    # N is the most candidates an episode holds (episodes may hold fewer): a manifest N above every episode's count
    # is malformed, as is one below some episode's.
    ("manifest n_candidates above the most", edit_manifest(lambda m: m.update(n_candidates=4)),
     r"manifest\.json, table manifest, field 'n_candidates': is 4, but the most candidates an episode holds is 3; "
     r"expected 3"),
    ("manifest n_candidates below the most", edit_manifest(lambda m: m.update(n_candidates=2)),
     r"episode 0 has candidate indices \[0, 1, 2\]; expected 0\.\.k-1 for some k from 1 to 2"),
    ("manifest counts mismatch", edit_manifest(lambda m: m["counts"].update(candidates=17)),
     r"manifest\.json, table manifest, field 'counts': says candidates has 17 rows; table candidates has 18"),
    ("manifest datasets mismatch", edit_manifest(lambda m: m["datasets"].update(math=5)),
     r"manifest\.json, table manifest, field 'datasets': is \{'aime': 1, 'math': 5\}; the items table has "
     r"\{'math': 2, 'aime': 1\}"),
    ("manifest models mismatch", edit_manifest(lambda m: m["models"][0].update(params_b=3.0)),
     r"manifest\.json, table manifest, field 'models': is .*the models table has"),
    ("manifest format_version", edit_manifest(lambda m: m.update(format_version=99)),
     r"field 'format_version': is 99; expected 1"),
    ("manifest not JSON", lambda d: (d / "manifest.json").write_text("{oops"),
     r"manifest\.json: not valid JSON"),
    ("rows missing after a partial rewrite", edit_table("verifications", lambda df: _drop_row(df, 0)),
     r"field 'counts': says verifications has 42 rows; table verifications has 41"),
]


@pytest.fixture(scope="module")
def good_pool_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small JSONL imported once (grading is the slow part); each test mutates its own copy."""
    tmp = tmp_path_factory.mktemp("template")
    return save_pool(import_jsonl(write_jsonl(tmp / "small.jsonl", small_jsonl_records())), tmp / "pool")


@pytest.fixture
def good_pool_dir(tmp_path: Path, good_pool_template: Path) -> Path:
    return Path(shutil.copytree(good_pool_template, tmp_path / "pool"))


def test_the_unmutated_pool_is_valid(good_pool_dir, capsys):
    load_pool(good_pool_dir)
    assert main(["pools", "validate", str(good_pool_dir)]) == 0
    assert capsys.readouterr().out.startswith(f"ok: {good_pool_dir}: 6 episodes x 3 candidates")


@pytest.mark.parametrize(("case", "mutate", "message"), POOL_CASES, ids=[c[0] for c in POOL_CASES])
def test_malformed_pool_is_refused(good_pool_dir, case, mutate, message):
    mutate(good_pool_dir)
    with pytest.raises(PoolError, match=message):
        load_pool(good_pool_dir)


@pytest.mark.parametrize(("case", "mutate", "message"), POOL_CASES, ids=[c[0] for c in POOL_CASES])
def test_malformed_pool_exits_2_on_the_command_line(good_pool_dir, tmp_path, capsys, case, mutate, message):
    mutate(good_pool_dir)
    assert main(["pools", "validate", str(good_pool_dir)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("coba: error: ") and _search(message, err), err
    dest = tmp_path / "out" / "export.jsonl"
    assert main(["pools", "export", str(good_pool_dir), str(dest)]) == 2
    assert _search(message, capsys.readouterr().err)
    assert not dest.parent.exists() or not any(dest.parent.iterdir())
    assert main(["pools", "inspect", str(good_pool_dir)]) == 2


def _search(pattern: str, text: str) -> bool:
    return re.search(pattern, text) is not None


# --------------------------------------------------------------------------------------------------
# Malformed JSONL imports
# --------------------------------------------------------------------------------------------------


def _records_with(index: int, **changes) -> list[dict]:
    records = small_jsonl_records()
    for key, value in changes.items():
        if value is _DROP:
            del records[index][key]
        else:
            records[index][key] = value
    return records


_DROP = object()


def _malformed_line(path: Path) -> None:
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = lines[2][: len(lines[2]) // 2] + "\n"
    path.write_text("".join(lines))


def _rewrite(records: list[dict]) -> Callable[[Path], None]:
    return lambda path: write_jsonl(path, records)


def _score_changes(index: int, tier: str, **entry) -> list[dict]:
    records = small_jsonl_records()
    records[index]["scores"][tier].update(entry)
    return records


JSONL_CASES = [
    ("malformed JSON line", _malformed_line, r"small\.jsonl, line 3: malformed JSON \(.* at column \d+\)"),
    ("missing required field", _rewrite(_records_with(1, gold=_DROP)),
     r"small\.jsonl, line 2, field 'gold': missing required field \(a string\)"),
    ("string for an integer", _rewrite(_records_with(0, prompt_tokens="40")),
     r"line 1, field 'prompt_tokens': expected an integer or null, got \"40\" \(str\)"),
    ("boolean for an integer", _rewrite(_records_with(3, candidate=True)),
     r"line 4, field 'candidate': expected an integer, got true \(bool\)"),
    ("number for a string", _rewrite(_records_with(4, item_id=7)),
     r"line 5, field 'item_id': expected a string, got 7 \(int\)"),
    ("not an object", lambda p: p.write_text(p.read_text() + "[1, 2]\n"),
     r"line 19: expected a JSON object per line, got \[1, 2\] \(list\)"),
    ("unknown field", _rewrite(_records_with(0, lantency_s=1.0)), r"line 1, field 'lantency_s': unknown field"),
    ("score above 1 in JSONL", _rewrite(_score_changes(2, "V1", score=1.2)),
     r"line 3, field 'scores\.V1\.score': is 1\.2; expected a value in \[0, 1\]"),
    ("score without a model", _rewrite(_score_changes(2, "V3", model=None)),
     r"line 3, field 'scores\.V3\.model': expected a string, got null"),
    ("verifier without a role in JSONL",
     _rewrite(_records_with(0, scores={"V4": {"score": 0.5, "model": "m", "params_b": 1}})),
     r"line 1, field 'scores.V4': verifier 'V4' has no role; expected scores.V4.role"),
    ("unknown verifier role in JSONL",
     _rewrite(_records_with(0, scores={"J": {"score": 0.5, "model": "m", "params_b": 1, "role": "oracle"}})),
     r"line 1, field 'scores.J.role': is 'oracle'; expected one of \['cheap_judge'"),
    ("malformed verifier name in JSONL",
     _rewrite(_records_with(0, scores={"a b": {"score": 0.5, "model": "m", "params_b": 1}})),
     r"line 1, field 'scores': verifier name 'a b'; expected a name matching"),
    ("verifier named like an action in JSONL",
     _rewrite(_records_with(0, scores={"STOP": {"score": 0.5, "model": "m", "params_b": 1, "role": "cheap_judge"}})),
     r"line 1, field 'scores': verifier name 'STOP'; expected a name matching"),
    ("verifier names equal up to case in JSONL",
     _rewrite(_records_with(0, scores={"v3": {"score": 0.5, "model": "m", "params_b": 1, "role": "cheap_judge"}})),
     r"row 2 .*field 'tier': verifier name 'V3' differs only in case from verifier 'v3'"),
    ("negative tokens in JSONL", _rewrite(_records_with(6, prompt_tokens=-1)),
     r"line 7, field 'prompt_tokens': is -1; expected a value >= 0"),
    ("item differs between lines", _rewrite(_records_with(4, gold="3")),
     r"line 5, field 'gold': differs from .*line 1 for the same item \(dataset 'math', item_id 'm1'\)"),
    ("model params differ", _rewrite(_records_with(3, generator_params_b=2.0)),
     r"line 4, field 'generator_params_b': model 'gen-big' has params_b 2\.0 here but 14\.0 at .*line 1"),
    ("duplicate candidate in JSONL", _rewrite(_records_with(1, candidate=0)),
     r"line 2, field 'candidate': candidate 0 of episode \(dataset 'math', item_id 'm1', generator 'gen-small'\) "
     r"already appears at .*line 1"),
    ("episode short of candidates", _rewrite(_records_with(5, candidate=5)),
     r"line 6, field 'candidate': episode \(dataset 'math', item_id 'm1', generator 'gen-big'\) has candidate "
     r"indices \[0, 1, 5\]; expected exactly 0\.\.2"),
    ("no tokens and no text", _rewrite(_records_with(1, text=None)),
     r"line 2, field 'output_tokens': missing, and there is no text to estimate it from"),
    ("empty file", lambda p: p.write_text("\n"), r"small\.jsonl: no candidates found"),
]


@pytest.mark.parametrize(("case", "mutate", "message"), JSONL_CASES, ids=[c[0] for c in JSONL_CASES])
def test_malformed_jsonl_is_refused(small_jsonl, case, mutate, message):
    mutate(small_jsonl)
    with pytest.raises(PoolError, match=message):
        import_jsonl(small_jsonl)


@pytest.mark.parametrize(("case", "mutate", "message"), JSONL_CASES, ids=[c[0] for c in JSONL_CASES])
def test_malformed_jsonl_exits_2_and_writes_nothing(small_jsonl, tmp_path, capsys, case, mutate, message):
    mutate(small_jsonl)
    dest = tmp_path / "pools" / "new"
    assert main(["pools", "import", str(small_jsonl), str(dest)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("coba: error: ") and _search(message, err), err
    assert not dest.exists()
    assert not (tmp_path / "pools").exists() or not any((tmp_path / "pools").iterdir())


def test_existing_destination_needs_force(small_jsonl, tmp_path, capsys):
    dest = tmp_path / "pool"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    for force in ([], ["--force"]):  # a folder holding anything coba-env did not write is never replaced
        assert main(["pools", "import", str(small_jsonl), str(dest), *force]) == 2
        assert _search(r"pool: the folder exists and holds files coba-env did not write", capsys.readouterr().err)
        assert [p.name for p in dest.iterdir()] == ["keep.txt"]
    (dest / "keep.txt").unlink()
    assert main(["pools", "import", str(small_jsonl), str(dest)]) == 0  # an empty folder is fine
    assert main(["pools", "import", str(small_jsonl), str(dest)]) == 2
    assert _search(r"pool: already exists \(pass --force to replace it\)", capsys.readouterr().err)
    assert main(["pools", "import", str(small_jsonl), str(dest), "--force"]) == 0  # a pool it wrote: replaced
    assert (dest / "manifest.json").exists()
    out = tmp_path / "out.jsonl"
    out.write_text("mine")
    assert main(["pools", "export", str(dest), str(out)]) == 2
    assert "already exists (pass --force" in capsys.readouterr().err and out.read_text() == "mine"


def test_failed_forced_import_keeps_the_old_pool(small_jsonl, tmp_path, capsys):
    dest = tmp_path / "pool"
    assert main(["pools", "import", str(small_jsonl), str(dest)]) == 0
    before = {f.name: f.read_bytes() for f in dest.iterdir()}
    _malformed_line(small_jsonl)
    assert main(["pools", "import", str(small_jsonl), str(dest), "--force"]) == 2
    assert "line 3: malformed JSON" in capsys.readouterr().err
    assert {f.name: f.read_bytes() for f in dest.iterdir()} == before


def test_qwen_options_need_the_qwen_format(small_jsonl, tmp_path, capsys):
    assert main(["pools", "import", str(small_jsonl), str(tmp_path / "p"), "--rm-tier", "V1"]) == 2
    assert "--rm-tier only apply to --format qwen-lists" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()


# --------------------------------------------------------------------------------------------------
# In-memory pools (as a builder or simulator hands them over, before anything is saved)
# --------------------------------------------------------------------------------------------------


def _cell(table: str, row: int, col: str, value) -> Callable[[Pool], None]:
    def mutate(pool: Pool) -> None:
        df = pool.table(table).astype({col: object})
        df.loc[row, col] = value
        setattr(pool, table, df)

    return mutate


MEMORY_CASES = [
    ("one string in an int column", _cell("candidates", 4, "output_tokens", "many"),
     r"table candidates, row 4 \(episode_id=1, candidate=1\), field 'output_tokens': expected an integer "
     r"\(int\), found 'many' \(str\)"),
    ("a boolean in an int column", _cell("episodes", 2, "episode_id", True),
     r"table episodes, row 2 \(episode_id=True\), field 'episode_id': expected an integer \(int\), found True"),
    ("NaN in a required float", _cell("candidates", 3, "latency_s", float("nan")),
     r"field 'latency_s': expected a number \(float\), found a null value"),
    ("a number in a string column", _cell("items", 0, "problem", 3),
     r"table items, row 0 \(dataset='math', item_id='m1'\), field 'problem': expected a string \(str\), found 3"),
    ("a string in a nullable bool column", _cell("candidates", 0, "correct", "yes"),
     r"field 'correct': expected a boolean or null \(bool\?\), found 'yes' \(str\)"),
    ("unknown model role", _cell("models", 0, "role", "judge"),
     r"table models, row 0 \(name='gen-small'\), field 'role': unknown role 'judge'"),
    ("manifest key missing", lambda pool: pool.manifest.pop("counts"),
     r"field 'counts': missing key; expected keys"),
]


@pytest.mark.parametrize(("case", "mutate", "message"), MEMORY_CASES, ids=[c[0] for c in MEMORY_CASES])
def test_malformed_in_memory_pool_is_refused(good_pool_template, case, mutate, message):
    pool = load_pool(good_pool_template)
    mutate(pool)
    with pytest.raises(PoolError, match=message):
        validate_pool(pool, source="memory")
