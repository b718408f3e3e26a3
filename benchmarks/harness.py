"""The benchmark harness: paired, interleaved timings with ratios to a baseline.

A scenario names a baseline and one or more candidates (callables). Each round runs
the baseline then every candidate, after warm-up rounds, so a candidate's ratio is the
median of its per-round ratios to the baseline measured right beside it: machine drift
cancels out. Times are wall-clock seconds of the whole callable.

A scenario may also have a ``check`` (called after every round, warm-ups included, outside
the timings, with each callable's return value by name: it raises when an answer is wrong,
so a run cannot time a wrong answer) and ``goals`` (ratios between two of its measurements,
median of the per-round ratios, against a bound; printed under its table with whether each
is met).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
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
class Goal:
    """A stated speed goal of a scenario: the median over rounds of ``num``'s time divided by
    ``den``'s time in the same round must be at most ``at_most``.

    ``value`` instead gives a figure measured some other way (e.g. in the scenario's set-up),
    ``measure`` one measured after the rounds (it returns the figure and a few words on how
    it was obtained, or None when it cannot be measured); ``unit`` names its unit ("x": a
    ratio). ``unmeasurable`` marks a goal that cannot be measured yet and says why (with
    ``measure``: why, when ``measure`` returns None)."""

    text: str
    num: str = ""
    den: str = ""
    at_most: float = 1.0
    value: float | None = None
    unmeasurable: str = ""
    measure: Callable[[], tuple[float, str] | None] | None = None
    unit: str = "x"
    detail: str = ""

    def evaluate(self, ms: list[Measurement]) -> dict:
        """``{"goal", "measured", "at_most", "unit", "met", ...}``; ``measured`` is None when
        unmeasurable. ``measure`` runs on the first call only."""
        if self.measure is not None:
            got, self.measure = self.measure(), None
            if got is None:
                self.unmeasurable = self.unmeasurable or "the figure is not exposed"
            else:
                (self.value, self.detail), self.unmeasurable = got, ""
        if self.unmeasurable:
            return {"goal": self.text, "measured": None, "at_most": self.at_most, "unit": self.unit, "met": None,
                    "why_not_measured": self.unmeasurable}
        if self.value is None:
            by_name = {m.name: m.seconds for m in ms}
            num, den = by_name[self.num], by_name[self.den]
            ratio = statistics.median(a / b if b > 0 else float("inf") for a, b in zip(num, den))
        else:
            ratio = self.value
        out = {"goal": self.text, "measured": ratio, "at_most": self.at_most, "unit": self.unit,
               "met": ratio <= self.at_most}
        return out | ({"detail": self.detail} if self.detail else {})


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
    check: Callable[[dict[str, object]], None] | None = None
    """Called after every round, outside the timings, with each callable's return value by name."""
    goals: list[Goal] = field(default_factory=list)


def run_scenario(s: Scenario, rounds: int, warmup: int) -> list[Measurement]:
    """Time a scenario: ``warmup`` uncounted rounds, then ``rounds`` counted ones."""
    base = Measurement(s.baseline[0])
    cands = [Measurement(n) for n, _ in s.candidates]
    for r in range(warmup + rounds):
        b, value = _time(s.baseline[1])
        values = {s.baseline[0]: value}
        times = []
        for name, fn in s.candidates:
            if name in s.untimed:
                s.untimed[name]()
            t, values[name] = _time(fn)
            times.append(t)
        if s.check is not None:
            s.check(values)
        if r < warmup:
            continue
        base.seconds.append(b)
        for m, t in zip(cands, times):
            m.seconds.append(t)
            m.ratios.append(t / b if b > 0 else float("inf"))
    return [base] + cands


def _time(fn: Callable[[], object]) -> tuple[float, object]:
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


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
    if s.goals:
        lines += ["", "| goal | measured | met |", "|---|---|---|"]
        lines += [f"| {g['goal']} | {_fmt_ratio(g)} | {_fmt_met(g)} |" for g in (x.evaluate(ms) for x in s.goals)]
    lines += [f"\n{n}" for n in s.notes]
    return "\n".join(lines) + "\n"


def _fmt_ratio(g: dict) -> str:
    r = g["measured"]
    if r is None:
        return "not measurable yet: " + g["why_not_measured"]
    detail = f" ({g['detail']})" if g.get("detail") else ""
    if g["unit"] != "x":
        return f"{r:.2f} {g['unit']}{detail}"
    if r > 0 and r < 1:
        return f"{r:.4f}x ({1 / r:.1f}x faster)" if r < 0.1 else f"{r:.2f}x ({1 / r:.2f}x faster)"
    return f"{r:.2f}x{detail}"


def _fmt_met(g: dict) -> str:
    if g["met"] is None:
        return "n/a"
    bound = f"{g['at_most']:.3g}{'x' if g['unit'] == 'x' else ' ' + g['unit']}"
    return f"yes (<= {bound})" if g["met"] else f"**no** (goal <= {bound})"


def goals_summary(results: list[tuple[Scenario, list[Measurement]]]) -> str:
    """One table of every goal of a run's scenarios ("" when none has goals)."""
    rows = [(s.name, g.evaluate(ms)) for s, ms in results for g in s.goals]
    if not rows:
        return ""
    lines = ["### Goals of this run", "", "| scenario | goal | measured | met |", "|---|---|---|---|"]
    lines += [f"| {name} | {g['goal']} | {_fmt_ratio(g)} | {_fmt_met(g)} |" for name, g in rows]
    return "\n".join(lines) + "\n"


def _fmt(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def as_json(s: Scenario, ms: list[Measurement]) -> dict:
    """A scenario's results for the JSON file."""
    return {"scenario": s.name, "description": s.description, "target": s.target, "notes": s.notes,
            "measurements": [m.summary() | {"seconds": m.seconds} for m in ms],
            "goals": [g.evaluate(ms) for g in s.goals]}


__all__ = ["Scenario", "Goal", "Measurement", "run_scenario", "format_table", "goals_summary", "as_json", "asdict"]


def machine() -> str:
    """This machine as the results name it: ``x86_64, 2 cores, Python 3.11.7``."""
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def add_machine_argument(parser) -> None:
    """``--machine``: the machine as a recorded run names it, :func:`machine` unless given
    (add whether anything else ran: ``--machine "$(...); quiet (nothing else running)"``)."""
    parser.add_argument("--machine", default=machine(),
                        help="the machine, as the recorded JSON names it (default: this one's architecture, "
                             "cores and Python; say whether it was quiet)")


def add_record_arguments(parser) -> None:
    """What :func:`record_run` reads of a script's arguments: ``--record NAME`` (write the run
    into ``benchmarks/results/<date>-NAME.json``), ``--note`` (kept in it) and ``--machine``."""
    parser.add_argument("--record", default=None, help="write benchmarks/results/<date>-RECORD.json")
    parser.add_argument("--note", default=None, help="a note kept in the recorded JSON")
    add_machine_argument(parser)


RESULTS = Path(__file__).resolve().parent / "results"


def record_run(script: str, args, printed: list[str], code: Path | None = None) -> Path:
    """The lines ``script`` (``benchmarks/NAME.py``) printed, recorded as
    ``benchmarks/results/<UTC date-time>-<args.record>.json`` in the shape
    tests/test_benchmark_results.py reads: the command line (less ``--note``, kept in ``notes``),
    the commit of the checkout ``code`` (default: this one; a worktree whose code ran),
    ``args.machine`` and ``args.note``."""
    now = datetime.now(timezone.utc)
    name = f"{now:%Y-%m-%d-%H%M}-{args.record}"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=code or RESULTS.parent).stdout.strip() or None
    doc = {"run": name, "kind": script, "date": f"{now:%Y-%m-%d}",
           "command": f"python {script} " + " ".join(_without_note(sys.argv[1:])), "commit": commit,
           "machine": args.machine, "source": script, "notes": [args.note] if args.note else [], "printed": printed}
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"recorded {out}")
    return out


def _without_note(argv: list[str]) -> list[str]:
    """The arguments less ``--note`` and its text (the note is kept apart, in ``notes``)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--note":
            skip = True
        elif not a.startswith("--note="):
            out.append(a)
    return out
