"""Collect and run the code blocks of the project's markdown files (tests/test_docs_run.py).

The convention, for everyone who writes docs:

- Every fenced block opened with ```` ```python ```` in README.md and docs/**/*.md runs. Code that cannot run
  on a CPU machine without network in a few seconds is shown as ```` ```text ```` or ```` ```bash ````.
- The blocks of one file run in document order in one shared namespace, like a notebook: a later block may use
  what an earlier block of the same file defined or imported. Files never share anything.
- Every file runs in a fresh temporary working directory (so blocks may write files such as ``runs/...``),
  with the repository root first on ``sys.path``; blocks reach repository files through ``REPO`` only if they
  need them (a ``pathlib.Path`` of the repository root, predefined in the namespace).
- A shell block runs too when the line right before its fence is ``<!-- doc-test: run -->``: it runs with
  ``bash -euo pipefail`` in the same temporary directory, in document order with the Python blocks, with this
  interpreter's ``bin`` folder (``coba``) first on ``PATH``. Only mark blocks that take seconds.

A failure names the file and the line of the block's fence, and the traceback points at markdown lines.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUN_MARK = "<!-- doc-test: run -->"
_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")


@dataclass(frozen=True)
class Block:
    """One fenced code block: its language, code, and the 1-based line of its opening fence."""

    path: Path
    line: int
    language: str
    code: str
    marked: bool

    @property
    def where(self) -> str:
        """``FILE:LINE`` of the opening fence, the file relative to the repository when inside it."""
        try:
            shown = self.path.resolve().relative_to(REPO)
        except ValueError:
            shown = self.path
        return f"{shown}:{self.line}"


def collect_blocks(path: Path) -> list[Block]:
    """Every fenced code block of the markdown file ``path``, in document order."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, start = match["fence"], i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(match["indent"]):] if lines[i].startswith(match["indent"]) else lines[i])
            i += 1
        marked = start > 0 and lines[start - 1].strip() == RUN_MARK
        blocks.append(Block(Path(path), start + 1, match["info"].lower(), "\n".join(body) + "\n", marked))
        i += 1
    return blocks


def runnable_blocks(path: Path) -> list[Block]:
    """The blocks the test runs: every ``python`` block and the marked shell blocks."""
    return [b for b in collect_blocks(path)
            if b.language in ("python", "py") or (b.marked and b.language in ("bash", "sh", "shell", "console"))]


class DocBlockError(AssertionError):
    """A documentation block failed; the message names its file and line."""


def _run_python(block: Block, namespace: dict) -> None:
    # Pad with blank lines so the traceback's line numbers are the markdown file's.
    source = "\n" * block.line + block.code
    try:
        exec(compile(source, str(block.path), "exec"), namespace)  # noqa: S102  (running the docs is the point)
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise DocBlockError(f"{block.where}: python block exited with status {exc.code}") from None
    except Exception as exc:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(block.path)]
        at = f" (line {frames[-1].lineno})" if frames else ""
        tail = "".join(traceback.format_exception(exc)[-12:])
        raise DocBlockError(f"{block.where}: python block failed{at}: {type(exc).__name__}: {exc}\n{tail}") from None


def _run_shell(block: Block, cwd: Path, timeout: float) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
           "REPO": str(REPO)}
    try:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise DocBlockError(f"{block.where}: shell block did not finish in {timeout:g} s") from None
    if done.returncode != 0:
        raise DocBlockError(f"{block.where}: shell block exited with status {done.returncode}:\n"
                            f"{(done.stdout + done.stderr)[-3000:]}")


def run_markdown(path: Path, cwd: Path, *, shell_timeout: float = 300.0) -> int:
    """Run the runnable blocks of ``path`` in document order with ``cwd`` as working directory; returns how
    many ran. Raises ``DocBlockError`` naming the file and line of the first block that fails."""
    namespace: dict = {"__name__": "__docs__", "REPO": REPO}
    old_cwd, old_path = Path.cwd(), list(sys.path)
    os.chdir(cwd)
    sys.path.insert(0, str(REPO))
    try:
        blocks = runnable_blocks(path)
        for block in blocks:
            if block.language in ("python", "py"):
                _run_python(block, namespace)
            else:
                _run_shell(block, cwd, shell_timeout)
        return len(blocks)
    finally:
        os.chdir(old_cwd)
        sys.path[:] = old_path


def documentation_files() -> list[Path]:
    """README.md and every markdown file under docs/, sorted."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
