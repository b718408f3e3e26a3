"""Where the driver's time goes in a connector point lookup of a new key: a JFR profile.

For each size given (0: the empty table of the same schema, the floor), a process of its own
starts a Spark session with the connector, warms it as ``lookup_blocks.py`` does (20 point
lookups), records the driver JVM with Java Flight Recorder (``jcmd <pid> JFR.start
settings=profile``) over ``--keys`` lookups of new keys (the index segment cache emptied
after each, as in ``lookup_blocks.py``'s ``blocks`` way), and sorts the execution samples of
the JVM's threads by the first of these frames on their stack: the connector's own parts
(index blocks, data footers, the data row group, its planner, ...), then Spark's (analysis,
optimization, planning, the rows handed to Python) and py4j's. Shares are of all samples;
"samples a lookup" compares sizes (the floor's are Spark's planning alone). Needs the JDK's
``jcmd`` and ``jfr``. ``--code DIR`` profiles another checkout's ``indexeddf`` (its jar built in
it). Results JSON: ``--out``.

    python benchmarks/lookup_profile.py --rows 0 20000000 --out benchmarks/results/<stamp>-lookup-profile.json
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import add_machine_argument

HERE = Path(__file__).resolve().parent

PARTS = [
    ("connector: index blocks", "IndexSegments.segments"),
    ("connector: data footers", "LookupReader.addCandidates"),
    # Spark's vectorized reader set up for each data row group read (requested schema parsed,
    # read options built, column vectors allocated), apart from its decoding.
    ("connector: data row group, Spark's reader set-up", "VectorizedParquetRecordReader.initialize"),
    ("connector: data row group, Spark's reader set-up", "VectorizedParquetRecordReader.initBatch"),
    ("connector: data row group", "LookupReader.readHere"),
    ("connector: Hadoop configuration", "SessionState.newHadoopConf"),
    ("connector: planner", "LookupPlanner.plan"),
    ("connector: reader set-up", "RowGroupReader.of"),
    ("connector: other", "DriverLookup"),
    ("Spark: rows to unsafe (LocalTableScanExec)", "LocalTableScanExec"),
    ("Spark: parsing the filter", "AbstractParser.parse"),
    ("Spark: analysis", "Analyzer.executeAndCheck"),
    ("Spark: optimizer (other rules)", "QueryExecution.optimizedPlan"),
    ("Spark: physical planning", "QueryExecution.sparkPlan"),
    ("Spark: preparations", "QueryExecution.executedPlan"),
    ("Spark: collect, rows to Python", "collectToPython"),
    ("Spark: Dataset.filter (other)", "Dataset.filter"),
    ("py4j: class look-ups", "ReflectionCommand"),
    ("py4j: other", "py4j/"),
]
"""A sample's part: the first whose frame (class.method, a substring) is on its stack."""


def child(rows: int, n_keys: int, jfr: str) -> dict:
    """Lookups of new keys in this process's Spark, recorded by JFR into ``jfr``."""
    import datasets
    from lookup_blocks import _segment_cache_clear, warm
    from proctree import tree

    import indexeddf

    path = datasets.events(rows) if rows else datasets.events_empty()
    spark = indexeddf.local_session("lookup-profile", conf={
        "spark.default.parallelism": "2",
        "spark.driver.extraJavaOptions": "-XX:FlightRecorderOptions:stackdepth=1024"})
    jvm = next(p for p in tree(os.getpid())[1:] if open(f"/proc/{p}/comm").read().strip() == "java")
    df = spark.read.format("indexeddf").load(path)
    warm(lambda keys: df.where(f"user_id IN ({', '.join(map(str, keys))})").collect(), path, "blocks")
    clear = _segment_cache_clear(spark)
    subprocess.run(["jcmd", str(jvm), "JFR.start", "name=lookups", "settings=profile"], check=True,
                   capture_output=True)
    walls = []
    for k in datasets.some_keys(path, n_keys, seed=5):
        w0 = time.perf_counter()
        df.where(f"user_id = {k}").collect()
        walls.append(time.perf_counter() - w0)
        if clear is not None:
            clear()
    subprocess.run(["jcmd", str(jvm), "JFR.dump", "name=lookups", f"filename={jfr}"], check=True, capture_output=True)
    spark.stop()
    return {"lookups": len(walls), "median_ms": round(1000 * statistics.median(walls), 2)}


def parts(jfr: str) -> tuple[int, dict[str, int]]:
    """The execution samples of ``jfr``, and their count by part (:data:`PARTS`)."""
    out = subprocess.run(["jfr", "print", "--json", "--stack-depth", "1000", "--events", "jdk.ExecutionSample", jfr],
                         capture_output=True, text=True, check=True).stdout
    events = json.loads(out)["recording"]["events"]
    counts: collections.Counter[str] = collections.Counter()
    for e in events:
        frames = " ".join(f["method"]["type"]["name"] + "." + f["method"]["name"]
                          for f in e["values"]["stackTrace"]["frames"])
        counts[next((name for name, frame in PARTS if frame in frames), "other threads, other")] += 1
    return len(events), dict(counts)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[0, 20_000_000])
    ap.add_argument("--keys", type=int, default=300, help="new keys looked up, one at a time, while recording")
    ap.add_argument("--code", help="another checkout's indexeddf to profile (its jar built in it)")
    ap.add_argument("--out")
    add_machine_argument(ap)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--jfr", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.rows[0], args.keys, args.jfr)))
        return
    env = dict(os.environ)
    if args.code:
        env["PYTHONPATH"] = os.pathsep.join([args.code, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    printed: list[str] = []
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for rows in args.rows:
            jfr = str(Path(tmp) / f"{rows}.jfr")
            done = subprocess.run([sys.executable, __file__, "--child", "--rows", str(rows), "--keys", str(args.keys),
                                   "--jfr", jfr], cwd=HERE, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(done.stderr[-3000:])
            run = json.loads(done.stdout.strip().splitlines()[-1])
            total, counts = parts(jfr)
            r = {"rows": rows, **run, "samples": total, "samples_a_lookup": round(total / run["lookups"], 2),
                 "parts": counts}
            results.append(r)
            printed.append(f"{rows:,} rows: {run['lookups']} lookups, median {run['median_ms']} ms, "
                           f"{total} samples ({r['samples_a_lookup']} a lookup)")
            for name in dict.fromkeys([n for n, _ in PARTS] + ["other threads, other"]):  # each part once
                if counts.get(name):
                    printed.append(f"  {name}: {counts[name]} samples, {round(100 * counts[name] / total, 1)} %, "
                                   f"{round(counts[name] / run['lookups'], 2)} a lookup")
            for line in printed[-(len(counts) + 1):]:
                print(line, flush=True)
    if args.out:
        out = Path(args.out)
        from lookup_blocks import commit_of

        commit = commit_of(args.code)
        out.write_text(json.dumps({
            "run": out.stem, "kind": "benchmarks/lookup_profile.py", "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "command": "python benchmarks/lookup_profile.py " + shlex.join(argv if argv is not None else sys.argv[1:]),
            "commit": commit, "machine": args.machine,
            "source": "benchmarks/lookup_profile.py", "printed": printed, "profiles": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
