"""What an importer declares beside its code: its ``--format`` name, the options it takes, its sources.

Each importer module (``pools/importers/*.py``) ends with one ``FORMAT = ImportFormat(...)``; the registry
(``pools.importers.IMPORT_FORMATS``) collects them, and ``coba pools import`` builds its ``--format`` choices,
the per-format options with their help, and the "only apply to --format X" / "needs --X" checks from it. An
option's default is the importer's own keyword default (read off its signature), so it is written once.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pools.store import Pool

#: The kinds of option value an importer may declare; the command line checks each before any work
#: ("number": finite; "positive number": finite and > 0).
OPTION_KINDS: tuple[str, ...] = ("text", "number", "positive number")

#: Options every format may declare although its importer lacks the keyword: ``import_pool`` handles them
#: (``dataset`` renames the source's one dataset).
GENERIC_OPTIONS: tuple[str, ...] = ("dataset",)

_FORMAT_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")


@dataclass(frozen=True)
class ImportOption:
    """One option of an importer: its keyword (the flag is ``--`` + the keyword with dashes), meaning and kind.

    ``help`` says what the value is (the same for every format taking the option); ``note`` what this format
    does with it or takes when it is left out; ``check`` refuses a value the kind lets through, returning why.
    """

    name: str
    help: str
    kind: str = "text"
    choices: tuple[str, ...] | None = None
    required: bool = False
    note: str = ""
    check: Callable[[Any], str | None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name != self.name.lower():
            raise ValueError(f"import option {self.name!r}: expected a lower-case Python keyword name")
        if self.kind not in OPTION_KINDS:
            raise ValueError(f"import option {self.name!r}: kind {self.kind!r}; expected one of {list(OPTION_KINDS)}")

    @property
    def flag(self) -> str:
        """The command-line flag, e.g. ``--generator-params-b``."""
        return "--" + self.name.replace("_", "-")

    def for_format(self, note: str = "", *, required: bool = False) -> ImportOption:
        """This shared option as one format takes it: with that format's ``note``, required by it or not."""
        return replace(self, note=note, required=required)

    def same_meaning(self, other: ImportOption) -> bool:
        """Two formats declare one flag: it must mean the same value of the same kind to both."""
        return (self.help, self.kind, self.choices, self.check) == (other.help, other.kind, other.choices, other.check)


@dataclass(frozen=True)
class ImportFormat:
    """An importer as ``coba pools import --format NAME`` offers it.

    ``importer(src, **options)`` returns the pool in memory; ``src`` is one path, or a list of paths when
    ``several_sources``; ``folders`` says a source may be a folder.
    """

    name: str
    importer: Callable[..., Pool]
    description: str
    options: tuple[ImportOption, ...] = ()
    several_sources: bool = False
    folders: bool = False

    def __post_init__(self) -> None:
        if not _FORMAT_NAME.fullmatch(self.name):
            raise ValueError(f"import format {self.name!r}: expected a lower-case name of letters, digits and '-'")
        keywords = inspect.signature(self.importer).parameters
        names = [o.name for o in self.options]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"import format {self.name!r} declares option {name!r} twice")
            if name not in keywords and name not in GENERIC_OPTIONS:
                raise ValueError(f"import format {self.name!r}: option {name!r} is no keyword of "
                                 f"{self.importer.__name__}")

    def option(self, name: str) -> ImportOption | None:
        """The declared option ``name``, or None when this format does not take it."""
        return next((o for o in self.options if o.name == name), None)

    def default(self, name: str) -> Any:
        """The importer's own default of option ``name`` (None when it has none or the option is generic)."""
        parameter = inspect.signature(self.importer).parameters.get(name)
        return None if parameter is None or parameter.default is inspect.Parameter.empty else parameter.default


def _positive_size(value: float) -> str | None:
    if value > 0:
        return None
    return ("expected the generator's size in billions of parameters, a number > 0 (a size of 0 would make every "
            "call free under the parameter-weighted cost p_tokens)")


#: Options several formats take, declared once; a format takes one with ``for_format``.
GENERATOR = ImportOption("generator", "generator model name")
GENERATOR_PARAMS_B = ImportOption("generator_params_b", "generator size in billions of parameters, > 0",
                                  kind="number", check=_positive_size)
DATASET = ImportOption("dataset", "dataset name of the items")
