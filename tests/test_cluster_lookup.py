"""Lookups of many keys on a standalone cluster: the executors probe the index, not the
driver. The run's application on the loopback cluster (``standalone_cluster.py``,
``workers/cluster_app.py``) runs the lookups through the JVM connector; its answers must
equal DuckDB over ``to_arrow()`` of the same version, its plan must be the probing tasks
(``ProbeRDD``), and the driver's own segment cache must stay empty: every segment was read
and probed in an executor's JVM."""

from __future__ import annotations

import json

import duckdb
import pytest
from connector_helpers import rows_of

from indexeddf import IndexedTable

pytestmark = [pytest.mark.spark, pytest.mark.spark_elsewhere, pytest.mark.slow]  # the cluster's application

WHERES = [
    "k IN (1, 2, 3, 350, 7, 999, 3999, 4001)",  # primary index, an appended unindexed file, a deleted key
    "k IN (5, 6) AND v > 2",                    # the whole condition holds for every row returned
    "s IN ('a1', 'b2', 'a3')",                  # a secondary index: many rows a key, in every bucket
    "k IN (4100, 4101)",                        # only in the unindexed file (the hybrid scan's tasks)
]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = tmp_path_factory.mktemp("cluster_lookup") / "t"
    # Small row groups (about 100 rows): a lookup of a few keys skips most of them, so the
    # connector's estimate lets the index answer (on a table of a few row groups, a scan would).
    t = IndexedTable.create(str(path), rows_of(list(range(0, 4000))), index_columns=["k"], num_buckets=4,
                            properties={"indexeddf.targetRowGroupBytes": "2048"})
    t.create_index("by_s", ["s"])
    t.delete("k = 999")
    t.refresh()
    t.set_properties({"indexeddf.index.autoRefresh": "false"})
    t.append(rows_of([7, 4001, 4100, 4101], tag="b"))  # left unindexed: a hybrid scan
    return str(path)


def expected(path: str, where: str) -> list[tuple]:
    con = duckdb.connect()
    con.register("t", IndexedTable.for_path(path).to_arrow())
    return sorted(con.execute(f"SELECT k, s, v FROM t WHERE {where}").fetchall(), key=repr)


def test_executors_probe_the_index_of_a_many_key_lookup(cluster_app, table):
    cluster_app.send(cmd="lookup", path=table, wheres=WHERES,
                     conf={"spark.indexeddf.driverLookup.maxKeys": "1"})  # every IN of 2+ keys: tasks
    out = json.loads(cluster_app.wait_for("lookup ", 300)[len("lookup "):])
    for where in WHERES:
        got = sorted((tuple(r) for r in out["answers"][where]), key=repr)
        assert got == expected(table, where), where
        assert got, where  # every condition matches rows: an empty answer proves nothing
    assert "ProbeRDD" in out["lineage"], out["lineage"]
    assert out["driver_segments"][0] == 0, out["driver_segments"]  # no segment was read in the driver's JVM
