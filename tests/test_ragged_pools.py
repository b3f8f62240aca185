"""A pool whose episodes hold different numbers of candidates (N is the most): masks, observations and outcomes
worked by hand on a three-episode pool, in both groupings, through the single env and the vector env.

The pool (``tests.factory``; every candidate 100 prompt + 1000 output tokens, g1 1B and g2 2B parameters):
item A (gold 4): g1 answers 3, 4, 4 (three candidates), g2 answers 4 (one); item B (gold 7): g1 answers 7 (one),
no g2. So N = 3, and the (item, generator) counts are A: g1 3, g2 1 and B: g1 1, g2 none.
"""

from __future__ import annotations

import numpy as np
import pytest

from coba_env import CoBaEnv, compile_pool
from coba_env.rules.config import EnvConfig
from coba_env.vector_env import CoBaVectorEnv
from eval.runner import replay_policy
from pools.validate import validate_pool
from tests.factory import Cand, Ep, build_pool

MODELS = {"g1": 1.0, "g2": 2.0, "J1": 2.0}
SAMPLE, VERIFY_V1, STOP = 0, 1, 4  # the replay layout: SAMPLE, VERIFY_V1..V3, STOP


@pytest.fixture(scope="module")
def ragged():
    """The compiled three-episode pool: (A, g1) 3 candidates, (A, g2) 1, (B, g1) 1."""
    a_g1 = [Cand("3", scores={"V1": 0.1}), Cand("4", True, scores={"V1": 0.9}), Cand("4", True, scores={"V1": 0.8})]
    pool = build_pool([Ep(a_g1, item_id="A", generator="g1", gold="4"),
                       Ep([Cand("4", True, scores={"V1": 0.7})], item_id="A", generator="g2", gold="4"),
                       Ep([Cand("7", True, scores={"V1": 0.6})], item_id="B", generator="g1", gold="7")],
                      models=MODELS)
    validate_pool(pool)  # valid: N = 3 is the most, the others hold 0..0
    return compile_pool(pool)


def test_the_compiled_pool_keeps_n_as_the_most_and_each_episodes_count(ragged):
    assert ragged.n_candidates == 3 and ragged.n_available.tolist() == [3, 1, 1] and ragged.ragged
    # The default budget is the mean cost of what best-of-3 draws: (3 x 1100 + 2200 + 1100) / 3 p_tokens.
    assert EnvConfig.build(ragged).budget == pytest.approx((3 * 1100 + 2200 + 1100) / 3)


def test_pair_sample_is_illegal_once_a_short_episodes_candidates_are_revealed(ragged):
    env = CoBaEnv(ragged)
    _, info = env.reset(options={"episode": 1})
    assert info["action_mask"].tolist() == [1, 0, 0, 0, 0]
    obs, _, _, _, info = env.step(SAMPLE)
    assert info["action_mask"].tolist() == [0, 1, 0, 0, 1]  # its one candidate is out: VERIFY or STOP
    assert obs[env.feature_names.index("revealed_frac")] == pytest.approx(1 / 3)  # 1 of N_max = 3
    with pytest.raises(ValueError, match=r"action 0 \(SAMPLE\) is not allowed now: the episode's 1 candidates are "
                                         r"all revealed \(it holds fewer than N_max=3\)"):
        env.step(SAMPLE)
    env.reset(options={"episode": 0})
    masks = [env.step(SAMPLE)[4]["action_mask"].tolist() for _ in range(3)]
    assert [m[SAMPLE] for m in masks] == [1, 1, 0]  # the full episode: SAMPLE until its three


def test_the_vector_env_masks_as_the_single_env(ragged):
    venv = CoBaVectorEnv(3, ragged)
    _, info = venv.reset(options={"episodes": [0, 1, 2]})
    assert info["action_mask"][:, SAMPLE].tolist() == [1, 1, 1]
    _, _, _, _, info = venv.step(np.array([SAMPLE] * 3))
    assert info["action_mask"].tolist() == [[1, 1, 0, 0, 1], [0, 1, 0, 0, 1], [0, 1, 0, 0, 1]]
    with pytest.raises(ValueError, match=r"sub-env 1: action 0 is not allowed now"):
        venv.step(np.array([SAMPLE] * 3))


def test_route_sample_of_a_generator_ends_with_its_candidates_for_the_item(ragged):
    env = CoBaEnv(ragged, grouping="item")
    assert env.config.sample_caps.tolist() == [[3, 1], [1, 0]]  # A: g1 3, g2 1; B: g1 1, no g2
    remaining = [env.feature_names.index(f"remaining_{g}") for g in ("g1", "g2")]
    obs, info = env.reset(options={"episode": 0})
    assert info["action_mask"].tolist() == [1, 1, 0, 0, 0, 0]
    assert obs[remaining].tolist() == [1.0, pytest.approx(1 / 3)]  # 3 of 3 and 1 of 3 left
    obs, _, _, _, info = env.step(1)  # SAMPLE_g2: its one candidate
    assert info["action_mask"].tolist() == [1, 0, 1, 0, 0, 1] and obs[remaining].tolist() == [1.0, 0.0]
    obs, info = env.reset(options={"episode": 1})
    assert info["action_mask"].tolist() == [1, 0, 0, 0, 0, 0] and obs[remaining[0]] == pytest.approx(1 / 3)
    _, _, _, _, info = env.step(0)
    assert info["action_mask"].tolist() == [0, 0, 1, 0, 0, 1]
    with pytest.raises(ValueError, match=r"SAMPLE_g1\) is not allowed now: generator g1 has no candidate left"):
        env.step(0)
    venv = CoBaVectorEnv(2, ragged, grouping="item")
    _, info = venv.reset(options={"episodes": [0, 1]})
    _, _, _, _, info = venv.step(np.array([1, 0]))
    assert info["action_mask"].tolist() == [[1, 0, 1, 0, 0, 1], [0, 0, 1, 0, 0, 1]]


@pytest.mark.parametrize(("n", "n_samples", "correct"), [
    (3, [3, 1, 1], [True, True, True]),  # A/g1 votes 3, 4, 4: 4 wins
    (2, [2, 1, 1], [False, True, True]),  # A/g1 ties 3 and 4: the first seen, 3, wins
])
@pytest.mark.parametrize("replay", ["batched", "single"])
def test_best_of_n_takes_what_a_short_episode_holds(ragged, n, n_samples, correct, replay):
    from agents.registry import make_policy

    run = replay_policy(make_policy("bon2_majority", n=n), ragged, replay=replay)
    assert run.applicable
    assert run.records["n_samples"].tolist() == n_samples and run.records["correct"].tolist() == correct
    # Each sample charged its own candidate's cost (1100 p_tokens at g1, 2200 at g2): never a padded slot's 0.
    assert run.records["p_tokens"].tolist() == pytest.approx([n_samples[0] * 1100, 2200, 1100])


@pytest.mark.parametrize("grouping", ["pair", "item"])
def test_random_legal_walks_stay_inside_the_spaces_and_the_counts(ragged, grouping):
    rng = np.random.default_rng(0)
    env = CoBaEnv(ragged, grouping=grouping, order="random")
    caps = env.config.sample_caps
    caps = caps.reshape(len(caps), -1).sum(axis=1)  # an episode's candidates (over its generators with items)
    obs, info = env.reset(seed=0)
    for _ in range(300):
        assert env.observation_space.contains(obs)
        obs, _, done, _, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        assert env.evidence.n_revealed <= caps[env.episode_index]  # never a padded slot
        if done:
            obs, info = env.reset()
    venv = CoBaVectorEnv(4, ragged, grouping=grouping, order="random")
    obs, info = venv.reset(seed=0)
    for _ in range(300):
        assert venv.observation_space.contains(obs)
        mask = info["action_mask"]
        obs, _, _, _, info = venv.step(np.array([rng.choice(np.flatnonzero(m)) for m in mask]))
        assert (venv.n <= caps[venv.ep]).all()


@pytest.mark.parametrize("grouping", ["pair", "item"])
@pytest.mark.parametrize("lam", [0.0, 1.0])
def test_the_cost_aware_oracle_plans_within_each_episodes_own_candidates(ragged, grouping, lam):
    """The oracle reads the env's caps: its plans replay legally, to the value it claims."""
    from train.cost_aware_oracle import CostAwareOracle

    env = CoBaEnv(ragged, grouping=grouping, lam=lam)
    oracle = CostAwareOracle.for_env(env)
    for e in range(env.n_episodes):
        plan = oracle.plan(e, lam)
        env.reset(options={"episode": e, "lam": lam})
        total = sum(env.step(a)[1] for a in plan.actions)  # an illegal action raises ValueError
        assert plan.exact and total == pytest.approx(plan.value, abs=1e-9)
    if grouping == "pair":  # (A, g2) and (B, g1) hold one correct candidate: SAMPLE it, STOP
        assert [oracle.plan(e, lam).actions for e in (1, 2)] == [[SAMPLE, STOP]] * 2
    # The env's rule, not N_max: no second SAMPLE of (A, g2)'s one candidate (pair episode 1; item A's SAMPLE_g2).
    episode, sample = (1, SAMPLE) if grouping == "pair" else (0, 1)
    with pytest.raises(ValueError, match="not allowed"):
        oracle.start_state(episode, [sample, sample])


def test_use_pool_takes_the_new_pools_own_counts(ragged):
    env = CoBaEnv(ragged.select(np.array([0])))  # (A, g1) alone: three candidates
    env.use_pool(ragged)
    env.reset(options={"episode": 2})  # (B, g1): one candidate
    assert env.step(SAMPLE)[4]["action_mask"][SAMPLE] == 0


def test_a_live_replay_source_refuses_short_episodes(ragged):
    """A live source can always draw N_max; replaying short episodes through one would reveal padding."""
    from coba_env.live_sources import PoolReplaySource
    from coba_env.route_pool import compile_route_pool

    with pytest.raises(ValueError, match="some episodes hold fewer than N candidates"):
        PoolReplaySource(ragged)
    with pytest.raises(ValueError, match="or hold fewer than N of them"):
        PoolReplaySource(compile_route_pool(ragged))


class _BestOf2:
    """A stub with what the note reads: a name, the n it is defined by, the SAMPLE it draws from."""

    name = "bon2"

    def __init__(self, sample_id: int) -> None:
        self.sample_id = sample_id

    def wanted_candidates(self) -> int:
        return 2


NOTE = "note: bon2: {} of {} episodes had fewer than 2 candidates; it used what they had"


@pytest.mark.parametrize(("caps", "sample_id", "expected"), [
    ([[1, 3]], 0, [NOTE.format(1, 1)]),  # its generator (0) holds 1: short, although the item holds 4
    ([[3, 1]], 0, []),  # its generator holds 3; the other generator's 1 is not its concern
    ([[3, 1]], 1, [NOTE.format(1, 1)]),
    ([1, 3, 2], 0, [NOTE.format(1, 3)]),  # pairs: each episode's own count
])
def test_the_short_episode_note_counts_the_generator_the_policy_samples(caps, sample_id, expected):
    from types import SimpleNamespace

    from eval.short_episodes import short_episode_notes

    run = SimpleNamespace(runs=[SimpleNamespace(name="bon2", applicable=True)])
    assert short_episode_notes([_BestOf2(sample_id)], run, np.array(caps)) == expected
