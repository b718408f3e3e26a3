"""The recorded benchmark runs (benchmarks/results/DATE-*.json) and docs/benchmarks.md agree.

Every recorded run parses and names its command, commit and figures; every figure in a table
or printed block of docs/benchmarks.md can be found in a run that its section names. Fast: no
Spark, no benchmark is run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"
RUNS = sorted(RESULTS.glob("20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]-*.json"))

FIGURE = re.compile(r"(?<![\w.,])\d[\d,]*(?:\.\d+)?(?:x| ms| s| %)(?!\w)")
"""A timing or a ratio as the benchmarks print them: 35.9 ms, 1.16 s, 0.12x, 3.9 %."""


def test_there_are_recorded_runs():
    assert len(RUNS) >= 10


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.stem)
def test_a_recorded_run_has_its_command_commit_and_figures(path):
    run = json.loads(path.read_text())
    assert run["run"] == path.stem
    for key in ("kind", "date", "command", "machine", "source"):
        assert isinstance(run[key], str) and run[key], key
    assert "commit" in run  # None where the run did not print one
    assert run["command"].split()[1 if run["command"].startswith(("python", ".venv")) else 0].startswith(
        "benchmarks/"), run["command"]
    if "results" in run:  # benchmarks/run.py's shape: chart.py draws it
        assert run["results"]
        for scenario in run["results"]:
            assert scenario["scenario"] and scenario["description"]
            ms = scenario["measurements"]
            assert ms and ms[0]["ratio"] == "baseline", scenario["scenario"]
            for m in ms:
                for key in ("name", "median", "min", "max", "ratio"):
                    assert isinstance(m[key], str) and m[key], (scenario["scenario"], key)
                assert m["min_s"] <= m["median_s"] <= m["max_s"], (scenario["scenario"], m["name"])
                assert m["median"].startswith(_printed(m["median_s"])), (scenario["scenario"], m["name"])
                if m["ratio"] != "baseline":
                    assert m["ratio"].startswith(f"{m['ratio_median']:.2f}x"), (scenario["scenario"], m["name"])
    else:  # the other scripts' tables, line by line as printed
        assert run["printed"] and all(isinstance(line, str) for line in run["printed"])


def _printed(seconds: float) -> str:
    return f"{seconds * 1000:.1f}" if seconds < 1 else f"{seconds:.2f}"


def _sections(text: str) -> list[tuple[str, list[str]]]:
    sections: list[tuple[str, list[str]]] = [("", [])]
    for line in text.splitlines():
        if line.startswith("#"):
            sections.append((line, []))
        else:
            sections[-1][1].append(line)
    return sections


def _figure_lines(lines: list[str]) -> list[str]:
    """Table rows and printed output; not the commands of ```bash blocks."""
    out, block = [], None
    for line in lines:
        if line.startswith("```"):
            block = None if block is not None else line[3:].strip()
            continue
        if (block is not None and block != "bash") or (block is None and line.startswith("|")):
            out.append(line)
    return out


def test_every_figure_on_the_page_is_in_a_run_its_section_names():
    assert _figures_checked(PAGE) > 100


def test_every_figure_of_the_pipelines_page_is_in_a_run_its_section_names():
    """docs/pipelines.md's speed table (benchmarks/feed.py) is held to the same rule."""
    assert _figures_checked(ROOT / "docs" / "pipelines.md") >= 10


def _figures_checked(page: Path) -> int:
    """Check that every figure of ``page`` is in a recorded run its section names; how many."""
    known = {p.stem: json.dumps(json.loads(p.read_text()), ensure_ascii=False) for p in RUNS}
    checked = 0
    for heading, lines in _sections(page.read_text()):
        body = "\n".join(lines)
        named = set(re.findall(r"benchmarks/results/(20[\w.-]+)\.json", body))
        named |= {n for n in re.findall(r"`([\w.-]+)`", body) if n in known}
        missing_files = named - set(known)
        assert not missing_files, (heading, missing_files)
        text = "\n".join(known[n] for n in named)
        for line in _figure_lines(lines):
            for figure in FIGURE.findall(line):
                assert figure in text, f"{heading}: {figure!r} is in no run the section names ({line[:120]})"
                checked += 1
    return checked


def test_the_page_is_short_and_speaks_of_the_project():
    text = PAGE.read_text()
    assert len(text.splitlines()) < 400
    assert not re.search(r"\bissue \d+|\bthis session\b|\bprevious session\b", text, re.IGNORECASE)
    assert "](benchmarks-latest.png)" in text and (ROOT / "docs" / "benchmarks-latest.png").is_file()


def test_the_recorded_connector_run_draws_as_the_page_chart(tmp_path):
    """chart.py reads the recorded runs as it reads run.py's output (the page's chart)."""
    import subprocess
    import sys

    runs = [RESULTS / f"2026-11-23-2300-connector-{what}.json" for what in ("lookups", "joins")]
    png = tmp_path / "chart.png"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "chart.py"), *map(str, runs), str(png)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    import matplotlib.image

    assert matplotlib.image.imread(str(png)).shape[1] > 600
