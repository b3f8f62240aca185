"""PPO routing controller: masked PPO on the CoBa vector env, lambda-conditioned, saved as a MaskablePPO zip.

One model traces a whole accuracy-cost frontier: every episode draws its cost weight lambda uniformly from
``lambda_range`` and sees it in observation index 19, so at evaluation the same weights act for any fixed
lambda (``agents.learned_ppo.load(path, lam=0.3)``). The script reads top to bottom like CleanRL's:
arguments and seeding, the vectorized environment, the model, the training monitor (progress bar,
TensorBoard scalars, checkpoints), ``learn()``, and the checkpoint directory.

Example::

    from train.ppo import train_ppo
    ckpt = train_ppo("tiny", "runs/ppo-tiny", total_timesteps=20_000, n_envs=64, seed=0)
    # tensorboard --logdir runs/ppo-tiny/tb

The route env (``grouping="item"``): the same trainer on the item-grouped vector env (one episode per problem,
one SAMPLE action per generator), warm-started from the route arena's reference, the consistency cascade;
``train/ppo_method.py`` runs either under the learning protocol, ``agents.learned_ppo`` acts with the checkpoint.

The checkpoint directory holds ``controller.json`` (kind "ppo", lambda range, cost model, budget, seed, training
episodes and datasets, the env and its generators, the warm start's teacher, timesteps, hyperparameters, timing), ``model.zip`` (the SB3 model), ``checkpoints/step_*.zip``
(periodic snapshots) and ``tb/`` (TensorBoard logs: SB3's losses and episode returns, plus
``time/steps_per_second``, ``time/env_share``, ``rollout/accuracy``, ``rollout/cost_over_budget`` and
``rollout/action_share/<ACTION>``, the action mix, so a collapse to STOP is visible while training).

Why lambda in [0, 0.5] (the default ``lambda_range``). The paper's reward is ``1[correct] - lambda * C / B`` with
B the mean cost of drawing N_max candidates (``coba_env.env.default_budget``), so ``C / B = 1`` means "spent
like best-of-N_max" and one more sample costs about ``lambda / N_max``. A policy that moves from one point of
the fixed policies' frontier to the next is worth it when the accuracy gained exceeds ``lambda * (extra C) / B``,
so the break-even lambda of each step of the frontier is its slope in B units. On the simulated paper pool
(``coba bench``, B = 1.06M p_tokens): greedy (75.7%, 0.09 B) -> overthinking stop (83.6%,
0.31 B): lambda ~ 0.36; -> k-stable stop (strict leader) / CoBa-Strong (85.3-85.4%, 0.48-0.72 B): lambda ~ 0.1 to 0.05;
-> best-of-16 (85.1%, 1.45 B): no gain, lambda ~ 0. Every step of the frontier thus lies in [0, 0.4]; above
0.5 the optimum is greedy (a sample there must buy 3% accuracy) and episodes drawn there teach nothing new,
so [0, 0.5] covers the whole frontier, both ends included, without spending half the samples on the greedy
corner as [0, 1] would.

Why these PPO hyperparameters (``DEFAULT_PPO_KWARGS``), for 5 masked actions and 21 features in [0, 1]:

- ``gamma=1.0``: the objective is the undiscounted episode return and episodes are short and bounded
  (at most N_max * 4 + 1 actions), so discounting would only bias the policy towards stopping early.
- ``gae_lambda=0.95``: the one reward that matters comes at STOP; 0.95 keeps most of it in the advantage of
  early actions while cutting variance.
- rollouts of ~16k transitions (``n_envs=1024`` x ``n_steps=16``; with fewer envs ``n_steps`` grows): ~2,000
  finished episodes per update over many lambdas, enough for the small per-sample cost differences (0.006 reward
  at lambda = 0.1) to show in the advantages; 1024 sub-envs also amortize the vector env's per-step overhead
  (``scripts/bench_ppo_env_share.py``: the env 3.4% of the wall time at 1024 sub-envs, 11-16% at 64).
- ``learning_rate=3e-4``, ``clip_range=0.2``, ``max_grad_norm=0.5``: the standard PPO settings (Schulman et
  al.; CleanRL). The trainer (``trainer``): "lean" (the default, ``train/masked_ppo.py``: the hand-written
  update, 5 epochs of 1,024; ~6x faster) or "sb3" (``MaskablePPO.learn``, SB3's 10 epochs of 1,024, the old
  path); both build an sb3-contrib policy and save the same kind of checkpoint (docs/PERFORMANCE.md, "Wave 6").
- ``ent_coef=0.0`` (SB3's default). An earlier 0.03, chosen against the collapse to greedy by runs over all
  five datasets of the paper pool (so also on every later held-out one), is withdrawn (issue 19); the remedy
  against the collapse is now the warm start (next point), which needs no coefficient picked on data.
- warm start (``warm_start=True``, the default; ``train/ppo_warm_start.py``): before PPO, the actor is fitted
  by behaviour cloning to CoBa-Routed-Strong's actions on the training episodes and the critic to Strong's
  returns-to-go there. Strong is label-free, so this is legitimate on any split, and PPO starts from a
  policy that already samples and verifies where Strong does.
- episode order ``"balanced"`` (the default here; ``train/sb3_vec_env.py``): each training dataset is drawn
  equally often, because the reported objective is the macro accuracy (mean over datasets); with
  ``"shuffle"`` MATH-500 would be 83% of a leave-rgym_hard-out fold's episodes.
- separate tanh policy and value networks (``TRAINER_DEFAULTS``' ``policy_kwargs``): 64x64 for the lean trainer
  (SB3's default width; its returns inside the old trainer's ten-seed spread), 128x128 for the sb3 trainer.

Reproducibility: ``seed`` seeds Python, numpy, torch, the action space and the vector env's episode order and
lambda draws on ``device="cpu"``: the same seed gives bit-identical weights. Threads (``torch_threads``): the lean
trainer runs the actor's and the critic's halves of a step on up to 2 threads of one torch thread each (the same
weights as one); sb3 1 torch thread (OpenMP's spin-waiting threads made 2 ~13x slower on 2 busy cores).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sb3_contrib import MaskablePPO

from agents.checkpoint import CONFIG_FILE, trained_env_fields
from coba_env.compiled import as_compiled
from coba_env.costs import COST_MEASURES
from coba_env.featurizer_files import save_featurizer
from coba_env.featurizers import fit_featurizer
from coba_env.problems import problems_of
from coba_env.rules.config import episode_subset
from coba_env.vector_env import CoBaVectorEnv
from pools.atomic_write import atomic_write, atomic_write_text
from pools.store import Pool
from pools.strict_json import strict_dumps
from train.masked_ppo import LEAN_NET_ARCH, LEAN_SETTINGS, PPOSettings, default_threads, learn
from train.ppo_warm_start import DEMO_PASSES, batched_demonstrations, clone_into, teacher_policy
from train.protocol_arena import arena_of
from train.sb3_vec_env import BALANCED, CoBaSB3VecEnv
from train.training_log import TrainingMonitor, run_logger

FORMAT_VERSION = 1
MODEL_FILE = "model.zip"
CHECKPOINT_DIR = "checkpoints"
TENSORBOARD_DIR = "tb"

#: Range lambda is drawn from per episode (see the module docstring for why).
DEFAULT_LAMBDA_RANGE: tuple[float, float] = (0.0, 0.5)
#: Transitions per rollout aimed at when ``n_steps`` is not given (``n_steps = ceil(this / n_envs)``, >= 16).
ROLLOUT_TRANSITIONS = 16_384
#: PPO coefficients used unless overridden (the module docstring says why); each trainer's own: TRAINER_DEFAULTS.
DEFAULT_PPO_KWARGS: dict[str, Any] = {
    "learning_rate": 3e-4,
    "gamma": 1.0,
    "gae_lambda": 0.95,
    "clip_range": 0.2,
    "ent_coef": 0.0,
    "vf_coef": 0.5,
    "max_grad_norm": 0.5,
}
#: The trainers: "lean" (``train.masked_ppo``, the default) or "sb3" (sb3-contrib's ``MaskablePPO.learn``), and
#: the minibatch size, epochs, update and network of each (the lean trainer's: ``train.masked_ppo.LEAN_SETTINGS``).
TRAINERS = ("lean", "sb3")
TRAINER_DEFAULTS: dict[str, dict[str, Any]] = {
    "lean": {"batch_size": LEAN_SETTINGS.batch_size, "n_epochs": LEAN_SETTINGS.n_epochs, "update": LEAN_SETTINGS.update,
             "policy_kwargs": {"net_arch": {"pi": [*LEAN_NET_ARCH], "vf": [*LEAN_NET_ARCH]}, "activation_fn": torch.nn.Tanh}},
    "sb3": {"batch_size": 1024, "n_epochs": 10,
            "policy_kwargs": {"net_arch": {"pi": [128, 128], "vf": [128, 128]}, "activation_fn": torch.nn.Tanh}},
}
LEAN_ONLY = ("update", "matmul_dtype")  #: lean-trainer coefficients MaskablePPO does not take (PPOSettings)
#: Trainer options accepted in ``**ppo_kwargs`` (everything else is a PPO coefficient).
TRAINER_OPTIONS = ("checkpoint_every", "torch_threads", "env_kwargs", "budget", "tensorboard", "order",
                   "warm_start", "trainer")
#: Episode order of training unless ``order`` is given: each dataset drawn equally often.
DEFAULT_ORDER = BALANCED
#: Rows of the vector env the warm start's teacher plays in (``train.ppo_warm_start.batched_demonstrations``).
WARM_START_ROWS = 4096


def train_ppo(pool: Any, out_dir: str | os.PathLike[str], *, grouping: str = "pair",
              episode_ids: Sequence[int] | None = None, datasets: Sequence[str] | None = None,
              lambdas: Sequence[float] | None = None, lambda_range: tuple[float, float] = DEFAULT_LAMBDA_RANGE,
              cost_model: str = "p_tokens", total_timesteps: int = 200_000, n_envs: int = 1024, seed: int = 0,
              progress: bool = True, problem_features: str | None = None, **ppo_kwargs: Any) -> Path:
    """Train a lambda-conditioned MaskablePPO controller on ``pool``; return its checkpoint directory.

    ``pool`` is anything ``CoBaEnv`` accepts (a Pool, CompiledPool, pool directory, profile name such as "paper"
    or "tiny", or None for the default pool); ``grouping`` the env's ("pair": the replay env; "item": the route
    env, one episode per problem and a SAMPLE per generator, ``env_kwargs["n_max"]`` then per generator);
    ``episode_ids`` / ``datasets`` restrict the training episodes (replay-pool episode ids: the route episodes
    are the problems they cover). ``lambdas`` (the training lambdas) sets ``lambda_range`` to their min and max.
    ``ppo_kwargs`` override ``DEFAULT_PPO_KWARGS`` (e.g. ``n_steps``, ``batch_size``, ``learning_rate``) and take
    the trainer options ``checkpoint_every`` (timesteps between snapshots; default a fifth of the run),
    ``torch_threads`` (lean: 2 where 2 cores are free to it; sb3: 1), ``budget`` (B in the reward; default: the
    training episodes' own ``default_budget``), ``env_kwargs`` (more ``CoBaEnv`` arguments, e.g. ``n_max``, ``selection``),
    ``tensorboard`` (default True), ``order`` (episode order, default "balanced": each dataset equally often;
    or the env's "shuffle", "random", "sequential"), ``warm_start`` (default True: clone the env's reference
    first, ``train.protocol_arena``) and ``trainer`` ("lean", the default, or "sb3": ``TRAINERS``).
    ``problem_features``: sources of problem features (``coba_env.featurizers``, e.g. "meta"), fitted on the
    training episodes' items only and saved with the checkpoint; None: none. Training into a directory that
    holds an earlier run replaces its model,
    snapshots and controller.json (TensorBoard runs accumulate).
    """
    # ---- 0. arguments and the training episodes ---------------------------------------------------
    run = PPORun.parse(lambdas, lambda_range, cost_model, total_timesteps, n_envs, progress, ppo_kwargs)
    out = Path(out_dir)
    train_pool = episode_subset(as_compiled(pool), datasets, None, episode_ids)
    featurizer = None if problem_features is None else \
        fit_featurizer(problems_of(train_pool), problem_features, seed=seed)  # training items only

    # ---- 1. seeding and threads (reproducibility) --------------------------------------------------
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(1 if run.trainer == "lean" else run.threads)  # the lean trainer's threads: learn()'s
    try:
        # ---- 2. vectorized environment: lambda drawn per episode and observed ---------------------
        env = CoBaSB3VecEnv(run.n_envs, train_pool, grouping=grouping, lambda_range=run.lambda_range,
                            cost_model=cost_model, order=run.order, problem_features=featurizer, **run.env_kwargs)

        # ---- 3. the model (a rerun into the same directory replaces its snapshots and model), warm start
        out.mkdir(parents=True, exist_ok=True)
        for stale in [out / MODEL_FILE, *(out / CHECKPOINT_DIR).glob("step_*.zip")]:
            stale.unlink(missing_ok=True)
        tb_dir = str(out / TENSORBOARD_DIR) if run.tensorboard else None
        model = MaskablePPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0,
                            tensorboard_log=tb_dir if run.trainer == "sb3" else None,
                            **{k: v for k, v in run.hyper.items() if k not in LEAN_ONLY})
        teacher = arena_of(grouping).reference if run.warm_start else None
        warm = _warm_start(model, env, teacher, seed) if teacher is not None else None

        # ---- 4. controller.json first (snapshots are loadable while training runs), then the monitor --
        meta = _controller_json(run, env, pool, train_pool, seed, given=episode_ids is not None,
                                datasets=datasets, warm=warm, teacher=teacher)
        _write_json(out / CONFIG_FILE, meta)
        if featurizer is not None:  # beside controller.json: a snapshot loads with it while training runs
            save_featurizer(featurizer, out)

        # ---- 5. learn -----------------------------------------------------------------------------
        if run.trainer == "lean":
            training = _learn_lean(model, env, run, out, seed, progress)
        else:
            training = _learn_sb3(model, env, run, out, progress)

        # ---- 6. the final model and its controller.json -------------------------------------------
        atomic_write(out / MODEL_FILE, model.save)
        meta.update(complete=True, timesteps=int(model.num_timesteps), training=training,
                    checkpoints=sorted(p.name for p in (out / CHECKPOINT_DIR).glob("step_*.zip")))
        _write_json(out / CONFIG_FILE, meta)
        return out
    finally:
        torch.set_num_threads(previous_threads)


@dataclass(frozen=True)
class PPORun:
    """``train_ppo``'s checked arguments: PPO's hyperparameters and the trainer's options."""

    lambda_range: tuple[float, float]
    total_timesteps: int
    n_envs: int
    hyper: dict[str, Any]
    timesteps_run: int  # whole rollouts: the first multiple of n_envs x n_steps at or above total_timesteps
    env_kwargs: dict[str, Any]
    checkpoint_every: int
    threads: int
    tensorboard: bool
    order: str
    warm_start: bool
    trainer: str = "lean"

    @classmethod
    def parse(cls, lambdas: Sequence[float] | None, lambda_range: tuple[float, float], cost_model: str,
              total_timesteps: int, n_envs: int, progress: bool, ppo_kwargs: dict[str, Any]) -> PPORun:
        """Check the arguments (ValueError naming the bad one); split trainer options from PPO's."""
        options = {k: ppo_kwargs.pop(k) for k in TRAINER_OPTIONS if k in ppo_kwargs}
        if lambdas is not None:
            values = [float(v) for v in lambdas]
            if not values:
                raise ValueError("lambdas must name at least one lambda")
            lambda_range = (min(values), max(values))
        low, high = (float(v) for v in lambda_range)
        if not 0.0 <= low <= high:
            raise ValueError(f"lambda_range must be (low, high) with 0 <= low <= high, got {lambda_range}")
        if cost_model not in COST_MEASURES:
            raise ValueError(f"unknown cost model {cost_model!r}; expected one of {list(COST_MEASURES)}")
        if int(total_timesteps) < 1:
            raise ValueError(f"total_timesteps must be >= 1, got {total_timesteps}")
        if int(n_envs) < 1:
            raise ValueError(f"n_envs must be >= 1, got {n_envs}")
        n_envs, total_timesteps = int(n_envs), int(total_timesteps)
        trainer = options.get("trainer", "lean")
        if trainer not in TRAINERS:
            raise ValueError(f"unknown trainer {trainer!r}; expected one of {list(TRAINERS)}")
        if trainer == "sb3" and set(LEAN_ONLY) & set(ppo_kwargs):
            raise ValueError(f"{sorted(set(LEAN_ONLY) & set(ppo_kwargs))} are lean-trainer settings; the sb3 trainer does not take them")
        hyper = {**DEFAULT_PPO_KWARGS, **TRAINER_DEFAULTS[trainer], **ppo_kwargs}
        # A short run gets a shorter rollout, so that e.g. 4,096 timesteps on 1,024 envs run 4 steps each, not one
        # default rollout of 16,384 transitions.
        hyper.setdefault("n_steps", max(1, min(max(16, math.ceil(ROLLOUT_TRANSITIONS / n_envs)),
                                               math.ceil(total_timesteps / n_envs))))
        hyper["batch_size"] = min(int(hyper["batch_size"]), n_envs * int(hyper["n_steps"]))
        # PPO collects whole rollouts (n_envs x n_steps transitions): the run ends at the first multiple of the
        # rollout at or above total_timesteps. Say so when that is not the number asked for.
        rollout = n_envs * int(hyper["n_steps"])
        timesteps_run = math.ceil(total_timesteps / rollout) * rollout
        if timesteps_run != total_timesteps and progress:
            print(f"ppo: {total_timesteps} timesteps asked; PPO collects whole rollouts of {n_envs} envs x "
                  f"{hyper['n_steps']} steps = {rollout} transitions, so it runs {timesteps_run}", file=sys.stderr)
        env_kwargs = dict(options.get("env_kwargs") or {})
        if options.get("budget") is not None:
            env_kwargs["budget"] = float(options["budget"])
        run = cls(lambda_range=(low, high), total_timesteps=total_timesteps, n_envs=n_envs, hyper=hyper,
                  timesteps_run=timesteps_run, env_kwargs=env_kwargs,
                  checkpoint_every=int(options.get("checkpoint_every") or max(1, total_timesteps // 5)),
                  threads=int(options.get("torch_threads", default_threads() if trainer == "lean" else 1)),
                  tensorboard=bool(options.get("tensorboard", True)),
                  order=options.get("order", DEFAULT_ORDER), warm_start=bool(options.get("warm_start", True)),
                  trainer=trainer)
        if trainer == "lean":
            run.settings()  # a coefficient the lean trainer does not take fails here, before any work
        return run

    def settings(self) -> PPOSettings:
        """The lean trainer's coefficients (``train.masked_ppo.PPOSettings``) from ``hyper``."""
        names = [f.name for f in dataclasses.fields(PPOSettings)]
        unknown = sorted(k for k in self.hyper if k not in names and k != "policy_kwargs")
        if unknown:
            raise ValueError(f"the lean PPO trainer does not take {unknown}; it takes {names} (or trainer='sb3')")
        return PPOSettings(**{k: v for k, v in self.hyper.items() if k in names})


def _learn_lean(model: Any, env: CoBaSB3VecEnv, run: PPORun, out: Path, seed: int, progress: bool) -> dict[str, Any]:
    """``train.masked_ppo.learn`` on the model's policy over the env's vector env; snapshots as SB3 zips."""
    logger = run_logger(out, "ppo") if run.tensorboard else None
    next_snapshot = [run.checkpoint_every]

    def snapshot(steps: int) -> None:
        model.num_timesteps = steps
        if steps >= next_snapshot[0] and steps < run.timesteps_run:
            atomic_write(out / CHECKPOINT_DIR / f"step_{steps:010d}.zip", model.save)
            while next_snapshot[0] <= steps:
                next_snapshot[0] += run.checkpoint_every

    (out / CHECKPOINT_DIR).mkdir(parents=True, exist_ok=True)
    restart = env.balanced.restart if env.balanced is not None else None
    try:
        figures = learn(model.policy, env.venv, run.settings(), run.total_timesteps, seed=seed, logger=logger,
                        on_update=snapshot, progress=progress, restart_order=restart, threads=run.threads)
    finally:
        if logger is not None:
            logger.close()
    return _timing(figures, run.threads, "lean")


def _learn_sb3(model: Any, env: CoBaSB3VecEnv, run: PPORun, out: Path, progress: bool) -> dict[str, Any]:
    """sb3-contrib's ``MaskablePPO.learn`` with the training monitor (progress bar, scalars, snapshots)."""
    monitor = TrainingMonitor(out / CHECKPOINT_DIR, run.checkpoint_every, run.timesteps_run, progress=progress)
    start, cpu_start = time.perf_counter(), time.process_time()
    model.learn(run.total_timesteps, callback=monitor, tb_log_name="ppo", progress_bar=False)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    figures = {"steps_per_second": model.num_timesteps / seconds if seconds > 0 else 0.0, "seconds": seconds,
               "cpu_seconds": cpu_seconds, "env_seconds": env.env_seconds, "env_share": env.env_share(seconds),
               "env_cpu_seconds": env.env_cpu_seconds, "env_cpu_share": env.env_cpu_share(cpu_seconds)}
    return _timing(figures, run.threads, "sb3")


def _warm_start(model: Any, env: CoBaSB3VecEnv, teacher: str, seed: int) -> dict[str, Any]:
    """Clone ``teacher`` (a registry name) into ``model``, replayed batched in a vector env of the run's own
    configuration (budget, lambda range, selection, grouping), taking the training episodes in order."""
    config = dataclasses.replace(env.venv.config, order="sequential")
    rows = min(WARM_START_ROWS, config.pool.n_episodes * DEMO_PASSES)
    start = time.perf_counter()  # the warm start's wall seconds (where a fit's time goes) go in controller.json
    demos = batched_demonstrations(CoBaVectorEnv(rows, config=config), teacher=teacher_policy(teacher), seed=seed)
    return {**clone_into(model, demos, seed=seed), "seconds": round(time.perf_counter() - start, 3)}


def _controller_json(run: PPORun, env: CoBaSB3VecEnv, pool: Any, train_pool: Any, seed: int, *, given: bool,
                     datasets: Sequence[str] | None, warm: dict[str, Any] | None,
                     teacher: str | None) -> dict[str, Any]:
    """controller.json before training: how the model is trained, on which env and which episodes (read from the
    vector env's configuration: a one-episode env would build per-episode rows the run never reads)."""
    config = env.venv.config
    return {
        "kind": "ppo", "format_version": FORMAT_VERSION, "model": MODEL_FILE, "complete": False,
        "lambda_range": list(run.lambda_range), "cost_model": config.cost_model, "budget": config.budget,
        "n_max": config.n_max, "tiers": list(config.pool.tiers), "enabled_tiers": list(config.enabled_tiers),
        "selection": dataclasses.asdict(config.selection), "seed": int(seed), "timesteps": 0,
        "total_timesteps": run.total_timesteps, "timesteps_planned": run.timesteps_run,
        "pool": _describe_pool(pool), "train_datasets": sorted({str(d) for d in config.pool.dataset}),
        "datasets_filter": list(datasets) if datasets is not None else None,
        "episode_ids": _summarize_ids(train_pool.episode_ids, given=given),
        "observation": list(config.features.observation_names), "actions": list(config.layout.names),
        "n_envs": run.n_envs, "order": env.venv.order, "warm_start": warm, "ppo": _jsonable(run.hyper),
        **trained_env_fields(env.venv),
        "generators": list(dict.fromkeys(str(g) for g in train_pool.generator)), "teacher": teacher,
    }


def _timing(figures: dict[str, float], threads: int, trainer: str) -> dict[str, Any]:
    """The run's wall and CPU time, the environment's share of each, steps per second, threads and trainer."""
    rounded = {key: round(float(figures[key]), 5 if key.endswith("share") else 3)
               for key in ("seconds", "env_seconds", "env_share", "cpu_seconds", "env_cpu_seconds", "env_cpu_share")}
    return {**rounded, "steps_per_second": round(float(figures["steps_per_second"]), 1), "torch_threads": threads,
            "trainer": trainer}


# ---------------------------------------------------------------------------------------------------- helpers
def _write_json(path: Path, data: dict[str, Any]) -> None:
    atomic_write_text(path, strict_dumps(data, indent=2) + "\n")


def _describe_pool(pool: Any) -> str:
    if pool is None:
        return "paper"
    if isinstance(pool, str | os.PathLike):
        return os.fspath(pool)
    if isinstance(pool, Pool):
        return str(pool.manifest.get("name", "<Pool>")) if isinstance(getattr(pool, "manifest", None), dict) \
            else "<Pool>"
    return f"<{type(pool).__name__}>"


def _summarize_ids(ids: np.ndarray, *, given: bool) -> dict[str, Any]:
    ordered = np.sort(np.asarray(ids, dtype=np.int64))
    digest = hashlib.sha256(",".join(map(str, ordered.tolist())).encode()).hexdigest()[:16]
    return {"count": int(len(ordered)), "min": int(ordered[0]), "max": int(ordered[-1]), "sha256": digest,
            "given": given}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    return repr(value)
