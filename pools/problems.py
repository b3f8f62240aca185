"""Problem sets with gold answers: MATH-500, AIME 2024/2025, AMC 2023 (JSONL files) and Reasoning Gym; a user's
problem file (``load_problems_file``, what ``coba solve --file`` reads).

The four benchmark files are read in their original formats (see ``shared/data/SOURCES.md``) from a
problems folder: ``--problems-dir``, else ``$COBA_PROBLEMS_DIR``, else ``../shared/data/problems`` relative
to the repository root, else relative to the working directory. The Reasoning Gym "hard" subset is
procedural: ``pools/data/rgym_hard.yaml`` lists the tasks, their difficulty settings, the seed and the size.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pools.errors import PoolError

__all__ = [
    "DATASETS",
    "REASONING_GYM",
    "RGYM_HARD_CONFIG",
    "Problem",
    "default_problems_dir",
    "load_dataset",
    "load_jsonl_problems",
    "load_problems",
    "load_problems_file",
    "load_reasoning_gym",
    "numeric_gold",
]

#: Dataset name of the procedural Reasoning Gym subset.
REASONING_GYM = "reasoning_gym"

#: The default Reasoning Gym subset: tasks, difficulty settings, seed and items per task.
RGYM_HARD_CONFIG = Path(__file__).resolve().parent / "data" / "rgym_hard.yaml"

_REPO_ROOT = Path(__file__).resolve().parents[1]
_DEFAULT_RELATIVE = Path("..") / "shared" / "data" / "problems"


@dataclass(frozen=True)
class Problem:
    """One item: dataset, id, problem text and gold answer, plus optional level, subject, task, metadata."""

    dataset: str
    item_id: str
    problem: str
    gold: str
    level: str | None = None
    subject: str | None = None
    task: str | None = None
    metadata: dict[str, Any] | None = field(default=None, compare=False, hash=False)

    def to_record(self) -> dict[str, Any]:
        """The item fields of a canonical JSONL record (``pools.importers.jsonl``)."""
        return {"dataset": self.dataset, "item_id": self.item_id, "problem": self.problem, "gold": self.gold,
                "level": self.level, "subject": self.subject, "task": self.task, "metadata": self.metadata}


def numeric_gold(value: Any) -> str:
    """A gold answer as text: integers without padding or ``.0`` ("025" -> "25", 27.0 -> "27")."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number or string, got {value!r}")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value):
            return str(int(value))
        return repr(value)
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    if math.isfinite(number) and number == int(number) and text.lstrip("+-").replace(".", "", 1).isdigit():
        return str(int(number))
    return text


def _require(row: dict[str, Any], name: str, where: str) -> Any:
    if name not in row or row[name] is None:
        raise PoolError(f"missing required field; expected fields {sorted(row)} to include it", file=where,
                        field=name)
    return row[name]


def _math500(row: dict[str, Any], where: str) -> Problem:
    return Problem("math500", str(_require(row, "unique_id", where)), str(_require(row, "problem", where)),
                   str(_require(row, "answer", where)).strip(), level=str(row["level"]) if row.get("level") else None,
                   subject=row.get("subject"))


def _aime(dataset: str) -> Callable[[dict[str, Any], str], Problem]:
    def parse(row: dict[str, Any], where: str) -> Problem:
        return Problem(dataset, str(_require(row, "id", where)), str(_require(row, "problem", where)),
                       numeric_gold(_require(row, "answer", where)))

    return parse


def _amc2023(row: dict[str, Any], where: str) -> Problem:
    text = row.get("problem") or row.get("question")
    if not text:
        raise PoolError("missing required field (either 'problem' or 'question')", file=where, field="problem")
    return Problem("amc2023", str(_require(row, "id", where)), str(text), numeric_gold(_require(row, "answer", where)))


#: Dataset name -> (file name in the problems folder, row parser).
DATASETS: dict[str, tuple[str, Callable[[dict[str, Any], str], Problem]]] = {
    "math500": ("math500.jsonl", _math500),
    "aime2024": ("aime2024.jsonl", _aime("aime2024")),
    "aime2025": ("aime2025.jsonl", _aime("aime2025")),
    "amc2023": ("amc2023.jsonl", _amc2023),
}


def default_problems_dir() -> Path:
    """``$COBA_PROBLEMS_DIR``, else ``../shared/data/problems`` from the repository root, else from the cwd."""
    env = os.environ.get("COBA_PROBLEMS_DIR")
    if env:
        return Path(env)
    for base in (_REPO_ROOT, Path.cwd()):
        candidate = (base / _DEFAULT_RELATIVE).resolve()
        if candidate.is_dir():
            return candidate
    return (_REPO_ROOT / _DEFAULT_RELATIVE).resolve()


def load_jsonl_problems(dataset: str, problems_dir: str | os.PathLike[str] | None = None) -> list[Problem]:
    """All items of a benchmark file (``math500``, ``aime2024``, ``aime2025``, ``amc2023``) in file order."""
    if dataset not in DATASETS:
        raise PoolError(f"unknown dataset {dataset!r}; expected one of {[*DATASETS, REASONING_GYM]}")
    file_name, parse = DATASETS[dataset]
    folder = Path(problems_dir) if problems_dir is not None else default_problems_dir()
    path = folder / file_name
    if not path.is_file():
        raise PoolError(f"problem file not found; expected {file_name} of dataset {dataset!r} in {folder} "
                        "(pass --problems-dir or set COBA_PROBLEMS_DIR)", file=str(path))
    # Imported here: the importers pull in the graders (math_verify), which loading problems does not need.
    from pools.importers.canonical_records import read_json_lines

    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for lineno, row in read_json_lines(path):
        where = f"{path}, line {lineno}"
        if not isinstance(row, dict):
            raise PoolError("expected a JSON object per line", file=where)
        problem = parse(row, where)
        if problem.item_id in seen:
            raise PoolError(f"duplicate id {problem.item_id!r} (first at line {seen[problem.item_id]})",
                            file=where, field="id")
        seen[problem.item_id] = lineno
        problems.append(problem)
    return problems


def load_reasoning_gym(config: str | os.PathLike[str] | dict[str, Any] | None = None, *,
                       size_per_task: int | None = None, seed: int | None = None,
                       tasks: Sequence[str] | None = None) -> list[Problem]:
    """The Reasoning Gym subset described by ``config`` (a YAML path or dict; default ``rgym_hard.yaml``)."""
    where = str(RGYM_HARD_CONFIG if config is None else config) if not isinstance(config, dict) else "<config>"
    if not isinstance(config, dict):
        path = Path(where)
        if not path.is_file():
            raise PoolError("Reasoning Gym config not found", file=where)
        try:
            config = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, yaml.YAMLError) as exc:
            raise PoolError(f"not a readable YAML file ({' '.join(str(exc).split())[:200]})", file=where) from None
    if not isinstance(config, dict) or not isinstance(config.get("tasks"), dict) or not config["tasks"]:
        raise PoolError("expected a mapping with 'tasks' (task name -> difficulty settings)", file=where,
                        field="tasks")
    bad = next((k for k, v in config["tasks"].items() if v is not None and not isinstance(v, dict)), None)
    if bad is not None:
        raise PoolError(f"task {bad!r}: expected a mapping of difficulty settings, got {config['tasks'][bad]!r}",
                        file=where, field="tasks")
    for key in ("size_per_task", "seed"):
        value = config.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise PoolError(f"is {value!r}; expected an integer >= 0", file=where, field=key)
    task_settings: dict[str, dict[str, Any]] = {k: dict(v or {}) for k, v in config["tasks"].items()}
    chosen = list(tasks) if tasks else list(task_settings)
    unknown = [t for t in chosen if t not in task_settings]
    if unknown:
        raise PoolError(f"task(s) {unknown} not in the config; expected some of {list(task_settings)}", file=where,
                        field="tasks")
    size = int(size_per_task if size_per_task is not None else config.get("size_per_task", 10))
    seed = int(seed if seed is not None else config.get("seed", 0))
    from pools.grading import make_reasoning_gym_items

    try:
        items = make_reasoning_gym_items(chosen, size, seed, {t: task_settings[t] for t in chosen})
    except (KeyError, ValueError, TypeError) as exc:
        raise PoolError(f"Reasoning Gym could not build the items ({exc})", file=where, field="tasks") from exc
    return [Problem(REASONING_GYM, it["item_id"], it["problem"], it["gold"], task=it["task"],
                    metadata=it["metadata"]) for it in items]


def load_dataset(dataset: str, problems_dir: str | os.PathLike[str] | None = None, *,
                 rgym_config: str | os.PathLike[str] | None = None, limit: int | None = None) -> list[Problem]:
    """Items of one dataset (a benchmark file or ``reasoning_gym``), the first ``limit`` when given."""
    if dataset == REASONING_GYM:
        problems = load_reasoning_gym(rgym_config)
    else:
        problems = load_jsonl_problems(dataset, problems_dir)
    return problems if limit is None else problems[:limit]


def load_problems(datasets: Sequence[str], problems_dir: str | os.PathLike[str] | None = None, *,
                  rgym_config: str | os.PathLike[str] | None = None, limit: int | None = None) -> list[Problem]:
    """Items of several datasets, in the order given (``limit`` applies per dataset)."""
    out: list[Problem] = []
    for dataset in datasets:
        out.extend(load_dataset(dataset, problems_dir, rgym_config=rgym_config, limit=limit))
    return out


#: The fields of a line of a user's problem file and their JSON types (``load_problems_file``).
PROBLEM_FILE_FIELDS: dict[str, type] = {"problem": str, "dataset": str, "item_id": str, "gold": str, "level": str,
                                        "subject": str, "task": str, "metadata": dict}


#: What a path that is no regular file is, by its stat type (a FIFO without a writer would block the read forever).
_NOT_REGULAR = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                (stat.S_ISBLK, "a block device"))


def _check_regular_file(path: str | os.PathLike[str]) -> None:
    """Refuse a problems file that is not a regular file (a FIFO, socket or device) before opening it."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # missing or unreadable: the reader says so
    for test, what in _NOT_REGULAR:
        if test(mode):
            raise PoolError(f"not a regular file ({what}); expected a JSONL file of problems", file=str(path))


def load_problems_file(path: str | os.PathLike[str]) -> list[Problem]:
    """Problems from a JSONL file, one object per line (``problem`` required; dataset default ``live``, item_id
    ``line-N``); a bad line raises PoolError naming the file, line and field."""
    from pools.importers.canonical_records import read_json_lines

    _check_regular_file(path)
    problems = []
    for lineno, obj in read_json_lines(path):
        where = f"{path}, line {lineno}"
        if not isinstance(obj, dict):
            raise PoolError("expected a JSON object", file=where)
        for name, value in obj.items():
            if name not in PROBLEM_FILE_FIELDS:
                raise PoolError(f"unknown field; expected some of {list(PROBLEM_FILE_FIELDS)}", file=where, field=name)
            if value is not None and not isinstance(value, PROBLEM_FILE_FIELDS[name]):
                raise PoolError(f"expected {PROBLEM_FILE_FIELDS[name].__name__}, got {type(value).__name__}",
                                file=where, field=name)
        if not obj.get("problem"):
            raise PoolError("missing or empty (the problem text)", file=where, field="problem")
        problems.append(Problem(dataset=obj.get("dataset") or "live", item_id=obj.get("item_id") or f"line-{lineno}",
                                problem=obj["problem"], gold=obj.get("gold") or "", level=obj.get("level"),
                                subject=obj.get("subject"), task=obj.get("task"), metadata=obj.get("metadata")))
    if not problems:
        raise PoolError("no problem found; expected one JSON object per line", file=str(path))
    return problems
