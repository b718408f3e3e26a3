"""A pipeline's statements after an idle minute: what Spark's new Python processes cost them.

    python benchmarks/cold_statements.py [--rows 100000] [--batch 1000] [--idle 70] [--rounds 2]
                                         [--work DIR] [--record NAME] [--note TEXT] [--machine TEXT]

Spark ends a Python worker idle for a minute (its ``PythonWorkerFactory``), so a pipeline whose
statements come every few minutes runs each one in new processes: the task workers (forked from
indexeddf's daemon on a local master) and the driver-side processes of a Python data source's
write (its writer and its commit, forked from PySpark's own daemon). This times that, in one
warm ``local[2]`` session of this process, on a table of ``--rows`` rows (``k`` bigint, ``v``
bigint; 4 buckets): each statement after ``--idle`` seconds of nothing (cold), then the same
statement again at once (warm), ``--rounds`` times:

- ``DELETE FROM ... WHERE k BETWEEN ...`` and ``UPDATE ... SET v = v + 1 WHERE k BETWEEN ...``
  (``--batch`` rows each), which Spark plans;
- ``MERGE INTO`` of ``--batch`` rows, half existing keys and half new (the change engine in
  one write task);
- an append of ``--batch`` new rows with ``df.write.format("indexeddf")``;
- the floor: the same rows written to a Python data source that writes and commits nothing
  (``noop_python``, as in ``pipeline_merges.py``): what a Python data source's write statement
  costs after an idle minute whatever it writes.

Prints per statement the median wall seconds and CPU seconds (this process's tree: the driver's
Python, its JVM and the JVM's Python processes), cold and warm. To compare two versions of the
code, run it with each on ``PYTHONPATH`` (a worktree of the older commit and its jar).
``--record NAME`` writes the printed lines into ``benchmarks/results/<UTC date-time>-NAME.json``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from harness import add_record_arguments, record_run
from pipeline_merges import noop_source
from proctree import cpu_between, tree_cpu

BUCKETS = 4


def statements(spark, path: str, rows: int, batch: int, slot: int) -> dict:
    """The statements of one ``slot`` (each run of a statement has its own), each a callable:
    its rows are ones no other slot deletes, updates, merges or appends."""
    low = slot * 2 * batch  # this slot's DELETE, then its UPDATE
    matched = rows // 2 + slot * batch // 2  # existing keys the MERGE updates
    new = rows + slot * 2 * batch  # keys the MERGE inserts, then the append's

    def merge():
        spark.range(matched, matched + batch // 2).union(spark.range(new, new + batch // 2)) \
            .selectExpr("id AS k", "id * 3 AS v").createOrReplaceTempView("cold_src")
        spark.sql(f"MERGE INTO indexeddf.`{path}` AS t USING cold_src AS s ON t.k = s.k "
                  "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *").collect()

    def appended():
        return spark.range(new + batch, new + 2 * batch).selectExpr("id AS k", "id AS v")

    return {
        "delete": lambda: spark.sql(f"DELETE FROM indexeddf.`{path}` WHERE k BETWEEN {low} AND {low + batch - 1}").collect(),
        "update": lambda: spark.sql(f"UPDATE indexeddf.`{path}` SET v = v + 1 "
                                    f"WHERE k BETWEEN {low + batch} AND {low + 2 * batch - 1}").collect(),
        "merge": merge,
        "append": lambda: appended().write.format("indexeddf").mode("append").save(path),
        "floor": lambda: appended().write.format("noop_python").mode("append").save(),
    }


def timed(run) -> dict:
    before, t0 = tree_cpu(), time.perf_counter()
    run()
    return {"seconds": time.perf_counter() - t0, "cpu": cpu_between(before, tree_cpu())}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--batch", type=int, default=1_000, help="rows a statement changes or writes")
    p.add_argument("--idle", type=float, default=70.0, help="seconds before a cold statement (Spark's timeout: 60)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--work", default=None, help="folder for the table (default: the system's temp folder)")
    add_record_arguments(p)
    args = p.parse_args()
    if args.rows < (2 * args.rounds + 1) * 2 * args.batch:
        p.error("--rows must hold every run's deleted and updated rows: at least (2 x rounds + 1) x 2 x batch")

    import pyarrow as pa

    import indexeddf

    work = Path(tempfile.mkdtemp(prefix="cold-statements-", dir=args.work))
    printed: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        printed.append(line)

    try:
        path = str(work / "table")
        keys = pa.array(range(args.rows), pa.int64())
        indexeddf.IndexedTable.create(path, pa.table({"k": keys, "v": keys}), index_columns=["k"], num_buckets=BUCKETS)
        spark = indexeddf.local_session("indexeddf-cold-statements", driver_memory="2g")
        indexeddf.register(spark)
        spark.dataSource.register(noop_source())
        for run in statements(spark, path, args.rows, args.batch, 0).values():
            run()  # the session warmed up: the JVM's code compiled, every daemon started
        got: dict[str, dict[str, list]] = {}
        for r in range(args.rounds):
            cold, warm = (statements(spark, path, args.rows, args.batch, 2 * r + i) for i in (1, 2))
            for name in cold:
                time.sleep(args.idle)
                got.setdefault(name, {"cold": [], "warm": []})["cold"].append(timed(cold[name]))
                got[name]["warm"].append(timed(warm[name]))
        say(f"{args.batch:,}-row statements on a {args.rows:,}-row table ({BUCKETS} buckets), local[2]: each after "
            f"{args.idle:.0f} s idle (cold) and again at once (warm), {args.rounds} rounds, medians")
        say(f"{'statement':<10} {'cold s':>8} {'cold CPU s':>11} {'warm s':>8} {'warm CPU s':>11}")
        for name, runs in got.items():
            med = {k: (statistics.median(x["seconds"] for x in v), statistics.median(x["cpu"] for x in v))
                   for k, v in runs.items()}
            say(f"{name:<10} {med['cold'][0]:>8.3f} {med['cold'][1]:>11.2f} {med['warm'][0]:>8.3f} {med['warm'][1]:>11.2f}")
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.record:  # the commit of the checkout whose code ran (a worktree's, on PYTHONPATH)
        record_run("benchmarks/cold_statements.py", args, printed, Path(indexeddf.__file__).resolve().parent.parent)


if __name__ == "__main__":
    main()
