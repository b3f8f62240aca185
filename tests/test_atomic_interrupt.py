"""Ctrl-C at the edges of an atomic write (right after the temporary sibling is created, or while the old
folder is put aside) leaves the previous result or nothing, and no temporary sibling."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pools import atomic_write as aw


def _interrupt_after(real):
    """A stand-in for ``real`` that does the work and then raises KeyboardInterrupt, as a Ctrl-C landing then would."""
    def call(*args, **kwargs):
        real(*args, **kwargs)
        raise KeyboardInterrupt
    return call


@pytest.mark.parametrize("previous", [False, True])
def test_interrupt_right_after_the_temporary_folder_is_made(tmp_path: Path, monkeypatch, previous: bool) -> None:
    dest = tmp_path / "out"
    if previous:
        dest.mkdir()
        (dest / "report.md").write_text("old")
    monkeypatch.setattr(aw.os, "mkdir", _interrupt_after(os.mkdir))
    with pytest.raises(KeyboardInterrupt):
        aw.atomic_dir(dest, lambda tmp: (tmp / "report.md").write_text("new"))
    assert sorted(p.name for p in tmp_path.iterdir()) == (["out"] if previous else [])
    if previous:
        assert (dest / "report.md").read_text() == "old"


def test_interrupt_right_after_the_old_folder_is_put_aside(tmp_path: Path, monkeypatch) -> None:
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "report.md").write_text("old")
    real_rename = os.rename
    calls = []

    def rename(src, dst):
        real_rename(src, dst)
        calls.append((src, dst))
        if len(calls) == 1:  # the first rename moves the previous folder aside
            raise KeyboardInterrupt

    monkeypatch.setattr(aw.os, "rename", rename)
    with pytest.raises(KeyboardInterrupt):
        aw.atomic_dir(dest, lambda tmp: (tmp / "report.md").write_text("new"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert (dest / "report.md").read_text() == "old"


def test_interrupt_right_after_the_temporary_file_is_made(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(aw.os, "close", _interrupt_after(os.close))
    with pytest.raises(KeyboardInterrupt):
        aw.atomic_write_text(tmp_path / "results.json", "{}")
    assert list(tmp_path.iterdir()) == []
