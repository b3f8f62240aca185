"""The report of a bench on either grouping, as a user reaches it: ``coba bench --env route --pool tiny`` draws
every policy on the frontier with a marker and a label pointing at it, the model-routing figure's labels do not
overlap, the header counts items and generators, and ``--reference`` tests every policy against one."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.text import Annotation, Text

from coba_cli.main import main
from eval import figures
from eval.route_report import model_routing_figure
from eval.tables import PolicyInfo
from pools.default import resolve_pool


def bench(tmp_path: Path, *args: str) -> tuple[dict, Path]:
    """Run ``coba bench`` as a user would; (its results.json, its folder)."""
    out = tmp_path / "bench"
    assert main(["bench", *args, "--out", str(out), "--no-progress"]) == 0
    return json.loads((out / "results.json").read_text()), out


@pytest.fixture(scope="module")
def route_tiny(tmp_path_factory):
    return bench(tmp_path_factory.mktemp("route"), "--env", "route", "--pool", "tiny")


@pytest.fixture(scope="module")
def routellm(shared_dir: Path, tmp_path_factory):
    src = shared_dir / "data" / "pools" / "routellm-gsm8k" / "gsm8k_responses.csv"
    root = tmp_path_factory.mktemp("routellm")
    assert main(["pools", "import", str(src), str(root / "pool"), "--format", "routellm"]) == 0
    return bench(root, "--env", "route", "--pool", str(root / "pool"), "--cost", "usd")


def info_of(results: dict) -> dict[str, PolicyInfo]:
    return {name: PolicyInfo(p["label"], p["group"]) for name, p in results["policies"].items()}


def labels_and_points(ax) -> dict[str, tuple[float, float]]:
    """Each label annotation's text -> the data point its ``xy`` (and leader line, when far) points at."""
    return {t.get_text(): tuple(map(float, t.xy)) for t in ax.texts if isinstance(t, Annotation)}


def filled_markers(ax) -> Counter:
    """The data points that carry a filled marker (the Pareto front's rings are hollow), counted."""
    out: Counter = Counter()
    for coll in ax.collections:
        if len(coll.get_facecolor()) and coll.get_facecolor()[0][3] > 0:
            out.update((float(x), float(y)) for x, y in coll.get_offsets())
    return out


def frontier_of(results: dict, cost: str = "p_tokens"):
    """The bench's frontier figure, drawn from the macro numbers results.json holds."""
    ran = results["meta"]["ran"]
    mac = pd.DataFrame({n: results["policies"][n]["macro"] for n in ran}).T
    return figures.frontier(mac, info_of(results), cost), mac


@pytest.mark.parametrize("which", ["route_tiny", "routellm"])
def test_every_policy_on_the_frontier_has_a_marker_and_a_label_pointing_at_it(which, request):
    results, out = request.getfixturevalue(which)
    cost = {"route_tiny": "p_tokens", "routellm": "usd"}[which]
    fig, mac = frontier_of(results, cost)
    ax = fig.axes[0]
    info = info_of(results)
    points = {n: (float(mac.loc[n, cost]), float(mac.loc[n, "acc"])) for n in mac.index if mac.loc[n, cost] > 0}
    assert len(points) >= 5  # every routing policy and the oracles
    assert filled_markers(ax) == Counter(points.values())  # one marker per policy, none else
    labels = labels_and_points(ax)
    for name, point in points.items():
        text = info[name].label + (" (upper bound)" if info[name].group == "oracle" else "")
        assert labels[text] == pytest.approx(point, rel=1e-6), name
    assert len(labels) == len(points)
    plt.close(fig)
    assert (out / "figures" / "frontier.png").is_file()


def overlaps(a, b) -> bool:
    return min(a.x1, b.x1) > max(a.x0, b.x0) and min(a.y1, b.y1) > max(a.y0, b.y0)


@pytest.mark.parametrize("which", ["route_tiny", "routellm"])
def test_the_model_routing_figure_labels_every_policy_without_overlaps(which, request):
    results, out = request.getfixturevalue(which)
    mr = results["routing"]["model_routing"]
    fig = model_routing_figure(SimpleNamespace(routing=results["routing"], info=info_of(results)))
    ax = fig.axes[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = labels_and_points(ax)
    for name, point in mr["policies"].items():
        assert labels[info_of(results)[name].label] == pytest.approx(
            (point["strong_share"], 100 * point["accuracy"]))
    # The text of each label (an annotation's own extent also covers its leader line).
    boxes = [Text.get_window_extent(t, renderer) for t in ax.texts if isinstance(t, Annotation)]
    boxes.append(ax.get_legend().get_window_extent(renderer))
    clashes = [(i, j) for i in range(len(boxes)) for j in range(i + 1, len(boxes)) if overlaps(boxes[i], boxes[j])]
    assert clashes == []
    plt.close(fig)
    assert (out / "figures" / "model_routing.png").is_file()


def test_the_route_report_header_counts_items_and_generators(route_tiny):
    results, out = route_tiny
    pool = resolve_pool("tiny")
    episodes = pool.episodes
    items = episodes.drop_duplicates(["dataset", "item_id"])
    gens = list(dict.fromkeys(episodes["generator"]))
    n = int(pool.candidates.groupby("episode_id").size().max())
    header = (out / "report.md").read_text().split("## Main results")[0]
    assert (f"- **Episodes**: {len(items)} (one per item, with all its generators) over "
            f"{items['dataset'].nunique()} datasets x {len(gens)} generators; N = {n} candidates per generator"
            in header)
    assert f"- **Generators**: {', '.join(gens)}\n" in header
    assert "+" not in header.split("- **Generators**: ")[1].split("\n")[0]


def test_the_replay_report_header_is_the_paper_setup(tmp_path):
    results, out = bench(tmp_path, "--pool", "tiny", "--policies", "greedy,coba_strong", "--no-figures")
    pool = resolve_pool("tiny")
    ds, gens = pool.episodes["dataset"].nunique(), pool.episodes["generator"].nunique()
    header = (out / "report.md").read_text().split("## Main results")[0]
    assert f"- **Episodes**: {len(pool.episodes)} (item x generator) over {ds} datasets x {gens} generators = " \
           f"{ds * gens} pairs; N = 8 candidates;" in header


@pytest.mark.parametrize("env, reference", [("route", "route_cascade"), ("replay", "greedy")])
def test_a_bench_with_a_reference_tests_every_policy_against_it(env, reference, tmp_path):
    results, out = bench(tmp_path, "--env", env, "--pool", "tiny", "--reference", reference, "--no-figures")
    boot = results["bootstrap"]
    others = [n for n in results["meta"]["ran"] if n != reference]
    assert boot["reference"] == reference and set(boot["vs_reference"]) == set(others)
    report = (out / "report.md").read_text().split("## Significance (paired bootstrap)")[1].split("\n## ")[0]
    label = results["policies"][reference]["label"]
    for other in others:
        row = boot["vs_reference"][other]
        line = f"| {label} - {results['policies'][other]['label']} | {row['diff']:+.2f} | " \
               f"[{row['ci'][0]:+.2f}, {row['ci'][1]:+.2f}] |"
        assert line in report, other


def test_a_route_bench_without_a_reference_tests_against_the_best_routing_policy(route_tiny):
    """The default reference of a route bench: the most accurate routing policy (ties: the cheaper), found here
    from the macro figures results.json holds; the significance section tests every other policy against it."""
    results, out = route_tiny
    ran = results["meta"]["ran"]
    routing = [n for n in ran if results["policies"][n]["group"] == "routing"]
    best = max(routing, key=lambda n: (results["policies"][n]["macro"]["acc"], -results["policies"][n]["macro"]["p_tokens"]))
    boot = results["bootstrap"]
    assert boot["reference"] == best and set(boot["vs_reference"]) == set(ran) - {best}
    assert boot["reference_rule"].startswith("default:")
    report = (out / "report.md").read_text().split("## Significance (paired bootstrap)")[1].split("\n## ")[0]
    assert f"| {results['policies'][best]['label']} - " in report


@pytest.mark.parametrize(("args", "message"), [
    (["--reference", "nope"], "--reference 'nope' is not among the selected policies; expected one of greedy, "
                              "coba_strong"),
    (["--reference", "bon4_majority"], "--reference 'bon4_majority' is not among the selected policies; "
                                       "expected one of greedy, coba_strong"),
])
def test_a_reference_outside_the_selection_exits_2(args, message, tmp_path, capsys):
    code = main(["bench", "--pool", "tiny", "--policies", "greedy,coba_strong", *args, "--out", str(tmp_path / "b"),
                 "--no-figures", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.splitlines() == [f"coba bench: {message}"] or err.endswith(message)
    assert not (tmp_path / "b").exists()
