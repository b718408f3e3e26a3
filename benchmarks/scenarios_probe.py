"""Lookups of many keys through the JVM connector: past
``spark.indexeddf.driverLookup.maxKeys`` the tasks probe the index themselves
(``ProbeRDD``), in each executor's JVM, instead of the driver.

Each round takes a new key group, written as SQL text (a Column of thousands of literals
costs PySpark a py4j call each), against ``spark.read.parquet`` of the same files. Every
query builds a new DataFrame from one loaded per source, as an analyst's queries do. The
plan each candidate runs (which RDD answers) is printed in the notes, read from the RDD
lineage of its physical plan before the rounds.
"""

from __future__ import annotations

from pathlib import Path

import datasets
from harness import Scenario
from scenarios_connector import CONNECTOR, FLOOR, KEY, _indexed, _same_rows, _touched_row_groups, _with_conf
from scenarios_spark import _parquet_df, spark

MAX_KEYS = "spark.indexeddf.driverLookup.maxKeys"
READ_FRACTION = "spark.indexeddf.lookup.maxReadFraction"


def _answered_by(df) -> str:
    """Which RDD runs ``df``'s plan: the connector's probing tasks, its tasks over the
    driver's probe, a local relation (no job), or Spark's file scan."""
    lineage = df._jdf.queryExecution().executedPlan().execute().toDebugString()
    for rdd, what in (("ProbeRDD", "tasks that probe the index (ProbeRDD)"),
                      ("LookupRDD", "the driver probes, tasks read (LookupRDD)"),
                      ("FileScanRDD", "Spark's Parquet scan")):
        if rdd in lineage:
            return what
    return "rows held on the driver (no job)"


def _many_keys(args, name: str, groups: list[list[int]], what: str, candidates: list[tuple[str, dict]]) -> Scenario:
    path = datasets.events(args.rows)
    parquet = _parquet_df(path)
    indexed = _indexed(path)
    empty = _indexed(datasets.events_empty())
    state = {"i": 0}

    def sql(group):
        return f"{KEY} IN ({', '.join(map(str, group))})"

    def advance():
        state["i"] += 1
        return groups[state["i"] % len(groups)]

    def run(df, confs: dict):
        fn = lambda: df.where(sql(groups[state["i"] % len(groups)])).collect()  # noqa: E731
        for key, value in confs.items():
            fn = (lambda f, k, v: lambda: _with_conf(k, v, f))(fn, key, value)
        return fn()

    def plan_of(confs: dict) -> str:
        s = spark()
        for key, value in confs.items():
            s.conf.set(key, value)
        try:
            return _answered_by(indexed.where(sql(groups[0])))
        finally:
            for key in confs:
                s.conf.unset(key)

    touched, total = _touched_row_groups(path, groups[0])
    k = len(set(groups[0]))
    notes = [
        f"The first group's {k:,} keys hold rows in {touched:,} of the table's {total:,} row groups "
        f"(a uniform guess, 1 - (1 - 1/G)^K, says {1 - (1 - 1 / total) ** k:.1%}; the connector estimates "
        f"from row-group statistics on sorted files; lookup.maxReadFraction 0.5 by default).",
        "Plans (first group): " + "; ".join(f"{label}: {plan_of(confs)}" for label, confs in candidates) + ".",
    ]
    return Scenario(
        name=name,
        description=f"where({KEY} IN {what}, as SQL text).collect() over {args.rows:,} rows, a new key group "
                    "each round",
        baseline=("spark.read.parquet(the same files)", lambda: parquet.where(sql(advance())).collect()),
        candidates=[(label, lambda c=confs: run(indexed, c)) for label, confs in candidates]
        + [(f"{CONNECTOR} {FLOOR}", lambda: run(empty, {}))],
        target="many keys are probed by tasks in the executors (no goal of its own)",
        notes=notes,
        check=_same_rows,
    )


def _random_groups(args, n: int, seed: int) -> list[list[int]]:
    """20 groups of ``n`` random keys present in the table."""
    keys = datasets.some_keys(datasets.events(args.rows), n * 20, seed=seed)
    return [keys[i: i + n] for i in range(0, len(keys), n)]


def random_keys(work: Path, args) -> Scenario:
    """1,000 random keys a group: the driver's limit (maxKeys 1000) against tasks that probe (maxKeys 100)."""
    groups = _random_groups(args, 1_000, seed=17)
    return _many_keys(args, "connector_in_list_1000", groups, "1,000 random keys", [
        (f"{CONNECTOR} (JVM connector)", {}),
        (f"{CONNECTOR} with {MAX_KEYS}=100", {MAX_KEYS: "100"}),
    ])


def consecutive_keys(work: Path, args) -> Scenario:
    """5,000 consecutive keys a group: few row groups of the sorted files, which the
    connector's estimate finds from their statistics (a uniform guess says nearly all)."""
    path = datasets.events(args.rows)
    starts = datasets.some_keys(path, 20, seed=19)
    groups = [list(range(s, s + 5_000)) for s in starts]
    return _many_keys(args, "connector_in_list_5000_consecutive", groups, "5,000 consecutive keys", [
        (f"{CONNECTOR} (JVM connector)", {}),
        (f"{CONNECTOR} with {READ_FRACTION}=1.0", {READ_FRACTION: "1.0"}),
    ])


def random_5000(work: Path, args) -> Scenario:
    """5,000 random keys a group: nearly every row group, so Spark's scan answers by default
    (read unbucketed: its bucket pruning would cost a projection per value and prune nothing)."""
    groups = _random_groups(args, 5_000, seed=23)
    return _many_keys(args, "connector_in_list_5000", groups, "5,000 random keys", [
        (f"{CONNECTOR} (JVM connector)", {}),
        (f"{CONNECTOR} with {READ_FRACTION}=1.0", {READ_FRACTION: "1.0"}),
    ])


SCENARIOS = {
    "connector_in_list_5000": random_5000,
    "connector_in_list_1000": random_keys,
    "connector_in_list_5000_consecutive": consecutive_keys,
}
