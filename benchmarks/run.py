"""Run the benchmarks: ``python benchmarks/run.py [--only NAME,...] [--rounds N]``.

Generates its own data, runs the named scenarios, prints one table per scenario
(medians, spreads, ratios to the baseline measured in the same run) and writes every
figure to a JSON file (``--out``, default benchmarks/results/latest.json) and draws them
as a chart beside it (``--chart``, default the same path ending in .png; ``chart.py``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import scenarios_admin  # noqa: E402
import scenarios_connector  # noqa: E402
import scenarios_dv  # noqa: E402
import scenarios_floor  # noqa: E402
import scenarios_format  # noqa: E402
import scenarios_hybrid  # noqa: E402
import scenarios_index  # noqa: E402
import scenarios_join  # noqa: E402
import scenarios_probe  # noqa: E402
import scenarios_spark  # noqa: E402
from chart import draw  # noqa: E402
from harness import as_json, format_table, goals_summary, machine, run_scenario  # noqa: E402

GROUPS = {
    **scenarios_format.SCENARIOS,
    **scenarios_index.SCENARIOS,
    **scenarios_spark.SCENARIOS,
    **scenarios_admin.SCENARIOS,
    **scenarios_join.SCENARIOS,
    **scenarios_hybrid.SCENARIOS,
    **scenarios_connector.SCENARIOS,
    **scenarios_floor.SCENARIOS,
    **scenarios_probe.SCENARIOS,
    **scenarios_dv.SCENARIOS,
}


def _code_version() -> str:
    """The commit the run's code is at (and whether the tree has uncommitted changes)."""
    here = Path(__file__).parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return f"commit {head}" + (" with uncommitted changes" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default="", help=f"comma-separated scenario names (default all): {', '.join(GROUPS)}")
    p.add_argument("--rounds", type=int, default=10, help="counted rounds per scenario (default 10)")
    p.add_argument("--warmup", type=int, default=2, help="uncounted rounds first (default 2)")
    p.add_argument("--rows", type=int, default=20_000_000, help="rows of the generated events table (default 20M)")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "latest.json"), help="JSON output path")
    p.add_argument("--chart", default=None, help="PNG chart path (default: --out with .png; 'none' for no chart)")
    args = p.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(GROUPS)
    unknown = [n for n in names if n not in GROUPS]
    if unknown:
        p.error(f"unknown scenarios {unknown}; known: {list(GROUPS)}")

    machine_name = machine()
    print(f"# indexeddf benchmarks ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine_name})\n")
    print(f"Command: python benchmarks/run.py {' '.join(argv if argv is not None else sys.argv[1:])}".rstrip())
    print(f"Code: {_code_version()}\n")
    results = []
    done = []
    work = scenarios_format.workdir()
    try:
        for name in names:
            print(f"... {name}", file=sys.stderr, flush=True)
            scenario = GROUPS[name](work, args)
            ms = run_scenario(scenario, args.rounds, args.warmup)
            print(format_table(scenario, ms), flush=True)
            results.append(as_json(scenario, ms))
            done.append((scenario, ms))
    finally:
        scenarios_format.cleanup(work)
    summary = goals_summary(done)
    if summary:
        print(summary, flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": machine_name, "results": results}, indent=2))
    print(f"Results written to {out}")
    if args.chart != "none" and results:
        chart = draw({"machine": machine_name, "results": results}, args.chart or out.with_suffix(".png"))
        print(f"Chart drawn in {chart}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
