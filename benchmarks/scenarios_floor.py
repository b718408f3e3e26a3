"""The connector's floor: joins through ``spark.read.format("indexeddf")`` that the index does
not answer cost what Spark's join of ``spark.read.parquet`` on the same files costs.

Each scenario times, in one run, the plain join of a 10,000-key probe with Spark's read of the
table's live files (the anchor) and through the connector: where the index declines (the keys
hold rows in nearly every row group, so the lookup would decode most of the table), where the
join rule is off (Spark's join of the bucketed relation), and on a column no index has. Both
sides read the same files; the notes give each plan's scan (bucketed or not, and its tasks).
The row cache's figure shows what turning it on buys for the same join (docs/spark.md).
"""

from __future__ import annotations

from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from harness import Goal, Scenario
from scenarios_connector import (
    JOIN,
    PARQUET_JOIN,
    ROW_CACHE,
    ROW_CACHE_SIZE,
    _diagnostics,
    _indexed,
    _same_aggregates,
    _with_conf,
)
from scenarios_join import _probe, _query
from scenarios_spark import _parquet_df, spark

from indexeddf import IndexedTable

KEY = "user_id"
PROBE_KEYS = 10_000
"""The probe of the 10K-key join, whatever the table's size (rows / 2,000 at 20M rows)."""
WITHIN = 1.05
"""The goal's bound: no slower than the anchor, within the noise of a shared machine."""


def _scan(df, path: str) -> str:
    """The scan of the table at ``path`` in a join's physical plan: bucketed or not, and its tasks."""
    plan = df._jdf.queryExecution().executedPlan()
    if plan.getClass().getSimpleName() == "AdaptiveSparkPlanExec":
        plan = plan.executedPlan()
    leaves = plan.collectLeaves()
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        if (leaf.getClass().getSimpleName() == "FileSourceScanExec"
                and path in leaf.relation().location().rootPaths().head().toString()):
            kind = "bucketed" if leaf.bucketedScan() else "unbucketed"
            return f"{kind} scan, {leaf.inputRDD().getNumPartitions()} tasks"
    return "no file scan of the table (answered through the index)"


def _plans_note(path: str, joins: list[tuple[str, object]]) -> str:
    return "The table's side of each plan: " + "; ".join(f"{label}: {_scan(df, path)}" for label, df in joins) + "."


def join_declined(work: Path, args) -> Scenario:
    """The 10K-key join where the index declines, with the join rule off, and with the row cache."""
    path = datasets.events(args.rows)
    probe = _probe(work, path, PROBE_KEYS, seed=31)
    parquet = _parquet_df(path)
    indexed = _indexed(path)
    _diagnostics("clearRowCache")
    ours = f"{JOIN} (index declines)"
    off = f"{JOIN} with spark.indexeddf.indexedJoin.enabled=false"
    cached = f"{JOIN} with {ROW_CACHE}={ROW_CACHE_SIZE}"

    def rule_off(fn):
        return _with_conf("spark.indexeddf.indexedJoin.enabled", "false", fn)

    notes = [_plans_note(path, [("parquet", parquet.join(probe, KEY).groupBy().count()),
                          ("indexeddf", indexed.join(probe, KEY).groupBy().count())])
             + " With the join rule off: " + rule_off(lambda: _scan(indexed.join(probe, KEY).groupBy().count(), path)) + ".",
             "The row cache fills in the warm-up rounds (decoded row groups of the columns the join reads): "
             "later rounds read the probe's rows from memory."]
    return Scenario(
        name="connector_join_declined",
        description=f"{PROBE_KEYS:,} probe rows (existing keys) joined with {args.rows:,} rows on {KEY}; "
                    "count and sum(amount); the index declines",
        baseline=(PARQUET_JOIN, lambda: _query(parquet.join(probe, KEY))),
        candidates=[(ours, lambda: _query(indexed.join(probe, KEY))),
                    (off, lambda: rule_off(lambda: _query(indexed.join(probe, KEY)))),
                    (cached, lambda: _with_conf(ROW_CACHE, ROW_CACHE_SIZE, lambda: _query(indexed.join(probe, KEY))))],
        target="no slower than the parquet join where the index declines or is not used",
        notes=notes,
        check=_same_aggregates,
        goals=[Goal(f"indexeddf join no slower than the parquet join (within {WITHIN - 1:.0%})", ours, PARQUET_JOIN,
                    WITHIN),
               Goal(f"with the join rule off, no slower than the parquet join (within {WITHIN - 1:.0%})", off,
                    PARQUET_JOIN, WITHIN)],
    )


def _session_probe(work: Path, path: str, n: int):
    """``n`` session ids of the table (a column no index has), as a Parquet probe."""
    out = work / f"probe-session-{n}.parquet"
    if not out.exists():
        total = IndexedTable.for_path(path).snapshot.num_records()
        ids = np.random.default_rng(5).choice(total, size=min(n, total), replace=False).astype(np.int64)
        pq.write_table(pa.table({"session_id": ids}), out)
    return spark().read.parquet(str(out))


def join_unindexed(work: Path, args) -> Scenario:
    """The 10K-key join on session_id, a column no index has: Spark's join either way."""
    path = datasets.events(args.rows)
    probe = _session_probe(work, path, PROBE_KEYS)
    parquet = _parquet_df(path)
    indexed = _indexed(path)
    ours = f"{JOIN.replace(KEY, 'session_id')} (no index on session_id)"
    base = PARQUET_JOIN.replace(KEY, "session_id")
    return Scenario(
        name="connector_join_unindexed",
        description=f"{PROBE_KEYS:,} probe rows (existing session ids) joined with {args.rows:,} rows on session_id; "
                    "count and sum(amount)",
        baseline=(base, lambda: _query(parquet.join(probe, "session_id"))),
        candidates=[(ours, lambda: _query(indexed.join(probe, "session_id")))],
        target="no slower than the parquet join",
        notes=[_plans_note(path, [("parquet", parquet.join(probe, "session_id").groupBy().count()),
                            ("indexeddf", indexed.join(probe, "session_id").groupBy().count())])],
        check=_same_aggregates,
        goals=[Goal(f"indexeddf join no slower than the parquet join (within {WITHIN - 1:.0%})", ours, base, WITHIN)],
    )


SCENARIOS = {
    "connector_join_declined": join_declined,
    "connector_join_unindexed": join_unindexed,
}
