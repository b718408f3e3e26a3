"""The two planners agree: for a corpus of table states and filters, the Python planner
(``optimizer/planner.py`` ``plan_filter``, what ``lookup``, ``explain`` and ``delete`` use) and
the JVM connector's (``LookupPlanner.java``, what ``spark.read.format("indexeddf")`` uses, asked
through ``io.indexeddf.spark.Diagnostics.planFilter``) choose the same index, the same keys,
the same index buckets and index files, the same covered live files and the same files to
scan, or both scan.

The only differences allowed are the connector-only rules of docs/PROTOCOL.md 13.1, listed in
:data:`CONNECTOR_ONLY`: each example that one of them decides is checked against that rule
instead (the connector must then have declined the index), never skipped silently.

The corpus: a table (primary index on ``k``, or on ``k, s``) and secondary indexes (on ``s``, on
the float column ``f``, on ``k, s``), then random appends (indexed or pending, the index
lagging, or files another Delta writer added, with no bucket), deletes (rewriting files, or with deletion vectors), refreshes, dropped and restored
indexes, compactions and staleness limits;
each filter is planned at the newest version and at an older one (where a newer state of an
index may serve).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from connector_helpers import jvm_diagnostic
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import indexeddf
from indexeddf import IndexedTable
from indexeddf.optimizer import planner
from indexeddf.spec.partition_filter import partition_conjuncts
from indexeddf.spec.predicate import parse_predicate
from indexeddf.spec.schema import arrow_schema

pytestmark = pytest.mark.spark

SEEN: Counter = Counter()
"""How the corpus's reads were decided (``compare``'s answers), for the check that it covers
every case."""

SCHEMA = pa.schema([("k", pa.int64()), ("s", pa.string()), ("f", pa.float64()), ("v", pa.int64())])


def _without_float_columns(schema: pa.Schema, fixed: dict) -> dict:
    """An index on a floating-point column is never the connector's choice: as if the filter
    fixed no such column (then no index with one can answer, and the others plan as before)."""
    return {c: v for c, v in fixed.items() if not pa.types.is_floating(schema.field(c).type)}


CONNECTOR_ONLY = {
    "float index columns": _without_float_columns,
}
"""The connector-only rules (docs/PROTOCOL.md 13.1) by name, each as what it does to the Python
planner's input (the table schema and the columns a filter fixes, with their values): the
connector's choice must equal the Python planner's with every rule applied."""


@pytest.fixture(scope="module")
def session(spark):
    """The test session, with the connector's driver lookup off: the optimized plan then still
    holds the filter the connector's planner is asked about (its choice is the same either way)."""
    assert indexeddf.register(spark) == "connector"
    keys = ("spark.indexeddf.driverLookup.enabled", "spark.indexeddf.lookupTasks.enabled")
    for key in keys:
        spark.conf.set(key, "false")
    yield spark
    for key in keys:
        spark.conf.unset(key)


def rows(seed: int, n: int) -> pa.Table:
    """``n`` rows of small key domains (so filters hit), nulls included."""
    ks = [None if (seed + i) % 23 == 0 else (seed * 7 + i * 5) % 40 for i in range(n)]
    return pa.table({
        "k": pa.array(ks, pa.int64()),
        "s": [None if (seed + i) % 11 == 0 else "abcde"[(seed + i * 3) % 5] for i in range(n)],
        "f": [None if (seed + i) % 13 == 0 else ((seed + i) % 4) + 0.5 for i in range(n)],
        "v": list(range(seed * 1000, seed * 1000 + n)),
    }, schema=SCHEMA)


def commit_foreign(path: str, data: pa.Table) -> None:
    """A commit adding files as another Delta writer would: no bucket, no file id tag; in a
    partitioned table one file per partition, in its ``col=value`` folder, without the column."""
    parts = list(IndexedTable.for_path(path).snapshot.metadata.partitionColumns)
    groups = [({}, data)]
    if parts:  # the corpus partitions by one string column
        (column,) = parts
        values = sorted(set(data.column(column).to_pylist()), key=str)
        groups = [({column: v}, data.filter(pa.compute.is_null(data.column(column)) if v is None
                                            else pa.compute.equal(data.column(column), v)).drop_columns([column]))
                  for v in values]
    lines = []
    for values, rows_ in groups:
        folder = "/".join(f"{c}={'__HIVE_DEFAULT_PARTITION__' if v is None else v}" for c, v in values.items())
        name = (folder + "/" if folder else "") + f"part-{uuid.uuid4()}.parquet"
        os.makedirs(os.path.dirname(os.path.join(path, name)), exist_ok=True)
        pq.write_table(rows_, os.path.join(path, name))
        lines.append({"add": {"path": name, "partitionValues": values, "size": os.path.getsize(os.path.join(path, name)),
                              "modificationTime": int(time.time() * 1000), "dataChange": True,
                              "stats": json.dumps({"numRecords": rows_.num_rows})}})
    version = IndexedTable.for_path(path).version + 1
    commit = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json"), "x") as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines) + json.dumps(commit) + "\n")


OPERATIONS = ["append", "append_pending", "append_pending", "foreign_append", "delete_key", "delete_range", "refresh", "refresh_full",
              "create_index", "drop_index", "restore_index", "optimize", "limits"]
SECONDARY = {"by_s": ["s"], "by_f": ["f"], "by_ks": ["k", "s"], "a_k": ["k"]}


def apply(table: IndexedTable, op: str, x: int) -> None:
    """One table operation of the corpus, its arguments drawn from ``x``."""
    names = sorted(SECONDARY)
    if op == "append":
        table.append(rows(x, 5 + x % 30))
    elif op == "append_pending":  # files the indexes do not cover yet (hybrid scan)
        table.set_properties({"indexeddf.index.autoRefresh": "false"})
        table.append(rows(x, 2 + x % 6))
        table.set_properties({"indexeddf.index.autoRefresh": "true"})
    elif op == "foreign_append":
        commit_foreign(table.path, rows(x, 2 + x % 6))
    elif op == "delete_key":
        table.delete(f"k = {x % 40}")
    elif op == "delete_range":
        table.delete(f"k < {x % 12}")
    elif op in ("refresh", "refresh_full"):
        table.refresh(mode="full" if op == "refresh_full" else "incremental")
    elif op == "create_index":
        name = names[x % len(names)]
        if name not in {i.name for i in table.indexes()}:
            table.create_index(name, SECONDARY[name], num_buckets=1 + x % 4)
    elif op in ("drop_index", "restore_index"):
        states = {i.name: i.state for i in table.indexes() if i.name != "primary"}
        name = sorted(states)[x % len(states)] if states else None
        if op == "drop_index" and states.get(name) == "ACTIVE":
            table.drop_index(name)
        elif op == "restore_index" and states.get(name) == "DELETED":
            table.restore_index(name)
    elif op == "optimize":
        table.optimize()
    else:
        ratios = ["0", "0.1", "0.3", "0.6", "1"]
        table.set_properties({"indexeddf.hybridScan.maxAppendedRatio": ratios[x % 5],
                              "indexeddf.hybridScan.maxDeletedRatio": ratios[(x // 5) % 5]})


def filters(x: int, y: int) -> list[str]:
    """Filters of every shape the planners take: =, <=>, IN, IS NULL on one or several
    columns, two constraints on one column, an OR of equalities, other conjuncts, floats."""
    k, j, s, t = x % 45 - 2, y % 45 - 2, "abcdez"[x % 6], "abcdez"[y % 6]
    ins = ", ".join(str((x * i) % 50) for i in range(1 + y % 12))
    return [
        f"k = {k}", f"k IN ({ins})", f"k <=> {k}", "k IS NULL", f"k IN ({k}, NULL)", f"s = '{s}'",
        f"s IN ('{s}', '{t}')", f"k = {k} AND s = '{s}'", f"k IN ({k}, {j}) AND s IN ('{s}', '{t}')",
        f"k = {k} AND v > {y}", f"k IN ({ins}) AND k = {j}", f"k = {k} OR k = {j}", f"f = {x % 4}.5",
        f"f = {x % 4}.5 AND k = {k}", f"v = {y}", "s IS NULL AND k IS NULL", f"k = {k} AND k = {j}",
        "k IN (NULL)", f"(k = {k} OR k = {j} OR k = {k}) AND s IN ('{s}', '{t}', '{s}')",
        # On a table partitioned by s: conjuncts on the partition column that fix no value.
        f"k = {k} AND s <> '{s}'", f"k IN ({ins}) AND s > '{s}'", f"k = {k} AND s IS NOT NULL",
    ]


def python_plan(table: IndexedTable, version: int, text: str, rules=()) -> dict:
    """The Python planner's choice, in the shape of ``PlanReport.java``'s report, with the
    connector-only ``rules`` (names in :data:`CONNECTOR_ONLY`) applied."""
    snap = table.snapshot_at(version)
    latest = table.snapshot_at(None)
    schema = arrow_schema(snap.metadata.schema_)
    pred = parse_predicate(text, schema)
    fixed = {c: k.values for c, k in pred.keys.items()}
    for rule in rules:
        fixed = CONNECTOR_ONLY[rule](schema, fixed)
    parts = partition_conjuncts(text, schema, snap.metadata.partitionColumns)
    plan = planner.plan_filter(snap, fixed, latest, parts)
    if plan.lookup is None:
        return {"index": None}
    lookup = plan.lookup
    return {
        "index": lookup.index.name,
        "keys": lookup.keys.num_rows,
        "indexBuckets": lookup.buckets,
        "indexFiles": sorted(f.path for t in lookup.tasks for f in t.index_files),
        "liveCovered": sorted(int(i) for i in lookup.live_covered_ids),
        "scan": sorted(f.path for f in lookup.scanned_files),
    }


def jvm_plan(spark, path: str, version: int, text: str) -> dict:
    """The connector planner's choice for the same read (``PlanReport.java``)."""
    df = spark.read.format("indexeddf").option("versionAsOf", version).load(path).where(text)
    return json.loads(jvm_diagnostic(spark, "planFilter", df._jdf))


def skips_partitions(table: IndexedTable, version: int, text: str, py: dict) -> bool:
    """Whether the plan ``py`` (an index on no partition column) scans fewer files than the
    same lookup would without the filter's conditions on partition columns."""
    snap = table.snapshot_at(version)
    parts = set(snap.metadata.partitionColumns)
    served = [e for e in snap.indexes.values() if e.name == py["index"]]
    if not parts or not served or set(served[0].columns) & parts:
        return False
    pred = parse_predicate(text, arrow_schema(snap.metadata.schema_))
    fixed = {c: k.values for c, k in pred.keys.items() if c not in parts}
    plan = planner.plan_filter(snap, fixed, table.snapshot_at(None))
    return plan.index is not None and plan.index.name == py["index"] and \
        set(py["scan"]) < {f.path for f in plan.lookup.scanned_files}


def compare(table: IndexedTable, spark, version: int, text: str) -> str:
    """Checks that the connector plans one read as the Python planner with the connector-only
    rules applied; returns how it was decided (a rule that changed the choice, the kind of
    plan, or ``not reached`` when Spark's optimizer answered without reading the table)."""
    jvm = jvm_plan(spark, table.path, version, text)
    if not jvm.pop("reached"):
        return "not reached"
    jvm.pop("fixed")
    if "indexFiles" in jvm:
        jvm["indexFiles"] = sorted(jvm["indexFiles"])
    py = python_plan(table, version, text, CONNECTOR_ONLY)
    where = f"version {version} of {table.path}, filter {text!r}"
    assert jvm == py, f"{where}:\n  python:    {py}\n  connector: {jvm}"
    decided_by = [r for r in CONNECTOR_ONLY
                  if python_plan(table, version, text, [x for x in CONNECTOR_ONLY if x != r]) != py]
    if decided_by:
        return " and ".join(decided_by)
    if py["index"] is None:
        return "both scan"
    snap, latest = table.snapshot_at(version), table.snapshot_at(None)
    served = next(e for e in planner.serving_states(snap, latest) if e.name == py["index"])
    newer = served is not snap.indexes.get(served.name)
    if skips_partitions(table, version, text, py):
        SEEN["partitioned: unindexed files of other partitions skipped"] += 1
    if len([f for f in served.files if f.bucket in py["indexBuckets"]]) > len(py["indexFiles"]):
        SEEN["index files covering no live file, not read"] += 1
    columns = len(served.columns)
    return ("hybrid scan" if py["scan"] else "index only") + " through " + \
        ("the primary index" if py["index"] == "primary" else "a secondary index") + \
        (f" on {columns} columns" if columns > 1 else "") + (", a newer state of it" if newer else "")


JOIN_KEYS = {"k": 7, "s": "b", "f": 1.5}
"""A value of each column's type, for the filter a join's keys stand for."""


def join_choice_agrees(table: IndexedTable, version: int) -> None:
    """The third pair of choices: ``t.join``'s index (``planner.join_index``) for each set of
    join keys is the one the lookup planner picks for a filter fixing those keys, which is
    what the connector's join rule (``IndexedJoin.java``) asks ``LookupPlanner`` for once it
    has the probe's distinct keys (and which the test above compares with the connector)."""
    snap = table.snapshot_at(version)
    for keys in (["k"], ["s"], ["f"], ["k", "s"], ["k", "s", "f"]):
        entry, _ = planner.join_index(snap, keys)
        plan = planner.plan_filter(snap, {c: [JOIN_KEYS[c]] for c in keys})
        chosen = None if plan.lookup is None else plan.lookup.index.name
        assert (None if entry is None else entry.name) == chosen, (version, keys, plan.why_not)
        SEEN["join through " + ("no index" if chosen is None else "an index")] += 1


@settings(max_examples=16, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(primary=st.sampled_from([["k"], ["k", "s"]]), buckets=st.integers(1, 4),
       secondary=st.sets(st.sampled_from(sorted(SECONDARY)), max_size=3),
       ops=st.lists(st.tuples(st.sampled_from(OPERATIONS), st.integers(0, 10_000)), min_size=2, max_size=7),
       appended=st.sampled_from([None, "0.6", "1"]), deleted=st.sampled_from([None, "0.6", "1"]),
       vectors=st.booleans(), old=st.integers(0, 100), partitioned=st.booleans(),
       picks=st.lists(st.integers(0, 10_000), min_size=4, max_size=4))
# Cases the corpus must hold whatever the draws: a float index and two-column indexes, deletes
# with deletion vectors, and an older version served by a newer state of the index (the
# version before a refresh).
@example(primary=["k"], buckets=4, secondary={"by_f", "by_ks"}, ops=[("append_pending", 3), ("delete_key", 12)],
         appended="1", deleted=None, vectors=True, old=1, picks=[3, 9, 0, 11], partitioned=False)
@example(primary=["k", "s"], buckets=3, secondary={"by_s"}, ops=[("append_pending", 2), ("refresh", 0)],
         appended=None, deleted=None, vectors=False, old=0, picks=[5, 2, 0, 4], partitioned=False)
@example(primary=["k"], buckets=2, secondary={"by_s"}, ops=[("append", 0), ("delete_key", 7), ("foreign_append", 4)],
         appended="1", deleted="1", vectors=False, old=0, picks=[0, 0, 5, 6], partitioned=False)
# A table partitioned by s: unindexed files (pending and another writer's) of other partitions
# skipped by filters and keys on s, an index on the partition column, one on k and s.
@example(primary=["k"], buckets=2, secondary={"by_s", "by_ks"},
         ops=[("append_pending", 1), ("foreign_append", 4), ("delete_key", 9)],
         appended="1", deleted="1", vectors=False, old=2, picks=[7, 3, 19, 0], partitioned=True)
@example(primary=["k", "s"], buckets=3, secondary=set(), ops=[("append_pending", 5), ("foreign_append", 2)],
         appended="1", deleted=None, vectors=True, old=0, picks=[2, 4, 7, 0], partitioned=True)
def test_python_and_connector_planners_agree(session, tmp_path_factory, primary, buckets, secondary, ops, appended,
                                             deleted, vectors, old, picks, partitioned):
    path = str(tmp_path_factory.mktemp("parity") / "t")
    # Looser limits than the defaults let small unindexed appends be read by hybrid scans, and
    # indexes keep answering after deletes (their files then cover removed data files).
    props = {} if appended is None else {"indexeddf.hybridScan.maxAppendedRatio": appended}
    if deleted is not None:
        props["indexeddf.hybridScan.maxDeletedRatio"] = deleted
    if vectors:  # deletes mark rows in deletion vectors: the files stay live
        props["delta.enableDeletionVectors"] = "true"
    table = IndexedTable.create(path, rows(old, 60), index_columns=primary, num_buckets=buckets, properties=props,
                                partition_by=["s"] if partitioned else [])
    if partitioned:
        SEEN["partitioned table"] += 1
    for name in sorted(secondary):
        table.create_index(name, SECONDARY[name], num_buckets=1 + old % 3)
    for op, x in ops:
        apply(table, op, x)
    newest = table.snapshot_at(None).version
    if any(a.deletionVector is not None for a in table.snapshot_at(None).files.values()):
        SEEN["table with deletion vectors"] += 1
    if any(a.bucket is None for a in table.snapshot_at(None).files.values()):
        SEEN["table with files without a bucket"] += 1
    shapes = filters(picks[0], picks[1])
    # Older versions: any, and one just before the last operations (a newer index state may serve both).
    for version in {newest, old % (newest + 1), max(0, newest - 1 - old % 3)}:
        for i in range(3):
            text = shapes[(picks[2] + i * (1 + picks[3])) % len(shapes)]
            SEEN[compare(table, session, version, text)] += 1
        join_choice_agrees(table, version)


def test_the_corpus_covers_every_case():
    """The agreement above means something only if the corpus reached each kind of choice."""
    if not SEEN:
        pytest.skip("runs after test_python_and_connector_planners_agree")
    seen = " | ".join(f"{k}: {n}" for k, n in sorted(SEEN.items()))
    for case in ["both scan", "index only through the primary index", "index only through a secondary index",
                 "hybrid scan through", "on 2 columns", ", a newer state of it", "deletion vectors",
                 "covering no live file", "without a bucket", "partitioned table", "of other partitions skipped",
                 "join through no index", "join through an index",
                 *CONNECTOR_ONLY]:
        assert any(case in k for k in SEEN), f"no read of the corpus was decided by {case!r}: {seen}"
    assert SEEN["not reached"] < sum(SEEN.values()) / 4, seen
    print(seen)
