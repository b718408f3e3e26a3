"""The benchmark harness: paired, interleaved timings with ratios to a baseline.

A scenario names a baseline and one or more candidates (callables). Each round runs
the baseline then every candidate, after warm-up rounds, so a candidate's ratio is the
median of its per-round ratios to the baseline measured right beside it: machine drift
cancels out. Times are wall-clock seconds of the whole callable.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable


@dataclass
class Measurement:
    """Timings of one callable of a scenario."""

    name: str
    seconds: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)

    def summary(self) -> dict:
        s = sorted(self.seconds)
        out = {"name": self.name, "median_s": statistics.median(s), "min_s": s[0], "max_s": s[-1], "runs": len(s)}
        if self.ratios:
            r = sorted(self.ratios)
            out |= {"ratio_median": statistics.median(r), "ratio_min": r[0], "ratio_max": r[-1]}
        return out


@dataclass
class Scenario:
    """A named comparison: ``candidates`` are timed against ``baseline`` in the same run."""

    name: str
    description: str
    baseline: tuple[str, Callable[[], object]]
    candidates: list[tuple[str, Callable[[], object]]]
    target: str = ""
    notes: list[str] = field(default_factory=list)
    untimed: dict[str, Callable[[], object]] = field(default_factory=dict)
    """Per candidate name, a set-up run right before each of its calls, outside the timing."""


def run_scenario(s: Scenario, rounds: int, warmup: int) -> list[Measurement]:
    """Time a scenario: ``warmup`` uncounted rounds, then ``rounds`` counted ones."""
    base = Measurement(s.baseline[0])
    cands = [Measurement(n) for n, _ in s.candidates]
    for r in range(warmup + rounds):
        b = _time(s.baseline[1])
        times = []
        for name, fn in s.candidates:
            if name in s.untimed:
                s.untimed[name]()
            times.append(_time(fn))
        if r < warmup:
            continue
        base.seconds.append(b)
        for m, t in zip(cands, times):
            m.seconds.append(t)
            m.ratios.append(t / b if b > 0 else float("inf"))
    return [base] + cands


def _time(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def format_table(s: Scenario, ms: list[Measurement]) -> str:
    """The printed table of one scenario: medians, spreads and ratios to the baseline."""
    lines = [f"### {s.name}: {s.description}", ""]
    if s.target:
        lines += [f"Target: {s.target}", ""]
    lines += [
        "| measurement | median | min .. max | ratio to baseline (median, min .. max) |",
        "|---|---|---|---|",
    ]
    for i, m in enumerate(ms):
        d = m.summary()
        ratio = "baseline" if i == 0 else f"{d['ratio_median']:.2f}x ({d['ratio_min']:.2f} .. {d['ratio_max']:.2f})"
        lines.append(
            f"| {m.name} | {_fmt(d['median_s'])} | {_fmt(d['min_s'])} .. {_fmt(d['max_s'])} | {ratio} |"
        )
    lines += [f"\n{n}" for n in s.notes]
    return "\n".join(lines) + "\n"


def _fmt(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def as_json(s: Scenario, ms: list[Measurement]) -> dict:
    """A scenario's results for the JSON file."""
    return {"scenario": s.name, "description": s.description, "target": s.target, "notes": s.notes,
            "measurements": [m.summary() | {"seconds": m.seconds} for m in ms]}


__all__ = ["Scenario", "Measurement", "run_scenario", "format_table", "as_json", "asdict"]
