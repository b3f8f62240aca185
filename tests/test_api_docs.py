"""The API reference (docs/api/, Sphinx autodoc over the docstrings) builds with warnings as errors, and
documents what a researcher looks up: CoBaEnv's arguments and info keys, Policy, run_bench, checkpoint specs
and the plugin entry point."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_api_reference_builds_with_warnings_as_errors(tmp_path):
    out = tmp_path / "html"
    done = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                           str(REPO / "docs" / "api"), str(out), "-d", str(tmp_path / "doctrees")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    env = (out / "env.html").read_text(encoding="utf-8")
    for text in ("CoBaEnv", "Action Space", "Arguments", "selected_answer", "max_cost"):
        assert text in env, text
    policies = (out / "policies.html").read_text(encoding="utf-8")
    for text in ("Policy", "act_batch", "make_policy", "load_class_ref", "coba_env.policies", "PATH&#64;LAMBDA"):
        assert text in policies, text
    assert "run_bench" in (out / "bench.html").read_text(encoding="utf-8")
