"""A CoBa sweep point whose n_max exceeds the pool's N is not run (it would repeat the point at n_max = N):
it is listed as not applicable with the reason, like best-of-16 on an N = 8 pool."""

from __future__ import annotations

from train.sweep import COBA_GRID, run_sweep


def test_coba_points_above_the_pools_n_are_listed_not_run(tmp_path):
    table, summary = run_sweep("tiny", ["coba"], out_dir=tmp_path / "sweep", progress=False)
    # The tiny pool stores N = 8 candidates per episode (docs/SIMULATOR.md); the grid's n_max = 16 points exceed it.
    above = {f"coba_n{n}_k{k}" for n, k in COBA_GRID if n > 8}
    assert above == {"coba_n16_k4", "coba_n16_k8"}
    for name in above:
        assert "is above the pool's N=8; it would run as n_max=8 and repeat that point" in summary["not_applicable"][name]
    ran = set(table["policy"] if "policy" in table else table.index)
    assert not (ran & above)
    assert {f"coba_n{n}_k{k}" for n, k in COBA_GRID if n <= 8} <= ran
