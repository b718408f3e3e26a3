"""Draw the figures of a benchmark run as a chart: one panel per scenario (goal), with
the candidate(s), the baseline and any floors side by side.

    python benchmarks/chart.py benchmarks/results/latest.json benchmarks/results/latest.png
    python benchmarks/chart.py RUN_A.json RUN_B.json OUT.png   # the scenarios of several files in one chart

``run.py`` calls :func:`draw` after every run (``--chart``). Each bar is a median of
the run's rounds, the whisker its min..max; candidates are labelled with their median
ratio to the baseline measured beside them, which is what the goals are stated in.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

BASELINE_COLOUR = "#8c8c8c"
CANDIDATE_COLOUR = "#1f77b4"
FLOOR_COLOUR = "#2ca02c"
FLOOR_WORDS = ("floor", "do-nothing", "empty")
"""A measurement whose name contains one of these is a floor (the least any design pays)."""


def _kind(index: int, name: str) -> str:
    if index == 0:
        return "baseline"
    return "floor" if any(w in name.lower() for w in FLOOR_WORDS) else "candidate"


def draw(results: dict, png: str | Path) -> Path:
    """Write the chart of ``results`` (the JSON ``run.py`` writes) to ``png``."""
    import matplotlib

    matplotlib.use("Agg")  # no screen: render to a file
    import matplotlib.pyplot as plt

    scenarios = results["results"]
    if not scenarios:
        raise ValueError("no scenario in the results: nothing to draw")
    cols = 2 if len(scenarios) > 1 else 1
    rows = math.ceil(len(scenarios) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(8 * cols, 0.6 + 2.6 * rows), squeeze=False)
    for ax, scenario in zip(axes.flat, scenarios):
        _panel(ax, scenario)
    for ax in list(axes.flat)[len(scenarios):]:
        ax.axis("off")
    label = f"; {results['label']}" if results.get("label") else ""
    fig.suptitle(f"indexeddf benchmarks ({results.get('machine', '')}{label}): median, min..max; ratios to the baseline",
                 fontsize=10)
    fig.tight_layout()
    png = Path(png)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=90, bbox_inches="tight")  # long bar labels stay whole
    plt.close(fig)
    return png


def _panel(ax, scenario: dict) -> None:
    ms = scenario["measurements"]
    names = [m["name"] for m in ms]
    medians = [m["median_s"] * 1000 for m in ms]
    lows = [max(0.0, (m["median_s"] - m["min_s"]) * 1000) for m in ms]
    highs = [max(0.0, (m["max_s"] - m["median_s"]) * 1000) for m in ms]
    colours = {"baseline": BASELINE_COLOUR, "candidate": CANDIDATE_COLOUR, "floor": FLOOR_COLOUR}
    kinds = [_kind(i, n) for i, n in enumerate(names)]
    ys = list(range(len(ms)))[::-1]
    ax.barh(ys, medians, xerr=[lows, highs], color=[colours[k] for k in kinds], capsize=3)
    ax.set_yticks(ys, [_middle(n) for n in names], fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("ms (log scale)", fontsize=7)
    ax.tick_params(axis="x", labelsize=7)
    title = f"{scenario['scenario']}: {scenario['description']}"
    ax.set_title(_short(title, 88), fontsize=8)
    lowest = min(m["min_s"] for m in ms) * 1000
    highest = max(m["max_s"] for m in ms) * 1000
    ax.set_xlim(lowest / 3, highest * 6)  # room on the right for the labels
    for y, m, kind in zip(ys, ms, kinds):
        label = "baseline" if kind == "baseline" else f"{m.get('ratio_median', float('nan')):.3g}x"
        ax.text(m["max_s"] * 1000 * 1.08, y, label, va="center", fontsize=7)


def _short(text: str, width: int = 48) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _middle(text: str, width: int = 50) -> str:
    """A bar's label cut in the middle: measurements of one scenario often differ only at
    the end ("... with spark.indexeddf.rowCache.maxBytes=4g")."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def merge(runs: list[dict]) -> dict:
    """One chart's input from several results files: their scenarios in order. A file that
    names its run and commit (the recorded runs in benchmarks/results/) puts them in the label."""
    if len(runs) == 1 and not runs[0].get("run"):
        return runs[0]
    names = ", ".join(dict.fromkeys(f"{r['run']} ({r['commit']})" if r.get("commit") else r["run"]
                                    for r in runs if r.get("run")))
    return {"machine": runs[0].get("machine", ""), "label": names,
            "results": [s for r in runs for s in r["results"]]}


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python benchmarks/chart.py RESULTS.json [MORE.json ...] OUT.png", file=sys.stderr)
        return 2
    print(draw(merge([json.loads(Path(a).read_text()) for a in argv[:-1]]), argv[-1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
