"""Hostile outcome tables: each refused in one line naming the file, the row and the column, exit 2, nothing written;
and the oddities a real table has (a byte-order mark, quoted newlines) read as they are meant."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from coba_cli.main import main
from pools.importers import import_pool
from pools.limits import MAX_CELL_CHARS

HEADER = ["prompt", "m1", "m2"]


def _csv(path: Path, rows: list[list[str]], header: list[str] = HEADER, bom: bool = False) -> Path:
    def cell(v: str) -> str:
        return '"' + v.replace('"', '""') + '"' if any(c in v for c in ',"\n') else v

    text = "".join(",".join(cell(v) for v in row) + "\n" for row in [header, *rows])
    path.write_text(("\ufeff" if bom else "") + text, encoding="utf-8")
    return path


OK = [["What is 1+1?", "True", "False"], ["Name a prime.", "False", "True"]]


def _two_files(folder: Path) -> list[str]:
    a = _csv(folder / "t_a.csv", [["q1", "What is 1+1?", "True"]], header=["id", "prompt", "m1"])
    b = _csv(folder / "t_b.csv", [["q1", "What is 1 + 2?", "False"]], header=["id", "prompt", "m2"])
    return [str(a), str(b)]


def _jsonl(path: Path, text: str) -> list[str]:
    path.write_text(text, encoding="utf-8")
    return [str(path)]


CASES = [
    ("missing prompt column", lambda d: [str(_csv(d / "t.csv", OK, header=["question", "m1", "m2"]))], [],
     r"t\.csv, header, column 'prompt': no such column; expected the queries' prompt column"),
    ("BOM inside the header", lambda d: [str(_csv(d / "t.csv", [["q1", *OK[0]]], header=["id", "\ufeffprompt", "m1",
                                                                                        "m2"]))],
     [], r"t\.csv, header, column 'prompt': no such column; .*column '\\ufeffprompt' holds a byte-order mark"),
    ("non-boolean model cell", lambda d: [str(_csv(d / "t.csv", [OK[0], ["Name a prime.", "maybe", "True"]]))], [],
     r"t\.csv, row 2, column 'm1': is 'maybe'; expected True, False or a score in \[0, 1\]"),
    ("score outside [0, 1]", lambda d: [str(_csv(d / "t.csv", [OK[0], ["Name a prime.", "0.5", "1.5"]]))], [],
     r"t\.csv, row 2, column 'm2': score '1\.5' is outside \[0, 1\]"),
    ("NaN cost cell", lambda d: [str(_csv(d / "t.csv", [["What?", "True", "NaN"]], header=["prompt", "m1", "m1|cost"]))],
     ["--columns", "cost={model}|cost", "--models", "m1"],
     r"t\.csv, row 1, column 'm1\|cost': is 'NaN'; expected the call's cost in dollars, a finite number >= 0"),
    ("duplicate query id", lambda d: [str(_csv(d / "t.csv", [["q1", "A?", "True"], ["q1", "A?", "False"]],
                                               header=["id", "prompt", "m1"]))], ["--columns", "id=id"],
     r"t\.csv, row 2, column 'id': query 'q1' has a second outcome of model 'm1' \(the first at \S*t\.csv, row 1\)"),
    ("unclosed quote", lambda d: [str(_write(d / "t.csv", 'prompt,m1\n"What?,True\nNext,False\n'))], [],
     r"t\.csv: malformed CSV near line \d+: an unclosed quote"),
    ("a 10^6-character cell", lambda d: [str(_csv(d / "t.csv", [["x" * 10**6, "True", "True"]]))], [],
     rf"t\.csv, row 1, column 'prompt': a cell of 1,000,000 characters; expected at most {MAX_CELL_CHARS:,}"),
    ("two files disagree on a query's text", _two_files, ["--columns", "id=id"],
     r"t_b\.csv, row 1, column 'prompt': the text of query 'q1' differs from \S*t_a\.csv, row 1 \(same query id\)"),
]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("case", "make", "extra", "message"), CASES, ids=[c[0] for c in CASES])
def test_hostile_wide_table_is_refused_in_one_line(case, make, extra, message, tmp_path, capsys):
    sources = make(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    code = main(["pools", "import", *sources, "--format", "wide", "--out", str(tmp_path / "pool"), *extra])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith("coba: error: "), err
    assert re.search(message, err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written, no temporary sibling left


LONG_CASES = [
    ("NaN cost literal", '{"prompt": "A?", "model": "m1", "score": 1, "cost": NaN}\n',
     r"t\.jsonl, line 1, column 'cost': is nan; expected the call's cost in dollars"),
    ("score outside [0, 1]", '{"prompt": "A?", "model": "m1", "score": -0.5}\n',
     r"t\.jsonl, line 1, column 'score': score -0\.5 is outside \[0, 1\]"),
    ("missing score", '{"prompt": "A?", "model": "m1", "score": 1}\n{"prompt": "B?", "model": "m1"}\n',
     r"t\.jsonl, line 2, column 'score': is missing; expected the record's score"),
    ("duplicate query and model", '{"prompt": "A?", "model": "m1", "score": 1}\n'
                                  '{"prompt": "A?", "model": "m1", "score": 0}\n',
     r"t\.jsonl, line 2, column 'prompt': query '0' has a second outcome of model 'm1' \(the first at \S*t\.jsonl, "
     r"line 1\)"),
    ("non-boolean score text", '{"prompt": "A?", "model": "m1", "score": "yes"}\n',
     r"t\.jsonl, line 1, column 'score': is 'yes'; expected True, False or a score in \[0, 1\]"),
]


@pytest.mark.parametrize(("case", "text", "message"), LONG_CASES, ids=[c[0] for c in LONG_CASES])
def test_hostile_long_table_is_refused_in_one_line(case, text, message, tmp_path, capsys):
    sources = _jsonl(tmp_path / "t.jsonl", text)
    code = main(["pools", "import", *sources, "--format", "long", "--out", str(tmp_path / "pool")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert re.search(message, err), err
    assert not (tmp_path / "pool").exists()


def test_a_byte_order_mark_and_quoted_newlines_are_read_as_meant(tmp_path):
    rows = [["Which?\nA. 1\nB. 2\nAnswer:", "True", "False"], ['Say "hi", then stop.', "False", "True"]]
    plain = import_pool(str(_csv(tmp_path / "plain.csv", rows)), "wide")
    marked = import_pool(str(_csv(tmp_path / "marked.csv", rows, bom=True)), "wide")
    assert plain.items["problem"].tolist() == [rows[0][0], rows[1][0]]  # the newlines and quotes kept
    assert list(marked.models["name"]) == ["m1", "m2"]  # the mark is not part of the first column's name
    for table in ("items", "episodes", "candidates"):
        a, b = plain.table(table).drop(columns=["dataset"], errors="ignore"), marked.table(table).drop(
            columns=["dataset"], errors="ignore")
        assert a.equals(b), table


def test_scores_outside_can_be_clipped_and_are_listed(tmp_path):
    src = _jsonl(tmp_path / "t.jsonl", json.dumps({"prompt": "A?", "model": "m1", "score": -0.25}) + "\n")
    pool = import_pool(src, "long", scores_outside="clip")
    assert pool.candidates["graded_score"].tolist() == [0.0]
    assert pool.manifest["provenance"]["scores_clipped"] == [
        {"where": f"{src[0]}, line 1", "column": "score", "score": -0.25}]
