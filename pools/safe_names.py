"""Names from data (datasets, items, models, policies) that become parts of paths: one rule, written once.

A dataset named ``../../x`` or ``/etc`` must never steer a write outside the command's ``--out``. Two checks:

- ``check_data_name`` refuses, at import, a name that could never be a sensible name: empty, longer than
  ``MAX_NAME_CHARS``, or holding a line break, a NUL or another control character (these break reports and
  tables too). Slashes and dots stay allowed in names (``hendrycks/math``, ``v1.5``): they are mapped below.
- ``safe_path_part`` maps any name to one safe file name: letters, digits, ``.``, ``_`` and ``-`` only, never
  starting with a dot, at most ``MAX_PART_CHARS`` characters; a name that had to change gets a short digest of
  the original, so two names never map to the same part. ``path_under`` joins parts under a root and checks
  that the result stays inside it (every write under ``--out`` goes through it).

Standard library only.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from pathlib import Path

from pools.errors import PoolError

__all__ = ["MAX_NAME_CHARS", "MAX_PART_CHARS", "check_data_name", "control_character", "path_under", "safe_path_part"]

#: Longest dataset, item, model or policy name accepted from data.
MAX_NAME_CHARS = 200
#: Longest file name ``safe_path_part`` makes (well under every file system's 255-byte limit).
MAX_PART_CHARS = 80

_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_UNSAFE_CHAR = re.compile(r"[^A-Za-z0-9._-]+")


def control_character(text: str) -> str | None:
    """The first control character (line break, tab, NUL, ...) or lone surrogate in ``text``, shown escaped."""
    for ch in text:
        if unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp"):
            return repr(ch)[1:-1] if ch.isascii() else f"\\u{ord(ch):04x}"
    return None


def check_data_name(name: object, *, what: str, file: str | None = None, field: str | None = None) -> str:
    """``name`` if it is a usable name from data; else ``PoolError`` naming ``file`` and ``field``."""
    if not isinstance(name, str) or not name.strip():
        raise PoolError(f"{what} name is {name!r}; expected a non-empty string", file=file, field=field)
    if len(name) > MAX_NAME_CHARS:
        raise PoolError(f"{what} name {name[:40]!r}... is {len(name)} characters long; expected at most "
                        f"{MAX_NAME_CHARS}", file=file, field=field)
    bad = control_character(name)
    if bad is not None:
        raise PoolError(f"{what} name {name[:60]!r} holds the control character {bad}; expected printable text",
                        file=file, field=field)
    return name


def safe_path_part(name: str) -> str:
    """``name`` as one safe file name: unchanged when already safe and short, else cleaned plus a digest."""
    if _SAFE.fullmatch(name) and len(name) <= MAX_PART_CHARS and name not in (".", ".."):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    cleaned = _UNSAFE_CHAR.sub("_", name).strip("._-")[: MAX_PART_CHARS - 11]
    return f"{cleaned}-{digest}" if cleaned else digest


def path_under(root: str | os.PathLike[str], *names: str) -> Path:
    """``root / safe_path_part(n1) / ...``, checked to stay inside ``root`` (raises ``PoolError`` if not)."""
    base = Path(root)
    path = base.joinpath(*(safe_path_part(str(n)) for n in names))
    resolved_base = base.resolve()
    resolved = path.resolve()
    if resolved != resolved_base and resolved_base not in resolved.parents:
        raise PoolError(f"would write {path}, outside {root}; refusing", file=str(root))
    return path
