"""Policies from the user's code: ``FILE.py:Class`` and ``module:Class`` references, and installed plugins.

A *class reference* names a ``Policy`` subclass the registry does not ship: ``my_rules.py:TwoThenJudge`` (a
Python file, relative paths from the working directory, or from the YAML file that names it) or
``my_package.rules:TwoThenJudge`` (an importable module). ``agents.registry`` accepts one wherever it accepts
a policy kind: ``coba bench --policies my_rules.py:TwoThenJudge`` and a YAML spec's ``kind:``.

An installed package makes its policies known by name through the entry-point group ``coba_env.policies``
(Python packaging's plugin convention, the one Gymnasium uses for third-party environments): each entry
point's name is a policy name and its value a class reference ``module:Class`` (never a file), e.g. in the
package's ``pyproject.toml``::

    [project.entry-points."coba_env.policies"]
    two_then_judge = "my_package.rules:TwoThenJudge"

A plugin is imported only when a command names it (``--policies two_then_judge``): the selections ``all`` and
``main`` hold the built-in policies only, so a broken, exiting or blocking plugin never touches another command.

Only ``.py`` files and importable modules are loaded: nothing is ever imported from a model ``.zip``.
Every failure raises ``PluginError`` (a ``ValueError``) in one line naming the reference, the file and what
went wrong, so the command line exits 2 without a traceback.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import re
import sys
import traceback
from importlib import metadata
from pathlib import Path
from types import ModuleType

from agents.base import Policy

#: The entry-point group an installed package declares its policies under (name -> "module:Class").
ENTRY_POINT_GROUP = "coba_env.policies"

_ATTRIBUTE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
#: Files already imported, by resolved path: the same file named twice gives the same class.
_FILE_MODULES: dict[Path, ModuleType] = {}


class PluginError(ValueError):
    """A class reference or plugin that cannot give a Policy class (one line: reference, file, reason)."""


def is_class_ref(text: str) -> bool:
    """Whether ``text`` has the form ``FILE.py:Class`` or ``module:Class`` (nothing is imported here)."""
    head, sep, attr = str(text).strip().rpartition(":")
    if not sep or not head or not _ATTRIBUTE.fullmatch(attr):
        return False
    return head.endswith(".py") or bool(_MODULE.fullmatch(head))


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def _error_place(exc: BaseException, path: Path) -> str:
    """`` line N`` of the deepest traceback frame inside ``path`` (SyntaxError carries its own line)."""
    if isinstance(exc, SyntaxError):
        return ""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return f", line {frames[-1].lineno}" if frames else ""


def _deepest(exc: BaseException) -> str:
    """``FILE, line N`` of the innermost frame of ``exc`` (where the user's code failed)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}, line {exc.lineno}"
    frames = traceback.extract_tb(exc.__traceback__)
    return f"{frames[-1].filename}, line {frames[-1].lineno}" if frames else "?"


def _import_file(path: Path, ref: str) -> ModuleType:
    resolved = path.resolve()
    if resolved in _FILE_MODULES:
        return _FILE_MODULES[resolved]
    # A name of our own per file, so two user files called rules.py never replace each other in sys.modules.
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:10]
    stem = re.sub(r"\W", "_", resolved.stem)
    name = f"coba_user_policies_{stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise PluginError(f"policy {ref!r}: {path}: cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look classes up through sys.modules
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # sys.exit at import must not end the command as if it had finished
        del sys.modules[name]
        raise PluginError(f"policy {ref!r}: {path}{_error_place(exc, resolved)}: error while importing it: "
                          f"{_one_line(exc)}") from None
    _FILE_MODULES[resolved] = module
    return module


def _import_module(module_name: str, ref: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise PluginError(f"policy {ref!r}: no module named {exc.name!r} (is it installed, or on "
                              "PYTHONPATH? A file is named FILE.py:Class)") from None
        raise PluginError(f"policy {ref!r}: {_deepest(exc)}: error while importing {module_name!r}: "
                          f"{_one_line(exc)}") from None
    except (Exception, SystemExit) as exc:
        raise PluginError(f"policy {ref!r}: {_deepest(exc)}: error while importing {module_name!r}: "
                          f"{_one_line(exc)}") from None


def load_class_ref(ref: str, *, base_dir: str | Path | None = None) -> type[Policy]:
    """The Policy subclass named by ``ref`` (``FILE.py:Class`` or ``module:Class``); a relative FILE is looked
    up in ``base_dir`` first (the directory of the YAML file that names it), then in the working directory."""
    text = str(ref).strip()
    if not is_class_ref(text):
        raise PluginError(f"policy {text!r}: expected FILE.py:Class or module:Class")
    head, _, attr = text.rpartition(":")
    if head.endswith(".zip"):
        raise PluginError(f"policy {text!r}: code is never imported from a .zip; an SB3 model zip is named "
                          "PATH.zip or PATH.zip@LAMBDA")
    if head.endswith(".py"):
        path = Path(head).expanduser()
        if not path.is_absolute() and base_dir is not None and (Path(base_dir) / path).is_file():
            path = Path(base_dir) / path
        if not path.is_file():
            raise PluginError(f"policy {text!r}: {head}: {'not a file' if path.exists() else 'no such file'}; "
                              "expected the Python file that defines the class")
        module, where = _import_file(path, text), str(path)
    else:
        module, where = _import_module(head, text), f"module {head!r}"
    obj: object = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            defined = sorted(n for n, v in vars(module).items() if inspect.isclass(v) and issubclass(v, Policy)
                             and v.__module__ == module.__name__)
            raise PluginError(f"policy {text!r}: {where} has no class {attr!r}; Policy classes defined there: "
                              f"{', '.join(defined) or 'none'}")
        obj = getattr(obj, part)
    if not (inspect.isclass(obj) and issubclass(obj, Policy)):
        got = f"class {obj.__name__}" if inspect.isclass(obj) else type(obj).__name__
        raise PluginError(f"policy {text!r}: {where}: {attr} is not a Policy (a subclass of agents.base.Policy); "
                          f"got {got}")
    if inspect.isabstract(obj):
        missing = ", ".join(sorted(getattr(obj, "__abstractmethods__", ())))
        raise PluginError(f"policy {text!r}: {where}: {attr} does not implement {missing}")
    return obj


def entry_point_refs() -> dict[str, str]:
    """Installed plugin policies: entry-point name -> class reference, from the ``coba_env.policies`` group. Read
    from the installed packages' metadata only: no plugin is imported here."""
    return {ep.name: ep.value for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def load_entry_point(name: str) -> tuple[str, type[Policy]]:
    """The plugin policy ``name`` (its class reference and class), imported now: a plugin is imported only when a
    command names it, so one that fails, exits or blocks at import never touches a command that does not.

    An entry point's value must be ``module:Class`` (an importable module path): it is never a file, so nothing
    from the current folder runs because a package declared ``x.py:Class``. Raises ``PluginError`` (one line)."""
    refs = entry_point_refs()
    if name not in refs:
        raise PluginError(f"no plugin policy {name!r} is installed (entry point group {ENTRY_POINT_GROUP!r})")
    value = refs[name]
    head, sep, attr = str(value).strip().rpartition(":")
    if not sep or head.endswith(".py") or not _MODULE.fullmatch(head) or not _ATTRIBUTE.fullmatch(attr):
        raise PluginError(f"plugin policy {name!r}: entry point value {value!r} (group {ENTRY_POINT_GROUP!r}) is not "
                          "module:Class; an entry point names a class in an importable module, never a file")
    return value, load_class_ref(value)
