"""Load: N writer processes append to one table for a while, locally and on an S3
endpoint (moto's server on loopback); commits per second, lost races (retries) per
commit, commit latency, and whether any row was lost or doubled.

    python benchmarks/load.py [--writers 8] [--seconds 60] [--rows 100] [--stores local,s3]

Retries are the commit attempts an append lost to another writer (each one a re-read
of the log tail and a new put-if-absent), counted in the writer processes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from indexeddf import IndexedTable  # noqa: E402


def run_store(url: str, options: dict | None, writers: int, seconds: float, rows: int) -> dict:
    schema = pa.schema([("k", pa.int64()), ("w", pa.int32())])
    IndexedTable.create(url, schema.empty_table(), index_columns=["k"], num_buckets=8, storage_options=options)
    deadline = time.time() + 5 + seconds  # 5 s for the processes to start
    extra = [json.dumps(options)] if options else []
    procs = [subprocess.Popen([sys.executable, str(HERE / "load_writer.py"), url, str(w), str(deadline), str(rows), *extra],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(writers)]
    outs = [p.communicate(timeout=seconds + 600) for p in procs]
    failed = [e[-500:] for p, (_, e) in zip(procs, outs) if p.returncode != 0]
    commits = [json.loads(line) for out, _ in outs for line in out.splitlines() if line.startswith("{")]
    table = IndexedTable.for_path(url, storage_options=options)
    lost_races = [c["retries"] for c in commits]
    keys = Counter(table.to_arrow(columns=["k"])["k"].to_pylist())
    latencies = sorted(c["seconds"] for c in commits)
    return {
        "writers": writers, "seconds": seconds, "rows_per_commit": rows, "commits": len(commits),
        "commits_per_s": len(commits) / seconds, "failed_writers": failed,
        "retries_per_commit_mean": statistics.mean(lost_races) if lost_races else 0.0,
        "retries_per_commit_max": max(lost_races, default=0),
        "latency_p50_ms": 1000 * latencies[len(latencies) // 2] if latencies else None,
        "latency_p99_ms": 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] if latencies else None,
        "versions_dense": sorted(c["version"] for c in commits) == list(range(1, len(commits) + 1)),
        "rows_expected": len(commits) * rows, "rows_read": sum(keys.values()),
        "rows_doubled": sum(1 for n in keys.values() if n > 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--writers", type=int, default=8, help="writer processes (default 8)")
    p.add_argument("--seconds", type=float, default=60, help="how long they append (default 60)")
    p.add_argument("--rows", type=int, default=100, help="rows per append (default 100)")
    p.add_argument("--stores", default="local,s3", help="comma-separated: local, s3 (default both)")
    p.add_argument("--out", default=str(HERE / "results" / "load.json"), help="JSON output path")
    args = p.parse_args(argv)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"# indexeddf load ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine})\n")
    print(f"Command: python benchmarks/load.py {' '.join(argv if argv is not None else sys.argv[1:])}".rstrip() + "\n")
    results = {}
    for store in [s for s in args.stores.split(",") if s]:
        if store == "local":
            with tempfile.TemporaryDirectory() as d:
                results[store] = run_store(str(Path(d) / "t"), None, args.writers, args.seconds, args.rows)
        elif store == "s3":
            from s3_endpoint import MotoServer

            server = MotoServer()
            try:
                server.endpoint.create_bucket("load")
                results[store] = run_store("s3://load/t", server.endpoint.options(), args.writers, args.seconds, args.rows)
            finally:
                server.stop()
        else:
            p.error(f"unknown store {store!r}")
    print("| store | writers | commits | commits/s | retries/commit (mean, max) | latency p50 | p99 | rows lost | rows doubled | versions dense |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for store, r in results.items():
        print(f"| {store} | {r['writers']} | {r['commits']} | {r['commits_per_s']:.1f} | "
              f"{r['retries_per_commit_mean']:.2f}, {r['retries_per_commit_max']} | {r['latency_p50_ms']:.0f} ms | "
              f"{r['latency_p99_ms']:.0f} ms | {r['rows_expected'] - r['rows_read'] + r['rows_doubled']} | "
              f"{r['rows_doubled']} | {r['versions_dense']} |")
        if r["failed_writers"]:
            print(f"\n{store}: {len(r['failed_writers'])} writer(s) failed: {r['failed_writers']}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": machine, "results": results}, indent=2))
    print(f"\nResults written to {out}")
    return 0 if all(not r["failed_writers"] and r["rows_read"] == r["rows_expected"] and not r["rows_doubled"]
                    for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
