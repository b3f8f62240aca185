"""A learned-controller kind is declared once (``agents/controllers.yaml``, ``agents.controller_kinds``).

The steps of docs/CONTROLLERS.md ("Adding a controller kind"), followed by a tiny kind defined here: its trainer
writes a checkpoint whose ``controller.json`` names the kind, its loader reads it back as a policy that samples
``stop_after`` candidates and stops. Registered in the one place, ``coba train --help`` lists it, ``coba train
KIND --help`` shows its description, example and option (and no other kind's), ``coba train KIND`` trains it,
and ``coba bench --policies main,DIR`` loads its checkpoint through its loader; the declared kinds' option
defaults are their trainers' own.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agents.base import Policy
from agents.checkpoint import CONFIG_FILE, kinds
from agents.controller_kinds import controller_kind, controller_kinds, register_kind, resolve, unregister_kind
from coba_cli.main import main as coba

KIND = "tiny_stop"
ENTRY = {
    "summary": "stop after a fixed count",
    "description": "A test kind: samples a fixed number of candidates, then stops (tests/test_controller_kinds.py).",
    "examples": ["coba train tiny_stop --pool tiny --stop-after 2 --out runs/tiny-stop"],
    "trainer": "tests.test_controller_kinds:train_tiny_stop",
    "loader": "tests.test_controller_kinds:load_tiny_stop",
    "options": {"stop-after": {"dest": "stop_after", "type": "positive", "default": 1, "metavar": "K",
                               "help": "candidates sampled before STOP"}},
}


class TinyStop(Policy):
    """SAMPLE ``k`` candidates, then STOP (label-free)."""

    group = "learned"

    def __init__(self, k: int, lam: float | None) -> None:
        self.k, self.lam = k, lam
        self.name = f"tiny_stop{k}"

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Any) -> int:
        """SAMPLE while fewer than ``k`` are revealed and SAMPLE is legal."""
        if evidence.n_revealed < self.k and action_mask[self.sample_id]:
            return self.sample_id
        return self.stop_id


def train_tiny_stop(pool: Any, out_dir: Path, *, grouping: str, datasets: Any, episode_ids: Any, cost_model: str,
                    seed: int, progress: bool, stop_after: int = 1) -> Path:
    """The kind's trainer: writes its checkpoint (nothing to learn)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / CONFIG_FILE).write_text(json.dumps({"kind": KIND, "stop_after": stop_after, "grouping": grouping,
                                               "seed": seed, "cost_model": cost_model}))
    return out


def load_tiny_stop(path: Path, *, lam: float | None = None) -> Policy:
    """The kind's loader."""
    return TinyStop(json.loads((Path(path) / CONFIG_FILE).read_text())["stop_after"], lam)


@pytest.fixture
def tiny_kind():
    register_kind(KIND, ENTRY)
    yield controller_kind(KIND)
    unregister_kind(KIND)


def test_a_kind_registered_in_one_place_is_listed_helped_trained_and_benched(tiny_kind, tmp_path, capsys):
    assert KIND in controller_kinds() and KIND in kinds()  # a kind with a loader writes checkpoints
    with pytest.raises(SystemExit):
        coba(["train", "--help"])
    assert KIND in capsys.readouterr().out
    with pytest.raises(SystemExit):
        coba(["train", KIND, "--help"])
    out = capsys.readouterr().out
    assert out.startswith(f"usage: coba train {KIND} ")
    for text in ("A test kind", "coba train tiny_stop --pool tiny --stop-after 2", "--stop-after K",
                 "candidates sampled before STOP (default: 1)"):
        assert text in out, text
    for other in ("--timesteps", "--rounds"):
        assert other not in out, other

    ckpt = tmp_path / "ckpt"
    assert coba(["train", KIND, "--pool", "tiny", "--stop-after", "2", "--out", str(ckpt), "--no-progress"]) == 0
    config = json.loads((ckpt / CONFIG_FILE).read_text())
    assert (config["stop_after"], config["grouping"], config["seed"]) == (2, "pair", 0)
    capsys.readouterr()
    bench = tmp_path / "bench"
    assert coba(["bench", "--pool", "tiny", "--policies", f"greedy,{ckpt}", "--out", str(bench), "--no-figures",
                 "--no-progress"]) == 0
    results = json.loads((bench / "results.json").read_text())["policies"]
    assert results["tiny_stop2"]["applicable"] and results["tiny_stop2"]["pooled"]["n"] == \
        results["greedy"]["pooled"]["n"] > 0


def test_an_option_of_another_kind_is_refused_in_one_line(tiny_kind, tmp_path, capsys):
    assert coba(["train", "mlp", "--pool", "tiny", "--stop-after", "2", "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.strip().endswith("--stop-after applies to tiny_stop only")


@pytest.mark.parametrize(("entry", "match"), [
    ({**ENTRY, "loader": "no_colon"}, r"field 'loader' is 'no_colon'; expected module:attribute"),
    ({**ENTRY, "colour": "red"}, r"unknown key\(s\) \['colour'\]"),
    ({k: v for k, v in ENTRY.items() if k != "trainer"}, r"neither a 'trainer' nor protocol 'methods'"),
    ({**ENTRY, "summary": ""}, r"field 'summary' is ''; expected text"),
    ({**ENTRY, "options": {"k": {"dest": "k", "type": "float", "help": "x"}}},
     r"option 'k': field 'type' is 'float'; expected one of \['count', 'positive', 'choice'\]"),
    ({**ENTRY, "options": {"k": {"dest": "k", "type": "choice", "help": "x"}}},
     r"option 'k': 'choices' go with type 'choice'"),
    ({**ENTRY, "methods": {"replay": {"kwargs": {}}}}, r"methods.replay: expected a mapping with 'method"),
])
def test_a_bad_declaration_is_refused_naming_the_field(entry, match):
    with pytest.raises(ValueError, match=f"register_kind: controller kind 'bad': {match}"):
        register_kind("bad", entry)
    assert "bad" not in controller_kinds()


def test_declared_option_defaults_are_the_trainers_own():
    """The help shows each option's default from the declaration; it must be what the trainer does by default."""
    from train.imitation import MLPSettings

    for name, kind in controller_kinds().items():
        if kind.trainer is None:
            continue
        trainer = inspect.signature(resolve(kind.trainer)).parameters
        for option in kind.options:
            default = trainer[option.dest].default if option.dest in trainer else \
                MLPSettings.__dataclass_fields__[option.dest].default  # train_mlp's settings (**settings)
            assert option.default == default, (name, option.flag)


def test_every_declared_method_and_loader_resolves():
    for kind in controller_kinds().values():
        if kind.loader is not None:
            assert callable(resolve(kind.loader))
        for env in kind.methods:
            method = kind.method(env)
            assert callable(method.fit) and method.grid(), (kind.name, env)
