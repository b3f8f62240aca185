"""The code's shape against the house limits: long files, long functions, and branches on the episode grouping.

Prints every non-test Python file over ``--max-lines`` lines (default 400), every function or method over
``--max-function`` lines (default 80, decorators and docstring included), and every conditional that branches on
the replay/route split (an ``if``/``elif``/conditional expression/``match`` whose test reads the grouping: ``GROUPING_TEST``), outside tests and outside the routing analyses (``eval/route_analysis.py``,
``eval/routing_metrics.py``). Exits 0 always: the figures are for the reader.

Usage: python scripts/code_shape.py [--max-lines 400] [--max-function 80] [--list-branches]
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The layers checked (tests, scripts and docs are not).
LAYERS = ("pools", "coba_env", "agents", "eval", "train", "coba_cli")
#: The routing analyses, where branching on several generators is the point.
ANALYSES = ("eval/route_analysis.py", "eval/routing_metrics.py")
#: A test that decides between the two groupings: it reads the grouping, compares an env name with "route" or
#: "replay", asks whether there is a route pool (``route is None``), whether a policy is written for one grouping
#: (``is_route_policy``, ``written_for``, ``routes``) or whether something is a ``RoutePool`` / route env.
GROUPING_TEST = re.compile(r"grouping|[=!]= *[\"']route[\"']|[=!]= *[\"']replay[\"']|\broute is (not )?None|"
                           r"\bif route\b|is_route|written_for|\.routes\b|isinstance\([^)]*Route")


def python_files() -> list[Path]:
    """Every Python file of the package layers, sorted."""
    return sorted(p for layer in LAYERS for p in (ROOT / layer).rglob("*.py"))


def long_functions(tree: ast.AST, limit: int) -> list[tuple[str, int, int]]:
    """(qualified name, first line, length) of every function longer than ``limit`` lines."""
    out = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    length = child.end_lineno - first + 1
                    if length > limit:
                        out.append((name, first, length))
                visit(child, name + ".")
    visit(tree, "")
    return out


def grouping_branches(tree: ast.AST, source: str) -> list[int]:
    """Lines of the conditionals whose test names the replay/route split."""
    lines = []
    for node in ast.walk(tree):
        test = None
        if isinstance(node, (ast.If, ast.IfExp, ast.While)):
            test = node.test
        elif isinstance(node, ast.Match):
            test = node.subject
        if test is not None and GROUPING_TEST.search(ast.get_source_segment(source, test) or ""):
            lines.append(node.lineno)
    return sorted(set(lines))


def main() -> None:
    """Print the long files, long functions and grouping branches, with their counts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-lines", type=int, default=400, help="longest non-test file (default: 400)")
    parser.add_argument("--max-function", type=int, default=80, help="longest function (default: 80)")
    parser.add_argument("--list-branches", action="store_true", help="print every grouping branch")
    args = parser.parse_args()
    big, long, branches = [], [], []
    for path in python_files():
        rel = path.relative_to(ROOT).as_posix()
        source = path.read_text(encoding="utf-8")
        n = source.count("\n")
        if n > args.max_lines:
            big.append((rel, n))
        tree = ast.parse(source)
        long += [(rel, *f) for f in long_functions(tree, args.max_function)]
        if rel not in ANALYSES:
            branches += [(rel, line) for line in grouping_branches(tree, source)]
    print(f"files over {args.max_lines} lines: {len(big)}")
    for rel, n in big:
        print(f"  {rel}: {n}")
    print(f"functions over {args.max_function} lines: {len(long)}")
    for rel, name, first, length in long:
        print(f"  {rel}:{first} {name}: {length}")
    files = sorted({rel for rel, _ in branches})
    print(f"grouping branches outside the routing analyses: {len(branches)} in {len(files)} files")
    if args.list_branches:
        for rel, line in branches:
            print(f"  {rel}:{line}")


if __name__ == "__main__":
    main()
