"""Random DELETE, UPDATE and MERGE statements written as Spark users write them, on every
table layout, against Spark's own evaluation.

Statements come from a grammar of everyday Spark SQL predicates and functions (``BETWEEN``,
``date_add``, ``datediff``, ``instr``, ``startswith``, ``LIKE``, ``coalesce``, ``IN``, ...)
and run through Spark SQL on an indexeddf table: plain, partitioned or column-mapped, with
deletion vectors or copy on write, by path or by catalog name. The oracle is Spark itself:
the same conditions and values evaluated by a query over a Parquet copy of the previous
version (a MERGE as the full outer join its clauses describe). Every version must equal it,
read through the Python API and through DuckDB's delta extension.
"""

from __future__ import annotations

import datetime as dt
import os
import sys

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))

from oracles import duckdb_delta  # noqa: E402

import indexeddf  # noqa: E402
from indexeddf import IndexedTable  # noqa: E402

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("s", pa.string()), ("d", pa.date32()),
                    ("p", pa.string())])
COLUMNS = SCHEMA.names


def table_rows(keys, v0: int, tag: str) -> pa.Table:
    """Rows of ``keys``: ``s`` NULL for multiples of 7, ``v`` NULL for multiples of 11."""
    base = dt.date(2026, 1, 1)
    return pa.table({
        "k": keys,
        "v": [None if k % 11 == 0 else v0 + k for k in keys],
        "s": [None if k % 7 == 0 else f"{tag}{k}" for k in keys],
        "d": [base + dt.timedelta(days=(k * 5) % 90) for k in keys],
        "p": [f"p{k % 3}" for k in keys],
    }, schema=SCHEMA)


def ordered(rows) -> list[tuple]:
    return sorted((tuple(r[c] for c in COLUMNS) for r in rows), key=lambda r: tuple((x is None, x) for x in r))


# -- the grammar -----------------------------------------------------------------------
def atoms(side: str) -> st.SearchStrategy[str]:
    """Predicates over one side's columns (``side`` is the qualifier, '' for none)."""
    c = (side + ".") if side else ""
    n = st.integers(0, 60)
    return st.one_of(
        st.builds(lambda a, b: f"{c}k BETWEEN {min(a, b)} AND {max(a, b)}", n, n),
        st.builds(lambda a, b: f"{c}v NOT BETWEEN {min(a, b) * 3} AND {max(a, b) * 3}", n, n),
        st.builds(lambda x: f"date_add({c}d, {x}) > DATE'2026-02-15'", n),
        st.builds(lambda x: f"datediff({c}d, DATE'2026-01-01') < {x}", n),
        st.builds(lambda x: f"instr({c}s, '{x % 10}') > 0", n),
        st.sampled_from([f"startswith({c}s, 'a1')", f"{c}s LIKE '%2'", f"{c}s IS NULL", f"upper({c}s) = 'A5'"]),
        st.builds(lambda x: f"coalesce({c}v, -1) % 4 = {x % 4}", n),
        st.builds(lambda xs: f"{c}k IN ({', '.join(map(str, xs))})", st.lists(n, min_size=1, max_size=4)),
        st.builds(lambda x: f"length({c}s) = {x % 4 + 1}", n),
        st.sampled_from([f"{c}p = 'p1'", f"{c}p <> 'p2'"]),
    )


def predicates(side: str) -> st.SearchStrategy[str]:
    a = atoms(side)
    return st.one_of(a, st.builds(lambda x, y: f"({x} AND {y})", a, a), st.builds(lambda x, y: f"({x} OR {y})", a, a),
                     st.builds(lambda x: f"NOT ({x})", a))


def values(side: str, other: str = "") -> st.SearchStrategy[str]:
    """A new value for ``v`` (bigint)."""
    c = (side + ".") if side else ""
    o = (other + ".") if other else c
    return st.sampled_from([f"{c}v * 2", f"coalesce({c}v, 0) + datediff({c}d, DATE'2026-01-01')",
                            f"instr({c}s, '1') + {o}k", f"CASE WHEN {c}k BETWEEN 10 AND 20 THEN NULL ELSE {o}v END",
                            f"{o}v - 1"])


deletes = st.builds(lambda p: ("delete", p), predicates(""))
updates = st.builds(lambda p, v: ("update", p, v), predicates(""), values(""))
merges = st.builds(lambda keys, m1, v1, m2, n1, b1: ("merge", sorted(set(keys)), m1, v1, m2, n1, b1),
                   st.lists(st.integers(0, 90), min_size=1, max_size=15),
                   predicates("t"), values("s", "t"), predicates("s"), predicates("s"),
                   st.one_of(st.none(), predicates("t")))
statements = st.one_of(deletes, updates, merges)


# -- the statement and Spark's reference answer ---------------------------------------------
def statement(name: str, op) -> str:
    if op[0] == "delete":
        return f"DELETE FROM {name} WHERE {op[1]}"
    if op[0] == "update":
        return f"UPDATE {name} SET v = {op[2]}, s = upper(s) WHERE {op[1]}"
    _, _, m1, v1, m2, n1, b1 = op
    sql = (f"MERGE INTO {name} AS t USING merge_source AS s ON t.k = s.k "
           f"WHEN MATCHED AND {m1} THEN UPDATE SET v = {v1}, s = s.s "
           f"WHEN MATCHED AND {m2} THEN DELETE "
           f"WHEN NOT MATCHED AND {n1} THEN INSERT *")
    return sql + (f" WHEN NOT MATCHED BY SOURCE AND {b1} THEN DELETE" if b1 else "")


def reference(op) -> str:
    """Spark's answer over the views ``t`` (the previous version) and ``merge_source``."""
    if op[0] == "delete":
        return f"SELECT * FROM t WHERE NOT coalesce({op[1]}, false)"
    if op[0] == "update":
        hit = f"coalesce({op[1]}, false)"
        return (f"SELECT k, CASE WHEN {hit} THEN {op[2]} ELSE v END AS v, "
                f"CASE WHEN {hit} THEN upper(s) ELSE s END AS s, d, p FROM t")
    _, _, m1, v1, m2, n1, b1 = op
    both, tonly, sonly = "t.k IS NOT NULL AND s.k IS NOT NULL", "s.k IS NULL", "t.k IS NULL"
    upd = f"({both} AND coalesce({m1}, false))"
    dele = f"({both} AND NOT coalesce({m1}, false) AND coalesce({m2}, false))"
    ins = f"({sonly} AND coalesce({n1}, false))"
    gone = f"({tonly} AND coalesce({b1}, false))" if b1 else "false"
    return (f"SELECT CASE WHEN {sonly} THEN s.k ELSE t.k END AS k, "
            f"CASE WHEN {sonly} THEN s.v WHEN {upd} THEN {v1} ELSE t.v END AS v, "
            f"CASE WHEN {sonly} OR {upd} THEN s.s ELSE t.s END AS s, "
            f"CASE WHEN {sonly} THEN s.d ELSE t.d END AS d, CASE WHEN {sonly} THEN s.p ELSE t.p END AS p "
            f"FROM t FULL OUTER JOIN merge_source s ON t.k = s.k "
            f"WHERE ({sonly} AND {ins}) OR (NOT ({sonly}) AND NOT {dele} AND NOT {gone})")


LAYOUTS = {
    "plain": dict(),
    "partitioned": dict(partition_by=["p"]),
    "mapped": dict(properties={"delta.columnMapping.mode": "name"}),
}


@pytest.fixture
def registered(spark):
    assert indexeddf.register(spark) == indexeddf.spark.CONNECTOR
    return spark


@pytest.mark.slow
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(statements, min_size=2, max_size=3), layout=st.sampled_from(sorted(LAYOUTS)),
       vectors=st.booleans(), by_path=st.booleans())
def test_random_statements_equal_sparks_own_evaluation(registered, tmp_path_factory, ops, layout, vectors, by_path):
    spark = registered
    folder = tmp_path_factory.mktemp("stmts")
    path = str(folder / "t")
    spec = dict(LAYOUTS[layout])
    props = dict(spec.pop("properties", {}))
    props["delta.enableDeletionVectors"] = str(vectors).lower()
    IndexedTable.create(path, table_rows(list(range(0, 60)), 0, "a"), ["k"], num_buckets=4, properties=props, **spec)
    spark.sql("DROP TABLE IF EXISTS sql_statements")
    spark.sql(f"CREATE TABLE sql_statements USING indexeddf LOCATION '{path}'")
    name = f"indexeddf.`{path}`" if by_path else "sql_statements"
    for i, op in enumerate(ops):
        copy = str(folder / f"copy{i}")
        IndexedTable.for_path(path).to_df(spark).write.parquet(copy)
        spark.read.parquet(copy).createOrReplaceTempView("t")
        if op[0] == "merge":
            source = table_rows(op[1], 1000, "b")
            spark.createDataFrame(source.to_pylist(), "k bigint, v bigint, s string, d date, p string") \
                .createOrReplaceTempView("merge_source")
        want = ordered(r.asDict() for r in spark.sql(reference(op)).collect())
        sql = statement(name, op)
        spark.sql(sql).collect()
        got = ordered(IndexedTable.for_path(path).to_arrow().to_pylist())
        assert got == want, sql
        theirs = duckdb_delta().execute(f"SELECT {', '.join(COLUMNS)} FROM delta_scan('{path}')").to_arrow_table()
        assert ordered(theirs.to_pylist()) == want, sql
        assert ordered(r.asDict() for r in spark.table("sql_statements").collect()) == want, sql
