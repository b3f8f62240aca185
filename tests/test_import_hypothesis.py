"""Property: ``coba pools import`` never crashes on near-miss JSONL records.

Hypothesis takes the small valid candidate file and damages it: a field of one line (top level or inside
a verifier score) gets an arbitrary JSON value (huge and negative numbers, fractions, NaN and Infinity
tokens, strings, lists, objects, null, booleans), is deleted, or an unknown field is added. Whatever the
damage, the import ends with exit 0 (a valid pool) or exit 2 with exactly one ``coba: error:`` line naming
the file; never an exception, and never a half-written destination.
"""

from __future__ import annotations

import copy
import json
import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import small_jsonl_records
from tests.hostile_harness import run_coba

RECORDS = small_jsonl_records()
TOP_FIELDS = sorted({k for r in RECORDS for k in r if k != "scores"})
SCORE_FIELDS = ("score", "model", "params_b", "prompt_tokens", "output_tokens", "latency_s")

near_miss_numbers = st.sampled_from([0, -1, -0.0, 1.5, 1e30, -1e30, 2**63, 2**64 + 1, float("nan"),
                                     float("inf"), float("-inf"), 1e-300, 3.0])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70) | near_miss_numbers
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)


@st.composite
def damaged_records(draw) -> list[dict]:
    records = copy.deepcopy(RECORDS)
    line = draw(st.integers(min_value=0, max_value=len(records) - 1))
    rec = records[line]
    where = draw(st.sampled_from(["top", "score", "delete", "unknown", "scores"]))
    if where == "top":
        rec[draw(st.sampled_from(TOP_FIELDS))] = draw(json_values)
    elif where == "score":
        tier = draw(st.sampled_from(sorted(rec["scores"])))
        rec["scores"][tier][draw(st.sampled_from(SCORE_FIELDS))] = draw(json_values)
    elif where == "delete":
        rec.pop(draw(st.sampled_from(sorted(rec))), None)
    elif where == "unknown":
        rec[draw(st.text(min_size=1, max_size=8))] = draw(json_values)
    else:
        rec["scores"] = draw(json_values)
    return records


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=damaged_records())
def test_near_miss_records_never_crash_the_importer(records: list[dict], capsys) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "near.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")  # NaN tokens allowed
        dest = Path(tmp) / "pool"
        code, _, err = run_coba(["pools", "import", str(src), str(dest)], capsys)
        assert code in (0, 2), err
        if code == 2:
            errors = [line for line in err.splitlines() if line.startswith("coba: error: ")]
            assert len(errors) == 1 and re.search(r"near\.jsonl", errors[0]), err
            assert not dest.exists()
        else:
            assert (dest / "manifest.json").is_file()
        assert sorted(p.name for p in Path(tmp).iterdir()) == sorted(["near.jsonl"] + (["pool"] if code == 0 else []))
