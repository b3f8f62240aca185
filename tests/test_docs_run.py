"""Docs that cannot drift: every ```python block of README.md and docs/**/*.md runs, and the shell blocks
marked ``<!-- doc-test: run -->`` run too (the convention is in tests/doc_blocks.py: one namespace per file,
blocks in document order, a fresh temporary working directory per file).

The collector itself is tested on temporary markdown files: a deliberately broken block fails, naming its
file and line.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.doc_blocks import (
    REPO,
    DocBlockError,
    collect_blocks,
    documentation_files,
    run_markdown,
    runnable_blocks,
)

DOC_FILES = documentation_files()


@pytest.mark.parametrize("path", DOC_FILES, ids=[p.relative_to(REPO).as_posix() for p in DOC_FILES])
def test_documentation_blocks_run(path, tmp_path):
    run_markdown(path, tmp_path)


def test_every_documentation_file_is_collected():
    names = {p.name for p in DOC_FILES}
    assert {"README.md", "POLICIES.md", "GLOSSARY.md"} <= names
    assert any(p.parent.name == "tutorials" for p in DOC_FILES)


def _write(tmp_path, text: str):
    path = tmp_path / "page.md"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_broken_python_block_fails_naming_its_file_and_line(tmp_path):
    page = _write(tmp_path, """\
        # A page

        ```python
        x = 1
        ```

        Some prose.

        ```python
        y = x + 1
        assert y == 3, y
        ```
        """)
    with pytest.raises(DocBlockError, match=r"page\.md:9: python block failed \(line 11\): AssertionError: 2"):
        run_markdown(page, tmp_path)


def test_blocks_of_one_file_share_a_namespace_and_run_in_a_temporary_directory(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    page = _write(tmp_path, """\
        ```python
        from pathlib import Path
        Path("made.txt").write_text("hello")
        ```

        <!-- doc-test: run -->
        ```bash
        test "$(cat made.txt)" = hello
        command -v coba   # this interpreter's bin folder comes first on PATH
        echo more >> made.txt
        ```

        ```python
        assert Path("made.txt").read_text() == "hellomore\\n"
        ```

        ```bash
        exit 1   # not marked: never runs
        ```

        ```text
        not code
        ```
        """)
    assert run_markdown(page, work) == 3
    assert (work / "made.txt").read_text() == "hellomore\n"


def test_a_failing_marked_shell_block_fails_naming_its_line(tmp_path):
    page = _write(tmp_path, """\
        Intro.

        <!-- doc-test: run -->
        ```bash
        echo checking
        ls no/such/file
        ```
        """)
    with pytest.raises(DocBlockError, match=r"page\.md:4: shell block exited with status 2:\nchecking\n.*no/such/file"):
        run_markdown(page, tmp_path)


def test_collector_reads_languages_and_marks():
    page_blocks = collect_blocks(DOC_FILES[0])  # README.md
    assert [b.language for b in page_blocks if b.language == "python"]
    assert all(b.line >= 1 for b in page_blocks)
    assert all(b.language in ("python", "bash") for b in runnable_blocks(DOC_FILES[0]))


def test_registry_yaml_excerpts_in_the_docs_match_the_registry():
    """A YAML excerpt of a built-in policy (docs/POLICIES.md shows coba_strong) has the registry's params."""
    import yaml

    from agents.registry import load_specs

    specs = load_specs()
    checked = 0
    for path in DOC_FILES:
        for block in collect_blocks(path):
            if block.language != "yaml":
                continue
            shown = (yaml.safe_load(block.code) or {}).get("policies", {})
            for name, spec in shown.items():
                if name in specs and "kind" in spec:
                    assert spec["params"] == specs[name]["params"], f"{block.where}: {name}"
                    checked += 1
    assert checked >= 1
