"""The ``ladder`` simulator profile: three generators 48x apart in size, calibrated to published accuracies.

The expected figures are the Qwen2.5-Math technical report's chain-of-thought results (Yang et al. 2024,
arXiv:2409.12122v1): Table 3 (greedy pass@1 and maj@8 on GSM8K and MATH) and Table 5 (greedy on AIME 2024
and AMC 2023, given as solved/total), copied here from the report. A simulated pool's first-sample accuracy
and majority@8 per (dataset, generator) are computed here from its candidates (not with the simulator's or
``pools.inspect``'s code) and must lie within 1.5 points of them; the profile and docs/SIMULATOR.md must
state the same numbers.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pandas as pd
import pytest

from pools.errors import PoolError
from pools.simulate import load_profile, simulate_pool
from pools.simulate.profiles import PROFILE_DIR, validate_profile

SMALL, MID, LARGE = "Qwen2.5-Math-1.5B-Instruct", "Qwen2.5-Math-7B-Instruct", "Qwen2.5-Math-72B-Instruct"
#: (dataset, generator) -> {figure: percent} as published (Table 3: GSM8K, MATH; Table 5: AIME24 x/30, AMC23 x/40).
PUBLISHED = {
    ("gsm8k", SMALL): {"greedy": 84.8, "majority@8": 89.5},
    ("gsm8k", MID): {"greedy": 95.2, "majority@8": 96.7},
    ("gsm8k", LARGE): {"greedy": 95.9, "majority@8": 96.0},
    ("math500", SMALL): {"greedy": 75.8, "majority@8": 80.3},
    ("math500", MID): {"greedy": 83.6, "majority@8": 87.1},
    ("math500", LARGE): {"greedy": 85.9, "majority@8": 88.6},
    ("aime2024", SMALL): {"greedy": 100 * 3 / 30},
    ("aime2024", MID): {"greedy": 100 * 5 / 30},
    ("aime2024", LARGE): {"greedy": 100 * 9 / 30},
    ("amc2023", SMALL): {"greedy": 100 * 24 / 40},
    ("amc2023", MID): {"greedy": 100 * 25 / 40},
    ("amc2023", LARGE): {"greedy": 100 * 28 / 40},
}
TOLERANCE_POINTS = 1.5
DOC = Path(__file__).resolve().parents[1] / "docs" / "SIMULATOR.md"


def figures(pool) -> pd.DataFrame:
    """First-sample accuracy and majority@8 (cluster vote, ties to the first-seen answer) per pair, percent."""
    c = pool.candidates.merge(pool.episodes, on="episode_id")
    c = c[c["candidate"] < 8].sort_values(["episode_id", "candidate"])
    first = c[c["candidate"] == 0].set_index("episode_id")["correct"].astype(bool)
    voting = c[c["cluster"] >= 0]
    votes = voting.groupby(["episode_id", "cluster"]).agg(n=("candidate", "size"), first_seen=("candidate", "min"),
                                                          correct=("correct", "first")).reset_index()
    votes = votes.sort_values(["episode_id", "n", "first_seen"], ascending=[True, False, True])
    winner = votes.drop_duplicates("episode_id").set_index("episode_id")["correct"].astype(bool)
    episodes = pool.episodes.set_index("episode_id")
    out = pd.DataFrame({"greedy": first, "majority@8": winner.reindex(episodes.index, fill_value=False)})
    out = out.join(episodes[["dataset", "generator"]])
    return 100 * out.groupby(["dataset", "generator"])[["greedy", "majority@8"]].mean()


@pytest.fixture(scope="module")
def ladder_figures() -> pd.DataFrame:
    return figures(simulate_pool("ladder", seed=0))


@pytest.mark.parametrize("pair", list(PUBLISHED))
def test_ladder_matches_the_published_figures(ladder_figures: pd.DataFrame, pair: tuple[str, str]) -> None:
    for figure, published in PUBLISHED[pair].items():
        ours = ladder_figures.loc[pair, figure]
        assert abs(ours - published) <= TOLERANCE_POINTS, f"{pair} {figure}: simulated {ours:.2f} vs {published}"


def test_ladder_spans_twenty_fold_in_parameters() -> None:
    profile = load_profile("ladder").data
    sizes = [profile["models"][g] for g in profile["generators"]]
    assert list(profile["generators"]) == [SMALL, MID, LARGE]
    assert max(sizes) / min(sizes) >= 20


def test_profile_and_docs_state_the_published_figures() -> None:
    profile = load_profile("ladder").data
    for (dataset, generator), published in PUBLISHED.items():
        target = profile["datasets"][dataset]["generator_targets"][generator]
        assert target["greedy"] == pytest.approx(published["greedy"], abs=0.05)
        if "majority@8" in published:
            assert target["majority"]["8"] == pytest.approx(published["majority@8"], abs=0.05)
    # docs/SIMULATOR.md's ladder table: "| dataset | generator | greedy (published) | ... | maj@8 (published) | ..."
    rows = re.findall(r"^\| (gsm8k|math500|aime2024|amc2023) \| (Qwen2\.5-Math-[\d.]+B-Instruct) \| "
                      r"([\d.]+) \| [\d.]+ \| ([\d.]+|-) \|", DOC.read_text(encoding="utf-8"), flags=re.M)
    documented = {(d, g): (float(greedy), None if maj == "-" else float(maj)) for d, g, greedy, maj in rows}
    assert set(documented) == set(PUBLISHED)
    for pair, published in PUBLISHED.items():
        assert documented[pair][0] == pytest.approx(published["greedy"], abs=0.05)
        assert documented[pair][1] == (None if "majority@8" not in published
                                       else pytest.approx(published["majority@8"], abs=0.05))


def _ladder() -> dict:
    import json
    return json.loads((PROFILE_DIR / "ladder.json").read_text(encoding="utf-8"))


def _drop_generator(p: dict) -> None:
    del p["datasets"]["gsm8k"]["generator_targets"][SMALL]


def _rename_generator(p: dict) -> None:
    t = p["datasets"]["gsm8k"]["generator_targets"]
    t["Qwen2.5-Math-3B-Instruct"] = t.pop(SMALL)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (_drop_generator, r"datasets.gsm8k.generator_targets'.*no targets for generator 'Qwen2.5-Math-1.5B"),
        (_rename_generator, r"generator_targets.Qwen2.5-Math-3B-Instruct'.*not a generator of the profile"),
        (lambda p: p["datasets"]["math500"]["targets"].update(greedy=80.0),
         r"datasets.math500.targets.greedy'.*generators' targets average 81.767"),
        (lambda p: p["datasets"]["amc2023"]["generator_targets"][MID]["majority"].update({"4": 64.0}),
         r"generator_targets.Qwen2.5-Math-7B-Instruct.majority'.*prefix sizes differ from targets.majority at \['4'\]"),
        (lambda p: p["datasets"]["aime2024"]["generator_targets"][LARGE].update(greedy=50.0),
         r"generator_targets.Qwen2.5-Math-72B-Instruct.greedy'.*expected <= oracle"),
    ],
)
def test_bad_generator_targets(mutate, message: str) -> None:
    data = _ladder()
    mutate(data)
    with pytest.raises(PoolError, match=message):
        validate_profile(copy.deepcopy(data), "ladder.json")
