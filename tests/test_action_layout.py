"""The action layout is data: ids and names built from the generators and verifiers, predicates in one place."""

from __future__ import annotations

import pytest

from coba_env.rules.actions import REPLAY_LAYOUT, ActionLayout


def test_the_replay_layout_keeps_the_historical_ids_and_names():
    assert REPLAY_LAYOUT.names == ("SAMPLE", "VERIFY_V1", "VERIFY_V2", "VERIFY_V3", "STOP")
    assert (REPLAY_LAYOUT.sample_action(), REPLAY_LAYOUT.stop_action, REPLAY_LAYOUT.n_actions) == (0, 4, 5)
    assert [REPLAY_LAYOUT.verify_action(k) for k in range(3)] == [1, 2, 3]


@pytest.mark.parametrize("gens, vers", [(("a", "b", "c"), ("V1", "V2", "V3")), (("a", "b", "c", "d"), ("V1",)),
                                        (("x",), ()), (("a", "b"), ("V1", "V2", "V3", "V4", "V5", "V6"))])
def test_ids_and_names_of_any_layout(gens, vers):
    lay = ActionLayout(generators=gens, verifiers=vers)
    g, v = len(gens), len(vers)
    assert lay.n_actions == g + v + 1
    assert lay.names == tuple([f"SAMPLE_{x}" for x in gens] + [f"VERIFY_{x}" for x in vers] + ["STOP"])
    for a, name in enumerate(lay.names):
        assert lay.action_id(name) == a
        assert lay.is_sample(a) == name.startswith("SAMPLE_")
        assert lay.is_verify(a) == name.startswith("VERIFY_")
        assert lay.is_stop(a) == (name == "STOP")
        if lay.is_sample(a):
            assert f"SAMPLE_{gens[lay.generator_of(a)]}" == name
        if lay.is_verify(a):
            assert f"VERIFY_{vers[lay.verifier_of(a)]}" == name


@pytest.mark.parametrize("kw, match", [({"generators": ()}, "at least one generator"),
                                       ({"generators": ("a", "a")}, "must be unique"),
                                       ({"verifiers": ("V1", "V1")}, "must be unique")])
def test_bad_layouts_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        ActionLayout(**kw)


def test_unknown_action_name():
    with pytest.raises(ValueError, match="unknown action 'SAMPLE_z'; expected one of"):
        ActionLayout(generators=("a",)).action_id("SAMPLE_z")
