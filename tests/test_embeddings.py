"""A user's own embeddings: imported into a 2-model pool, read by a kNN router trained from the command line and
benched; malformed files are one line, exit 2, and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from coba_cli.main import main
from tests.conftest import write_jsonl

N_ITEMS, DIM = 24, 16


def two_model_records() -> list[dict]:
    """24 items x 2 generators, one candidate each: the small model right on even items, the large one on 3 of 4."""
    records = []
    for i in range(N_ITEMS):
        for generator, params, right in (("small-1b", 1.0, i % 2 == 0), ("large-70b", 70.0, i % 4 != 3)):
            answer = str(i) if right else str(i + 1)
            records.append({"dataset": "toy", "item_id": f"q{i}", "problem": f"What is {i}?", "gold": str(i),
                            "generator": generator, "generator_params_b": params, "candidate": 0,
                            "text": f"The answer is \\boxed{{{answer}}}.", "prompt_tokens": 30, "output_tokens": 20,
                            "latency_s": 1.0, "finish_reason": "stop"})
    return records


@pytest.fixture
def pool_dir(tmp_path: Path) -> Path:
    src = write_jsonl(tmp_path / "toy.jsonl", two_model_records())
    dest = tmp_path / "pool"
    assert main(["pools", "import", str(src), "--out", str(dest)]) == 0
    return dest


def test_embeddings_import_train_the_knn_router_and_bench_it(pool_dir: Path, tmp_path: Path, capsys):
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(N_ITEMS, DIM))
    vectors[:, 0] = np.where(np.arange(N_ITEMS) % 2 == 0, 3.0, -3.0)  # the small model's right items stand apart
    np.savez(tmp_path / "vectors.npz", item_id=np.array([f"q{i}" for i in range(N_ITEMS)]), embedding=vectors)
    assert main(["pools", "embed", str(pool_dir), str(tmp_path / "vectors.npz")]) == 0
    assert f"{N_ITEMS} items x {DIM} dimensions" in capsys.readouterr().out
    stored = pd.read_parquet(pool_dir / "embeddings.parquet")
    assert np.allclose(np.stack(stored["embedding"]), vectors.astype(np.float32))
    assert main(["pools", "validate", str(pool_dir)]) == 0  # the pool, with its new table, is still a pool

    router = tmp_path / "knn"
    assert main(["train", "knn_router", "--pool", str(pool_dir), "--problem-features", "embeddings", "--cost",
                 "tokens", "--out", str(router), "--no-progress"]) == 0
    config = json.loads((router / "featurizer.json").read_text())
    assert config["names"] == [f"embedding_{i}" for i in range(DIM)]
    bench = tmp_path / "bench"
    assert main(["bench", "--env", "route", "--pool", str(pool_dir), "--cost", "tokens", "--policies",
                 f"{router}@0.01,agents.simple_routers:AlwaysLargest", "--out", str(bench), "--no-progress",
                 "--no-figures", "--workers", "1"]) == 0
    results = json.loads((bench / "results.json").read_text())
    text = json.dumps(results)
    assert "knn_router@0.01" in text and "always_largest" in text


def _write(tmp_path: Path, kind: str) -> Path:
    ids = [f"q{i}" for i in range(N_ITEMS)]
    rows = [{"item_id": i, "embedding": [0.5] * DIM} for i in ids]
    if kind == "ragged":
        rows[5]["embedding"] = [0.5] * (DIM - 1)
        path = tmp_path / "bad.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif kind == "nan":
        vectors = np.full((N_ITEMS, DIM), 0.5)
        vectors[7, 3] = np.nan
        path = tmp_path / "bad.npz"
        np.savez(path, item_id=np.array(ids), embedding=vectors)
    elif kind == "missing":
        path = tmp_path / "bad.parquet"
        pd.DataFrame(rows[:-1]).to_parquet(path)
    else:  # a wrong id
        rows[2]["item_id"] = "q999"
        path = tmp_path / "bad.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("kind, message", [
    ("ragged", r"bad.jsonl, row 6, field 'embedding': 15 coordinates; expected 16 like the first row"),
    ("nan", r"bad.npz, row 8, field 'embedding': coordinate 3 is nan; expected a finite number"),
    ("missing", r"bad.parquet: 1 of the pool's 24 items have no embedding, e.g. toy/q23; cover every item or give "
                r"--default VALUE"),
    ("wrong ids", r"bad.jsonl, row 3, field 'item_id': the pool has no item with item_id 'q999'"),
])
def test_a_malformed_embedding_file_is_one_line_exit_2_nothing_written(pool_dir: Path, tmp_path: Path, capsys,
                                                                      kind, message):
    import re

    before = sorted(p.name for p in pool_dir.iterdir())
    assert main(["pools", "embed", str(pool_dir), str(_write(tmp_path, kind))]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and re.search(message, err), err
    assert sorted(p.name for p in pool_dir.iterdir()) == before  # nothing written


def test_a_missing_item_may_take_a_stated_default(pool_dir: Path, tmp_path: Path):
    assert main(["pools", "embed", str(pool_dir), str(_write(tmp_path, "missing")), "--default", "0"]) == 0
    stored = pd.read_parquet(pool_dir / "embeddings.parquet").set_index("item_id")
    assert list(stored.loc["q23", "embedding"]) == [0.0] * DIM
    assert main(["pools", "embed", str(pool_dir), str(_write(tmp_path, "missing"))]) == 2  # exists: --force
