"""The routing sections of a route bench's report: tables, the model-routing figure and the report blocks.

Rendered from ``BenchData.routing`` (``eval.route_bench``): the allocation by generator (share of samples and
of generation cost per generator, for each policy), the route front, and on two-model pools the model-routing
metrics (CPT(50%), CPT(80%), APGR) with the random router and the oracle as reference lines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eval.bench_data import BenchData
from eval.table_render import Column, FigureRef, Table, fmt_pct


def _num(digits: int) -> Callable[[Any], str]:
    def fmt(v: Any) -> str:
        return "-" if v is None or v != v else f"{float(v):.{digits}f}"
    return fmt


def route_tables(data: BenchData) -> dict[str, Table]:
    """The routing tables by file stem: ``routing_allocation`` and, on two-model pools, ``model_routing``."""
    routing = data.routing
    if not routing:
        return {}
    gens = routing["generators"]
    cols = [Column("policy", "policy", csv_only=True), Column("label", "Method")]
    for k, g in enumerate(gens):
        cols += [Column(f"samples_{k}", f"{g} samples", fmt_pct), Column(f"cost_{k}", f"{g} cost", fmt_pct),
                 Column(f"per_item_{k}", f"{g} samples/item", _num(2))]
    rows = []
    for name, by_gen in routing["allocation_by_generator"].items():
        row: dict[str, Any] = {"policy": name, "label": data.info[name].label}
        for k, g in enumerate(gens):
            row.update({f"samples_{k}": by_gen[g]["sample_share"], f"cost_{k}": by_gen[g]["cost_share"],
                        f"per_item_{k}": by_gen[g]["samples_per_item"]})
        rows.append(row)
    out = {"routing_allocation": Table(
        "routing_allocation", f"Allocation by generator: share of samples and of generation cost "
        f"({routing['cost_model']}) per generator, and samples per item.", cols, [rows])}
    mr = routing.get("model_routing")
    if mr:
        cols = [Column("name", "name", csv_only=True), Column("label", "Router"),
                Column("strong_share", f"{mr['strong']} calls", fmt_pct), Column("accuracy", "accuracy", fmt_pct),
                Column("pgr", "PGR", _num(3)), Column("cpt50", "CPT(50%)", fmt_pct),
                Column("cpt80", "CPT(80%)", fmt_pct), Column("apgr", "APGR", _num(3), better="up"),
                Column("aiq", "AIQ %", lambda v: "-" if v is None or v != v else f"{100 * float(v):.2f}", better="up"),
                Column("aiq_axis", "AIQ over")]
        refs = [{"name": "random_router", "label": f"Random router (mean of {mr['random_router']['draws']})",
                 **_curve_cells(mr["random_router"])},
                {"name": "oracle_router", "label": "Oracle router (reads labels)", **_curve_cells(mr["oracle_router"])}]
        refs += [{"name": f"{n}:sweep", "label": f"{data.info[n].label}, threshold swept", **_curve_cells(c)}
                 for n, c in mr["threshold_curves"].items()]
        points = [{"name": n, "label": data.info[n].label + (" (upper bound)" if p["group"] == "oracle" else ""),
                   "strong_share": p["strong_share"], "accuracy": p["accuracy"], "pgr": p["pgr"]}
                  for n, p in mr["policies"].items()]
        out["model_routing"] = Table(
            "model_routing", f"Model routing between {mr['weak']} (weak) and {mr['strong']} (strong), "
            f"{mr['items']} items, first candidate of each: weak {100 * mr['weak_accuracy']:.2f}%, strong "
            f"{100 * mr['strong_accuracy']:.2f}%. Curves: CPT and APGR; policies: their point.", cols, [refs, points])
    return out


def _curve_cells(curve: dict[str, Any]) -> dict[str, Any]:
    return {"cpt50": curve["cpt50"], "cpt80": curve["cpt80"], "apgr": curve["apgr"], "aiq": curve.get("aiq"),
            "aiq_axis": curve.get("aiq_axis", "strong-call share") if "aiq" in curve else None}


def route_figures(data: BenchData) -> dict[str, Callable[[], Any]]:
    """The ``model_routing`` figure builder on two-model pools (accuracy against strong-call share)."""
    mr = (data.routing or {}).get("model_routing")
    return {"model_routing": lambda: model_routing_figure(data)} if mr else {}


def model_routing_figure(data: BenchData) -> Any:
    """Accuracy vs share of strong-model calls: random and oracle reference lines, swept curves, and each policy
    as a marker with its label beside it (``eval.label_placement``: no two labels overlap, a far one has a leader
    line to its marker)."""
    import matplotlib.pyplot as plt

    from eval.label_placement import line_boxes, place_labels

    mr = data.routing["model_routing"]
    fig, ax = plt.subplots(figsize=(7.5, 5.0), dpi=150)
    for key, label, style in (("random_router", "random router", "--"), ("oracle_router", "oracle router", ":")):
        c = mr[key]
        ax.plot(c["shares"], [100 * a for a in c["accuracy"]], style, color="grey", label=label)
    for name, c in mr["threshold_curves"].items():
        ax.plot(c["shares"], [100 * a for a in c["accuracy"]], "-o", ms=3, label=f"{data.info[name].label} (swept)")
    names = list(mr["policies"])
    xs = [mr["policies"][n]["strong_share"] for n in names]
    ys = [100 * mr["policies"][n]["accuracy"] for n in names]
    colors = []
    for name, x, y in zip(names, xs, ys, strict=True):
        oracle = mr["policies"][name]["group"] == "oracle"
        dot = ax.scatter([x], [y], zorder=3, marker="*" if oracle else "o", s=90 if oracle else 30)
        colors.append(dot.get_facecolor()[0])
    ax.set_xlabel(f"share of items calling {mr['strong']}")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(f"Model routing: {mr['weak']} -> {mr['strong']}", fontsize=10)
    ax.set_xlim(-0.08, 1.08)
    low, high = ax.get_ylim()
    ax.set_ylim(low - 0.04 * (high - low), high + 0.08 * (high - low))  # room for labels above the top points
    legend = ax.legend(fontsize=8, loc="best")  # where it hides the fewest markers and lines
    fig.tight_layout()
    # Label after the layout is final, so the text extents measured are the ones drawn; labels keep off the
    # legend and the curves.
    place_labels(ax, xs, ys, [data.info[n].label for n in names], colors, fontsize=7,
                 avoid=[legend.get_window_extent(fig.canvas.get_renderer()), *line_boxes(ax)])
    return fig


def route_blocks(data: BenchData, tables: dict[str, Table], files: dict[str, Any]) -> list[Any]:
    """The report's routing section (Markdown text, tables, figure references)."""
    routing = data.routing
    if not routing:
        return []

    params = ", ".join(f"{g} ({p:g}B)" for g, p in routing["generator_params_b"].items())
    front = ", ".join(data.info[n].label for n in routing["front"]) or "none"
    out: list[Any] = ["## Routing between generators",
                      f"Route episodes (`coba/Route-v0`): {routing['items']} problems, one episode each, generators "
                      f"{params}. Here an item is a problem, whatever generators answer it (the records' "
                      f"generator column names them all), so the tables above average over datasets. Route front "
                      f"(accuracy-cost Pareto front of the routing policies, oracles excluded): {front}.",
                      tables["routing_allocation"]]
    if routing.get("note"):
        out.append(routing["note"])
    mr = routing.get("model_routing")
    if mr:
        rnd = mr["random_router"]
        out += [f"Model-routing metrics (RouteLLM's CPT and APGR): the random router recovers APGR "
                f"{rnd['apgr']:.3f} (0.5 expected), the oracle {mr['oracle_router']['apgr']:.3f}. AIQ is "
                "RouterBench's average quality: the mean accuracy of a router's non-decreasing convex hull over "
                "its cost range; for the random and oracle routers over the strong-call share (one call per item, "
                "so cost is linear in it), for a swept router over its measured cost.",
                tables["model_routing"]]
        if "model_routing" in files.get("figures", {}):
            out.append(FigureRef("model_routing", "accuracy against share of strong-model calls",
                                 "Random and oracle routers as reference lines; each routing policy is a point."))
    return out


def route_summary_lines(data: BenchData) -> list[str]:
    """The terminal lines of the routing section: allocation per policy, and CPT / APGR on two-model pools."""
    routing = data.routing
    if not routing:
        return []
    lines = []
    for name, by_gen in routing["allocation_by_generator"].items():
        shares = "  ".join(f"{g} {100 * v['sample_share']:.0f}%/{100 * v['cost_share']:.0f}%"
                           for g, v in by_gen.items())
        lines.append(f"allocation {name}: samples/cost {shares}")
    lines.append("route front: " + (", ".join(routing["front"]) or "none"))
    if routing.get("note"):
        lines.append(routing["note"])
    mr = routing.get("model_routing")
    if mr:
        lines.append(f"model routing ({mr['items']} problems, first candidate of each): weak {mr['weak']} "
                     f"{_pct(mr['weak_accuracy'], 2)}, strong {mr['strong']} {_pct(mr['strong_accuracy'], 2)}, "
                     f"either {_pct(mr['at_least_one_correct'], 2)}")
        curves = {"random router": mr["random_router"], "oracle router": mr["oracle_router"],
                  **{f"{n} (swept)": c for n, c in mr["threshold_curves"].items()}}
        for label, c in curves.items():
            aiq = f"  AIQ {_pct(c['aiq'])} over {c.get('aiq_axis', 'strong-call share')}" if "aiq" in c else ""
            lines.append(f"{label}: CPT(50%) {_pct(c['cpt50'])}  CPT(80%) {_pct(c['cpt80'])}  APGR {c['apgr']:.3f}"
                         + aiq)
    return lines


def _pct(v: Any, digits: int = 1) -> str:
    return "-" if v is None or v != v else f"{100 * float(v):.{digits}f}%"

