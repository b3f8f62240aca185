"""The lean PPO trainer against sb3-contrib's MaskablePPO in one run: training speed and learning quality.

For each pool and env (tiny and paper; replay and route) and each seed, ``train.ppo.train_ppo`` trains once with
``trainer="sb3"`` (the old path, ``MaskablePPO.learn`` at SB3's settings) and once with ``trainer="lean"`` (the
default, ``train.masked_ppo``), at the same seed and step budget, both warm-started as ``coba train ppo`` does.
It prints, per run, the training speed (env-steps per second of ``learn``, wall and process CPU, from
``controller.json``) and the return of the trained policy: the mean episode reward ``1[correct] - lambda C / B`` of
its deterministic actions on every training episode, averaged over the lambdas ``RETURN_LAMBDAS`` (the training
range [0, 0.5]). Then, per pool and env, the old trainer's seed-to-seed spread (min..max over seeds), how many lean
seeds' returns lie inside it, the verdict (quality HELD when the lean trainer's mean return over the seeds lies
inside the old min..max: the rule fixed before the runs of issue 37) and the speed ratio lean / sb3 (medians over
seeds, in this one run).

    python scripts/compare_ppo_trainers.py                          # every pool and env, seeds 0 1 2
    python scripts/compare_ppo_trainers.py --pools paper --envs replay --seeds 0

Budgets (``BUDGETS``): the learning protocol's steps per fit on the paper pool (196,608 replay, 81,920 route,
``train/ppo_method.py``), 65,536 on tiny. Figures and the machine's load go in docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch

from agents.learned_ppo import load
from coba_cli.arg_types import positive_int
from coba_env.env import as_compiled
from eval.forked_runs import ordered_map
from eval.runner import run_policy
from train.ppo import train_ppo

#: Lambdas the return is averaged over (the training range).
RETURN_LAMBDAS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
#: Steps per run by (pool, env).
BUDGETS = {("paper", "replay"): 196_608, ("paper", "route"): 81_920, ("tiny", "replay"): 65_536,
           ("tiny", "route"): 65_536}
GROUPING = {"replay": "pair", "route": "item"}
TRAINERS = ("sb3", "lean")


def policy_return(checkpoint: Path, compiled, grouping: str) -> float:
    """Mean episode reward of the checkpoint's deterministic actions, over every episode and ``RETURN_LAMBDAS``."""
    means = []
    for lam in RETURN_LAMBDAS:
        policy = load(checkpoint, lam=lam)
        records = run_policy(policy, compiled, grouping=grouping, lam=lam)
        means.append(float(records["reward"].mean()))
    return float(np.mean(means))


def train_and_score(cell: tuple[str, str, int, str], compiled: dict, overrides: dict) -> tuple[float, dict]:
    """Train one (pool, env, seed, trainer) cell at its budget; (the trained policy's return, controller.json)."""
    pool_name, env, seed, trainer = cell
    with tempfile.TemporaryDirectory(prefix="coba-ppo-cmp-") as tmp:
        out = train_ppo(compiled[pool_name], Path(tmp) / "run", grouping=GROUPING[env],
                        total_timesteps=BUDGETS.get((pool_name, env), 65_536), seed=seed, progress=False,
                        trainer=trainer, tensorboard=False, **(overrides if trainer == "lean" else {}))
        meta = json.loads((out / "controller.json").read_text())
        return policy_return(out, compiled[pool_name], GROUPING[env]), meta


def main(argv: list[str] | None = None) -> int:
    """Train both trainers per pool, env and seed; print speed, return and the verdicts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", nargs="+", default=["tiny", "paper"])
    parser.add_argument("--envs", nargs="+", default=["replay", "route"], choices=list(GROUPING))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--trainers", nargs="+", default=list(TRAINERS), choices=TRAINERS)
    parser.add_argument("--lean", nargs="*", default=[], metavar="KEY=VALUE",
                        help="override a lean PPO coefficient or option (e.g. n_epochs=4 batch_size=4096, "
                             "torch_threads=1, update=hand, matmul_dtype=bfloat16, net_arch=64x64); default: none")
    parser.add_argument("--jobs", type=positive_int, default=1,
                        help="cells (pool, env, seed, trainer) trained at once in forked processes, each on one "
                             "torch thread: for the returns only (speed figures of processes sharing the cores); "
                             "default: 1")
    args = parser.parse_args(argv)
    overrides = {k: _value(v) for k, v in (item.split("=", 1) for item in args.lean)}
    if "net_arch" in overrides:  # e.g. net_arch=64x64: both networks' hidden layers (tanh, as the default's)
        layers = [int(x) for x in str(overrides.pop("net_arch")).split("x")]
        overrides["policy_kwargs"] = {"net_arch": {"pi": layers, "vf": layers}, "activation_fn": torch.nn.Tanh}
    print(f"command: python scripts/compare_ppo_trainers.py --pools {' '.join(args.pools)} --envs "
          f"{' '.join(args.envs)} --seeds {' '.join(map(str, args.seeds))} --trainers {' '.join(args.trainers)}"
          + (f" --lean {' '.join(args.lean)}" if args.lean else "") + (f" --jobs {args.jobs}" if args.jobs > 1 else ""))
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| pool | env | trainer | threads | seed | steps | steps/s (wall) | steps/CPU-s | env share | return |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    compiled = {name: as_compiled(name) for name in args.pools}  # before any fork: the workers inherit them
    cells = [(pool_name, env, seed, trainer) for pool_name in args.pools for env in args.envs
             for seed in args.seeds for trainer in args.trainers]
    if args.jobs > 1:  # one torch thread a process; the lean trainer's weights do not depend on its threads
        overrides.setdefault("torch_threads", 1)
    results: dict[tuple[str, str, str], list[tuple[float, float, float]]] = {}
    with ordered_map(train_and_score, cells, (compiled, overrides), workers=args.jobs) as rows:
        for (pool_name, env, seed, trainer), (ret, meta) in zip(cells, rows, strict=True):
            t = meta["training"]
            per_cpu = meta["timesteps"] / t["cpu_seconds"]
            results.setdefault((pool_name, env, trainer), []).append((ret, t["steps_per_second"], per_cpu))
            print(f"| {pool_name} | {env} | {trainer} | {t['torch_threads']} | {seed} | "
                  f"{meta['timesteps']:,} | {t['steps_per_second']:,.0f} | {per_cpu:,.0f} | {t['env_share']:.1%} | "
                  f"{ret:.4f} |", flush=True)
    print()
    _verdicts(results, args)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


def _value(text: str) -> int | float | str:
    """An override's value: an int, a float, or else the text (e.g. ``matmul_dtype=bfloat16``)."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def mean_difference(new: list[float], old: list[float]) -> tuple[float, float, float]:
    """Difference of the mean returns (new - old) and its 95% confidence interval (Welch's t; NaN below 2 each)."""
    from scipy import stats

    diff = float(np.mean(new) - np.mean(old))
    if min(len(new), len(old)) < 2 or (np.var(new) == 0 and np.var(old) == 0):
        return diff, float("nan"), float("nan")
    with warnings.catch_warnings():  # one side constant (tiny route's ten equal returns): scipy warns, the CI holds
        warnings.simplefilter("ignore", RuntimeWarning)
        ci = stats.ttest_ind(new, old, equal_var=False).confidence_interval(0.95)
    return diff, float(ci.low), float(ci.high)


def _verdicts(results: dict, args: argparse.Namespace) -> None:
    """Per pool and env: the old spread, whether each lean return is inside it, and the speed ratios."""
    for pool_name in args.pools:
        for env in args.envs:
            old, new = results.get((pool_name, env, "sb3")), results.get((pool_name, env, "lean"))
            if not old or not new:
                continue
            low, high = min(r[0] for r in old), max(r[0] for r in old)
            inside = [low <= r[0] <= high for r in new]
            mean = float(np.mean([r[0] for r in new]))
            held = "HELD" if low <= mean <= high else "NOT HELD"
            wall = np.median([r[1] for r in new]) / np.median([r[1] for r in old])
            cpu = np.median([r[2] for r in new]) / np.median([r[2] for r in old])
            diff, ci_low, ci_high = mean_difference([r[0] for r in new], [r[0] for r in old])
            print(f"{pool_name} {env}: sb3 returns {low:.4f}..{high:.4f} over seeds {args.seeds}; lean "
                  f"{', '.join(f'{r[0]:.4f}' for r in new)} -> {sum(inside)}/{len(inside)} inside the sb3 spread; "
                  f"lean mean {mean:.4f} vs sb3 mean {np.mean([r[0] for r in old]):.4f}; quality {held} (lean mean "
                  f"inside sb3 min..max); lean - sb3 {diff:+.4f} [95% CI {ci_low:+.4f}, {ci_high:+.4f}] (Welch); "
                  f"speed lean / sb3: {wall:.1f}x wall, {cpu:.1f}x CPU")

if __name__ == "__main__":
    sys.exit(main())
