"""Reads of a table with deletion vectors through the JVM connector, against the same rows
without deletion vectors and against Spark's plain read of the DV table's files.

The tables (generated once under benchmarks/data/, ``dv_tables(rows)``): 2M rows (``--rows``
when smaller) of
``k`` bigint (0 .. rows-1, shuffled), ``v`` bigint and ``s`` a 64-character string, indexed
on ``k`` into 32 buckets, one file per bucket. The DV table (``delta.enableDeletionVectors``)
then loses every row with ``k % 100 = 7`` (1 %) to Spark SQL's ``DELETE FROM``, which gives
every file a deletion vector; the other table is created from the remaining rows, without
DVs. Each round times, through ``spark.read.format("indexeddf")``, the table without DVs
(the baseline), the DV table, and ``spark.read.parquet`` of the DV table's live files, which
reads the deleted rows too and is the floor of any reader of those files (it is not checked:
its answer has the deleted rows). The DV table's answer is checked against the baseline's every
round. The notes say whether each plan's scan is columnar (Spark's vectorized Parquet reader
hands its batches on) and bucketed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from harness import Goal, Scenario
from scenarios_connector import CONNECTOR, _same_aggregates
from scenarios_spark import _parquet_df, spark

from indexeddf import IndexedTable

DATA = Path(__file__).parent / "data"
NUM_BUCKETS = 32
LAYOUT = "dv layout 1: k shuffled, v, s (64 chars); 32 buckets; DELETE FROM ... WHERE k % 100 = 7 (DVs)\n"
"""First line of the _READY marker; tables generated under another layout are rebuilt."""
DELETED = "k % 100 = 7"
NO_DV = f"{CONNECTOR}, the same rows without DVs"
WITH_DV = f"{CONNECTOR}, DV table (1 % of rows deleted by DVs)"
FLOOR = "spark.read.parquet(the DV table's files) (floor: reads the deleted rows too)"
WITHIN = 1.25
"""The goal's bound: a DV table's read costs at most this much more than the same rows without DVs."""


def _rows(n: int, seed: int = 11) -> pa.Table:
    rng = np.random.default_rng(seed)
    k = rng.permutation(n).astype(np.int64)
    words = np.array([f"{i:08d}" * 8 for i in range(10_000)])  # 64 characters each
    return pa.table({"k": pa.array(k), "v": pa.array(rng.integers(0, 1 << 40, n), pa.int64()),
                     "s": pa.array(words[rng.integers(0, len(words), n)])})


def dv_tables(rows: int) -> tuple[str, str]:
    """Paths of the DV table and of the same rows without DVs (built when missing)."""
    base = DATA / f"dv-{rows}"
    done = base / "_READY"
    dv, plain = base / "dv", base / "plain"
    if done.exists() and done.read_text().startswith(LAYOUT):
        return str(dv), str(plain)
    import shutil

    shutil.rmtree(base, ignore_errors=True)
    t0 = time.perf_counter()
    print(f"... generating {rows:,} rows with and without deletion vectors in {base}", file=sys.stderr, flush=True)
    data = _rows(rows)
    IndexedTable.create(str(dv), data, index_columns=["k"], num_buckets=NUM_BUCKETS,
                        properties={"delta.enableDeletionVectors": "true"})
    spark().sql(f"DELETE FROM indexeddf.`{dv}` WHERE {DELETED}").collect()
    kept = data.filter(pa.compute.not_equal(pa.compute.remainder(data["k"], 100), 7))
    IndexedTable.create(str(plain), kept, index_columns=["k"], num_buckets=NUM_BUCKETS)
    done.write_text(LAYOUT + f"generated in {time.perf_counter() - t0:.1f} s\n")
    return str(dv), str(plain)


def _scan_kind(df) -> str:
    """Whether the plan's file scan hands on columnar batches, and whether it is bucketed."""
    plan = df._jdf.queryExecution().executedPlan()
    if plan.getClass().getSimpleName() == "AdaptiveSparkPlanExec":
        plan = plan.executedPlan()
    leaves = plan.collectLeaves()
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        if leaf.getClass().getSimpleName() == "FileSourceScanExec":
            return (("columnar" if leaf.supportsColumnar() else "row by row") + ", "
                    + ("bucketed" if leaf.bucketedScan() else "unbucketed"))
    return "no file scan"


ROWS = 2_000_000
"""The tables' rows (``--rows`` when smaller)."""


def _scenario(args, name: str, text: str, run, prepare) -> Scenario:
    rows = min(args.rows, ROWS)
    dv, plain = dv_tables(rows)
    deleted = IndexedTable.for_path(dv)
    with_dv = spark().read.format("indexeddf").load(dv)
    without = spark().read.format("indexeddf").load(plain)
    floor = _parquet_df(dv)
    dvs = sum(1 for a in deleted.snapshot.live_files() if a.deletionVector is not None)
    kinds = "; ".join(f"{label}: {_scan_kind(prepare(df))}"
                      for label, df in (("without DVs", without), ("DV table", with_dv), ("parquet", floor)))
    return Scenario(
        name=name,
        description=f"{text} over {rows:,} rows (k, v, s of 64 characters), 1 % deleted by deletion vectors",
        baseline=(NO_DV, lambda: run(without)),
        candidates=[(WITH_DV, lambda: run(with_dv)), (FLOOR, lambda: run(floor))],
        target=f"the DV table within {WITHIN}x of the same rows without DVs",
        notes=[f"The scans: {kinds}.",
               f"The DV table's {len(deleted.snapshot.live_files())} live files, {dvs} with a deletion vector."],
        check=_same_aggregates,
        goals=[Goal(f"DV table within {WITHIN}x of the same rows without DVs", WITH_DV, NO_DV, WITHIN)],
    )


def full_scan(work: Path, args) -> Scenario:
    """Every row and column read (Spark's no-op sink: no rows reach Python; no answer to check, the
    aggregate scenario checks the rows read)."""

    def run(df):
        df.write.format("noop").mode("overwrite").save()
        return None

    return _scenario(args, "dv_full_scan", "every column of every row, written to Spark's noop sink", run,
                     lambda df: df)


def aggregate(work: Path, args) -> Scenario:
    """count(*), sum(v), max(s): the aggregate reads every row of the columns it names."""
    from pyspark.sql import functions as F

    def query(df):
        return df.agg(F.count("*"), F.sum("v"), F.max("s"))

    return _scenario(args, "dv_aggregate", "count(*), sum(v), max(s)", lambda df: query(df).collect(), query)


SCENARIOS = {
    "dv_full_scan": full_scan,
    "dv_aggregate": aggregate,
}
