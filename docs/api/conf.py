"""Sphinx configuration of the API reference (built by tests/test_api_docs.py with warnings as errors)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: the packages themselves

project = "coba-env"
author = "coba-env contributors"
extensions = ["sphinx.ext.autodoc"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
# Type hints name classes of numpy, pandas, gymnasium that this reference does not document itself.
nitpicky = False
html_theme = "alabaster"
exclude_patterns = ["_build"]


def _markdown_docstring(app, what, name, obj, options, lines):
    """Gymnasium-style docstrings (``## Heading`` sections, pipe tables) read as reStructuredText: a heading
    becomes a rubric and a table a literal block, shown as written."""
    out, in_table = [], False
    for line in lines:
        stripped = line.strip()
        is_row = stripped.startswith("|") and stripped.endswith("|") and len(stripped) > 1
        if in_table and not is_row:
            out.append("")
            in_table = False
        if stripped.startswith("## "):
            out += ["", f".. rubric:: {stripped[3:]}", ""]
            continue
        if is_row and not in_table:
            out += ["", "::", ""]
            in_table = True
        out.append("    " + line if is_row else line)
    lines[:] = out


def setup(app):
    """Register the docstring hook."""
    app.connect("autodoc-process-docstring", _markdown_docstring)
