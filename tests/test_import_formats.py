"""An importer format is declared once, beside its code, and ``coba pools import`` is generated from it.

Following docs/POOLS.md, "Adding an importer": a format defined here (a tiny CSV importer and its
``ImportFormat``) is registered in the one place (``register_import_format``); ``coba pools import --help``
then offers it with its options, importing with it works, and the option checks name it. The shipped
formats are pinned to the options, required options and sources the command took before the declarations
moved beside the importers (docs/POOLS.md lists them per format).
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from coba_cli.main import main
from pools.importers import IMPORT_FORMATS, ImportFormat, ImportOption, import_pool, register_import_format
from pools.importers.canonical_records import check_record
from pools.importers.import_format import DATASET, GENERATOR
from pools.importers.jsonl import build_pool
from pools.store import Pool, load_pool


def import_answer_csv(src: str | os.PathLike[str], *, model: str, model_params_b: float,
                      dataset: str = "sheet") -> Pool:
    """A CSV of ``problem,gold,answer`` rows: one episode of one candidate per row."""
    records = []
    with open(src, encoding="utf-8", newline="") as fh:
        for row_number, row in enumerate(csv.DictReader(fh), start=1):
            rec = {"dataset": dataset, "item_id": str(row_number), "problem": row["problem"], "gold": row["gold"],
                   "generator": model, "generator_params_b": model_params_b, "candidate": 0,
                   "answer": row["answer"], "output_tokens": 5}
            where = f"{src}, row {row_number}"
            check_record(rec, where)
            records.append((where, rec))
    return build_pool(records, source=str(src), provenance={"importer": "answer-csv", "source": str(src)})


ANSWER_CSV = ImportFormat(
    "answer-csv", import_answer_csv, "a CSV of problem, gold and answer columns",
    options=(ImportOption("model", "the model that answered", required=True),
             ImportOption("model_params_b", "its size in billions", kind="positive number", required=True),
             DATASET))


@pytest.fixture
def answer_csv_format() -> Iterator[ImportFormat]:
    register_import_format(ANSWER_CSV)
    yield ANSWER_CSV
    del IMPORT_FORMATS[ANSWER_CSV.name]


@pytest.fixture
def sheet(tmp_path: Path) -> Path:
    path = tmp_path / "answers.csv"
    path.write_text("problem,gold,answer\nWhat is 2+2?,4,4\nWhat is 3+3?,6,5\n", encoding="utf-8")
    return path


def test_a_registered_format_is_offered_with_its_options(answer_csv_format, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["pools", "import", "--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert re.search(r"--format \{[^}]*answer-csv\}", out), out
    assert "answer-csv: a CSV of problem, gold and answer columns" in out
    assert "options of --format answer-csv:" in out
    assert "--model MODEL the model that answered (required)" in out
    assert "--model-params-b MODEL_PARAMS_B its size in billions" in out
    # --dataset is one flag for every format taking it; this one's default comes from its importer's signature
    assert "answer-csv: default sheet" in out


def test_importing_with_a_registered_format(answer_csv_format, sheet, tmp_path, capsys):
    dest = tmp_path / "pool"
    assert main(["pools", "import", str(sheet), "--out", str(dest), "--format", "answer-csv", "--model", "m-7b",
                 "--model-params-b", "7", "--dataset", "arith"]) == 0
    pool = load_pool(dest)
    assert pool.items["dataset"].tolist() == ["arith", "arith"]
    assert pool.items["gold"].tolist() == ["4", "6"]
    assert pool.models["name"].tolist() == ["m-7b"] and pool.models["params_b"].tolist() == [7.0]
    assert pool.candidates["correct"].tolist() == [True, False]  # 4 = 4, 5 != 6
    assert f"imported {sheet} -> {dest}: 2 episodes x 1 candidates" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--format", "answer-csv", "--model", "m"], r"--format answer-csv needs --model-params-b \(the source does not say\)"),
    (["--format", "answer-csv", "--model-params-b", "7"], r"--format answer-csv needs --model \(the source"),
    (["--format", "jsonl", "--model", "m"], r"--model only apply to --format answer-csv$"),
    (["--format", "answer-csv", "--model", "m", "--model-params-b", "0"],
     r"argument --model-params-b: expected a number > 0, got 0$"),
    (["--format", "answer-csv", "--model", "m", "--model-params-b", "7", "--generator", "g"],
     r"--generator only apply to --format qwen-lists, tot-game24, rg-eval, llm-monkeys$"),
    (["--format", "answer-csv", "--model", "m", "--model-params-b", "7", "--gold", "g.jsonl"],
     r"--gold only apply to --format routellm$"),
])
def test_the_checks_of_a_registered_format(answer_csv_format, sheet, tmp_path, args, message, capsys):
    try:
        code = main(["pools", "import", str(sheet), "--out", str(tmp_path / "pool"), *args])
    except SystemExit as exc:  # argparse refuses a value of the wrong kind itself
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert re.search(message, err.splitlines()[-1]), err  # argparse prints its usage lines above its error
    assert not (tmp_path / "pool").exists()


def _importer(src: str, *, generator: str | None = None, depth: int = 1) -> Pool:
    raise AssertionError("never called")


@pytest.mark.parametrize("make, message", [
    (lambda: register_import_format(ImportFormat("jsonl", _importer, "again")), r"'jsonl' is registered already"),
    (lambda: register_import_format(ImportFormat("other", _importer, "x", options=(
        ImportOption("generator", "who wrote it"),))),
     r"option --generator differs from format 'qwen-lists''s \(one flag has one meaning"),
    (lambda: ImportFormat("other", _importer, "x", options=(ImportOption("width", "w"),)),
     r"option 'width' is no keyword of _importer"),
    (lambda: ImportFormat("other", _importer, "x", options=(GENERATOR, GENERATOR)), r"declares option 'generator' twice"),
    (lambda: ImportFormat("Other_Format", _importer, "x"), r"expected a lower-case name of letters, digits and '-'"),
    (lambda: ImportOption("depth", "d", kind="integer"), r"kind 'integer'; expected one of \['text', 'number'"),
])
def test_bad_declarations_are_refused(make, message):
    before = dict(IMPORT_FORMATS)
    with pytest.raises(ValueError, match=message):
        make()
    assert IMPORT_FORMATS == before


def test_a_shared_option_declared_alike_joins_the_formats_taking_it():
    fmt = ImportFormat("other", _importer, "x", options=(GENERATOR.for_format("default the file's author"),))
    register_import_format(fmt)
    try:
        assert IMPORT_FORMATS["other"].option("generator").note == "default the file's author"
    finally:
        del IMPORT_FORMATS["other"]


#: What `coba pools import` took per format before the declarations moved beside the importers
#: (coba_cli/pools_cmd.py at b006ace: _FORMAT_OPTIONS, _REQUIRED_OPTIONS, the folder and multi-source formats);
#: since issue 39 canonical JSONL takes --score-transform too (raw reward-model scores).
BEFORE = {
    "jsonl": ({"dataset", "score_transform"}, set(), False, False),
    "qwen-lists": ({"generator", "generator_params_b", "dataset", "rm_tier", "rm_model", "rm_params_b",
                    "score_transform"}, {"generator", "generator_params_b"}, False, False),
    "tot-game24": ({"generator", "generator_params_b", "puzzles", "dataset"}, {"generator_params_b"}, False, False),
    "rg-eval": ({"generator", "generator_params_b", "dataset"}, {"generator_params_b"}, True, True),
    "llm-monkeys": ({"generator", "generator_params_b", "dataset"}, {"generator", "generator_params_b"}, False, True),
    "routellm": ({"gold"}, set(), False, False),
}


def test_the_shipped_formats_take_what_they_took_before():
    assert list(IMPORT_FORMATS)[:len(BEFORE)] == list(BEFORE)  # the formats added since come after them
    for name, (options, required, several, folders) in BEFORE.items():
        fmt = IMPORT_FORMATS[name]
        assert {o.name for o in fmt.options} == options, name
        assert {o.name for o in fmt.options if o.required} == required, name
        assert (fmt.several_sources, fmt.folders) == (several, folders), name


def test_the_importers_defaults_reach_the_help(capsys):
    with pytest.raises(SystemExit):
        main(["pools", "import", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    # qwen_lists.import_qwen_lists(..., dataset="math", rm_tier="V3", rm_params_b=72.0, score_transform="auto")
    for text in ("qwen-lists: default math", "(default: V3)", "(default: 72)", "(jsonl: default identity;",
                 "lists: default auto)",
                 "jsonl, tot-game24: renames the source's one dataset"):
        assert text in out, text


def test_import_pool_takes_roles_and_prices(small_jsonl):
    pool = import_pool(str(small_jsonl), "jsonl", verifier_roles={"V1": "reward_model"},
                       prices={"judge-8b": {"input": 1.0, "output": 2.0}})
    assert pool.manifest["verifier_roles"]["V1"] == "reward_model"
    assert pool.manifest["prices_usd_per_million_tokens"]["judge-8b"] == {"input": 1.0, "output": 2.0}
