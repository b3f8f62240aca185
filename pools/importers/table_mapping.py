"""What the outcome-table importers share about their options and names: ``ROLE=NAME,...`` mappings (which column
or field holds what), names read from cells (ids, categories), datasets and categories taken from file names.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pools.importers.table_files import RawTable
from pools.safe_names import MAX_NAME_CHARS

__all__ = ["check_name_cells", "file_categories", "parse_mapping", "source_list"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def parse_mapping(text: str | None, roles: Sequence[str], flag: str) -> dict[str, str]:
    """``"prompt=question,score=result.score"`` -> ``{"prompt": "question", "score": "result.score"}``; an unknown
    role, a role given twice or an empty name raises ValueError naming ``flag`` and the roles."""
    out: dict[str, str] = {}
    for part in (p for p in (text or "").split(",") if p.strip()):
        role, sep, name = part.partition("=")
        role, name = role.strip(), name.strip()
        if not sep or role not in roles or not name:
            raise ValueError(f"{flag} {part.strip()!r}: expected ROLE=NAME with ROLE one of {', '.join(roles)}")
        if role in out:
            raise ValueError(f"{flag} names {role} twice; give each role once")
        out[role] = name
    return out


def source_list(src: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[str]:
    """One source or several as a list of path strings."""
    return [str(s) for s in src] if isinstance(src, list | tuple) else [str(src)]


def check_name_cells(table: RawTable, column: str, values: np.ndarray, what: str) -> None:
    """Refuse the first cell of ``values`` (names read from ``column``) that is empty, too long or holds a control
    character: ids and categories become names in tables, reports and paths."""
    for pos, value in enumerate(values):
        if value is None or not value.strip():
            raise table.error(f"is empty; expected the query's {what}", pos, column)
        if len(value) > MAX_NAME_CHARS or _CONTROL.search(value):
            raise table.error(f"{what} {value[:40]!r}{'...' if len(value) > 40 else ''} is not a name; expected "
                              f"printable text on one line, at most {MAX_NAME_CHARS} characters", pos, column)


def file_categories(files: Sequence[str]) -> tuple[str, list[str]]:
    """(the name the files share, each file's own part): ``mmlu_anatomy.csv``, ``mmlu_virology.csv`` ->
    ``("mmlu", ["anatomy", "virology"])``. The shared part is the stems' common prefix up to its last ``_``,
    ``-`` or ``.``; one file is all shared (its own part is empty)."""
    stems = [Path(f).stem for f in files]
    if len(stems) == 1:
        return stems[0], [""]
    prefix = os.path.commonprefix(stems)
    cut = max(prefix.rfind(sep) for sep in "_-.")
    shared = prefix[:cut] if cut > 0 else ""
    return shared, [s[len(shared):].lstrip("_-.") or s for s in stems]
