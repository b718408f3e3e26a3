"""Struct, array and map columns (nested in one another): stored, read and returned by
every path, for tables indexeddf writes and for Delta tables delta-rs wrote and indexeddf
converted.

The oracles are DuckDB's delta extension and delta-rs reading the same version, and
DuckDB's own MERGE for a change; the schema round trip is checked against the log text
delta-rs writes and against Spark's own parsing of it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys

import deltalake
import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from connector_helpers import lineage, physical, read  # noqa: E402
from oracles import duckdb_delta  # noqa: E402

import indexeddf  # noqa: E402
from indexeddf import IndexedTable  # noqa: E402
from indexeddf.errors import NestedIndexColumnError, TypeChangeError  # noqa: E402
from indexeddf.spec.actions import ActionParseError  # noqa: E402
from indexeddf.spec.delta import parse_schema_string, schema_string  # noqa: E402
from indexeddf.spec.schema import arrow_schema, fields_from_arrow  # noqa: E402
from indexeddf.spec.types import display, same_type  # noqa: E402

UTC = dt.timezone.utc
INNER = pa.struct([("x", pa.float64()), ("ts", pa.timestamp("us", tz="UTC"))])
S = pa.struct([("a", pa.int64()), ("b", pa.string()), ("inner", INNER)])
LS = pa.list_(pa.field("element", pa.struct([("q", pa.int64()), ("tags", pa.list_(pa.field("element", pa.string())))])))
SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("v", pa.string()),
    ("s", S),
    ("l", pa.list_(pa.field("element", pa.int32()))),
    ("m", pa.map_(pa.string(), pa.int64())),
    ("ls", LS),
    ("ms", pa.map_(pa.string(), pa.struct([("d", pa.date32())]))),
])
"""Every kind of nesting: a struct holding a struct, a list, a map, a list of structs holding
a list, a map of structs; with NULLs at every level."""


def rows(ids, tag: str = "r") -> pa.Table:
    """Rows of :data:`SCHEMA` for ``ids``: the nested values depend on the id and ``tag``
    (NULL structs, lists, maps, elements and values for some ids)."""
    base = dt.datetime(2024, 3, 1, 8, 9, 10, 123456, tzinfo=UTC)

    def s(i):
        if i % 7 == 3:
            return None
        return {"a": i, "b": None if i % 5 == 1 else f"{tag}{i}",
                "inner": None if i % 4 == 2 else {"x": i / 2, "ts": base + dt.timedelta(hours=i)}}

    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "v": [f"{tag}{i}" for i in ids],
        "s": pa.array([s(i) for i in ids], S),
        "l": pa.array([None if i % 6 == 5 else [i, None, -i][: i % 4] for i in ids], SCHEMA.field("l").type),
        "m": pa.array([None if i % 5 == 4 else [(tag, i), (f"k{i}", None)][: 1 + i % 2] for i in ids],
                      SCHEMA.field("m").type),
        "ls": pa.array([None if i % 8 == 7 else [{"q": i, "tags": [tag, None]}, None, {"q": None, "tags": None}][: i % 3]
                        for i in ids], LS),
        "ms": pa.array([[(f"d{i}", {"d": dt.date(2024, 1, 1 + i % 28)}), ("none", None)] for i in ids],
                       SCHEMA.field("ms").type),
    }, schema=SCHEMA)


def duck(path: str, where: str = "true") -> list[dict]:
    """DuckDB's delta extension reading the table's latest version, as sorted rows."""
    return sorted_rows(duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}') WHERE {where}").to_arrow_table())


def sorted_rows(t: pa.Table) -> list[dict]:
    """The rows of ``t`` (its :data:`SCHEMA` columns) by id: Python values, so DuckDB's and
    delta-rs's names of list and map fields and of the UTC zone do not matter."""
    return sorted(t.select(SCHEMA.names).to_pylist(), key=lambda r: r["id"])


def delta_rs(path: str) -> list[dict]:
    return sorted_rows(deltalake.DeltaTable(path).to_pyarrow_table())


def where_ids(ids) -> str:
    return f"id IN ({', '.join(map(str, ids))})"


# -- the schema --------------------------------------------------------------------------------


def test_the_log_holds_delta_s_schema_json_and_reads_back_exactly(tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(range(4)), index_columns=["id"], num_buckets=2)
    assert t.schema == SCHEMA
    meta = next(json.loads(line)["metaData"] for line in open(os.path.join(path, "_delta_log", f"{0:020d}.json"))
                if '"metaData"' in line)
    s = json.loads(meta["schemaString"])["fields"][2]
    assert s == {"name": "s", "nullable": True, "metadata": {}, "type": {"type": "struct", "fields": [
        {"name": "a", "type": "long", "nullable": True, "metadata": {}},
        {"name": "b", "type": "string", "nullable": True, "metadata": {}},
        {"name": "inner", "nullable": True, "metadata": {}, "type": {"type": "struct", "fields": [
            {"name": "x", "type": "double", "nullable": True, "metadata": {}},
            {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {}}]}}]}}
    m = json.loads(meta["schemaString"])["fields"][4]["type"]
    assert m == {"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True}
    assert display(t.snapshot.metadata.schema_[5].type) == "array<struct<q:long,tags:array<string>>>"
    # delta-rs reads the same schema.
    assert deltalake.DeltaTable(path).schema().to_arrow().names == SCHEMA.names


def test_a_delta_rs_schema_string_is_written_back_byte_for_byte(tmp_path):
    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, rows(range(3)))
    text = next(json.loads(line)["metaData"]["schemaString"]
                for line in open(os.path.join(path, "_delta_log", f"{0:020d}.json")) if '"metaData"' in line)
    # Metadata on a nested field (a comment) and key orders are kept as the log has them.
    edited = json.loads(text)
    edited["fields"][2]["type"]["fields"][0]["metadata"] = {"comment": "the a"}
    edited = json.dumps(edited, separators=(",", ":"))
    for original in (text, edited):
        fields = parse_schema_string(original)
        assert schema_string(fields) == original
        assert arrow_schema(fields) == SCHEMA


def test_a_local_timestamp_inside_a_struct_needs_the_timestamp_ntz_feature(tmp_path):
    path = str(tmp_path / "t")
    naive = pa.struct([("at", pa.timestamp("us")), ("n", pa.int32())])
    data = pa.table({"id": pa.array([1, 2], pa.int64()),
                     "e": pa.array([{"at": dt.datetime(2024, 5, 6, 7, 8, 9), "n": 1}, None], naive)})
    t = IndexedTable.create(path, data, index_columns=["id"], num_buckets=2)
    assert "timestampNtz" in t.snapshot.protocol.readerFeatures
    want = duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}') ORDER BY id").to_arrow_table().to_pylist()
    assert t.to_arrow().sort_by("id").to_pylist() == want == deltalake.DeltaTable(path).to_pyarrow_table() \
        .sort_by("id").to_pylist()


def arrow_types(depth: int = 3):
    """Arrow types indexeddf stores: primitives, and structs, lists and maps of them."""
    leaves = st.sampled_from([pa.bool_(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(),
                              pa.float64(), pa.string(), pa.binary(), pa.date32(), pa.timestamp("us", tz="UTC"),
                              pa.timestamp("us"), pa.decimal128(12, 3)])
    names = st.text("abcXYZ_ é.", min_size=1, max_size=4)

    def nest(children):
        return st.one_of(
            st.lists(st.tuples(names, children, st.booleans()), min_size=1, max_size=3,
                     unique_by=lambda f: f[0]).map(lambda fs: pa.struct([pa.field(n, t, nullable) for n, t, nullable in fs])),
            st.tuples(children, st.booleans()).map(lambda c: pa.list_(pa.field("element", c[0], c[1]))),
            st.tuples(leaves, children, st.booleans()).map(
                lambda c: pa.map_(pa.field("key", c[0], False), pa.field("value", c[1], c[2]))),
        )

    return st.recursive(leaves, nest, max_leaves=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(arrow_types(), min_size=1, max_size=3))
def test_any_nested_type_round_trips_through_the_log(types):
    schema = pa.schema([pa.field(f"c{i}", t) for i, t in enumerate(types)])
    fields = fields_from_arrow(schema)
    text = schema_string(fields)
    assert parse_schema_string(text) == fields
    assert schema_string(parse_schema_string(text)) == text
    assert arrow_schema(fields) == schema
    assert all(same_type(f.type, f.type) for f in fields)


def test_damaged_nested_types_are_a_corrupt_log():
    bad = [{"type": "array", "elementType": "long"} | {"containsNull": "yes"},
           {"type": "struct", "fields": [{"type": "long"}]},
           {"type": "set", "elementType": "long"},
           {"type": "map", "keyType": "string", "valueType": None}]
    for t in bad:
        text = json.dumps({"type": "struct", "fields": [{"name": "c", "type": t, "nullable": True, "metadata": {}}]})
        with pytest.raises(ActionParseError):
            parse_schema_string(text)


# -- tables indexeddf writes -------------------------------------------------------------------


@pytest.mark.parametrize("dv", [False, True], ids=["copy-on-write", "deletion-vectors"])
def test_every_python_path_returns_what_duckdb_and_delta_rs_read(tmp_path, dv):
    path = str(tmp_path / "t")
    props = {"delta.enableDeletionVectors": "true", "indexeddf.hybridScan.maxAppendedRatio": "0.9"} if dv else \
        {"indexeddf.hybridScan.maxAppendedRatio": "0.9"}
    t = IndexedTable.create(path, rows(range(40)), index_columns=["id"], num_buckets=4, properties=props)
    t.append(rows(range(40, 60), "app"))
    if not dv:  # delta-rs writes into the table: files the index does not cover (hybrid scans)
        deltalake.write_deltalake(path, rows(range(60, 70), "rs"), mode="append")
    t = IndexedTable.for_path(path)
    want = duck(path)
    assert len(want) == (70 if not dv else 60)
    assert t.to_arrow().schema == SCHEMA
    assert sorted_rows(t.to_arrow()) == want
    if not dv:
        assert delta_rs(path) == want
    probes = [0, 3, 7, 11, 42, 59, 61, 65, 1000]
    got = t.lookup(probes)
    assert got.schema == SCHEMA
    assert sorted_rows(got) == duck(path, where_ids(probes))
    assert t.lookup([3], columns=["ls", "s"]).to_pylist() == [{"ls": rows([3])["ls"][0].as_py(), "s": None}]
    # Changes carry the nested values of every row they copy, and write the ones they set.
    t.update({"v": "'changed'"}, "id = 5")
    t.merge(rows([6, 41, 500], "src"), "target.id = source.id").when_matched_update(
        {"s": "source.s", "ms": "source.ms"}).when_not_matched_insert_all().execute()
    t.delete("id IN (7, 45)")
    t = IndexedTable.for_path(path)
    want = duck(path)
    assert sorted_rows(t.to_arrow()) == want
    if not dv:
        assert delta_rs(path) == want
    assert sorted_rows(t.lookup(probes + [5, 6, 41, 500])) == duck(path, where_ids(probes + [5, 6, 41, 500]))
    six = next(r for r in want if r["id"] == 6)
    assert six["s"] == rows([6], "src")["s"][0].as_py() and six["l"] == rows([6])["l"][0].as_py()
    t.optimize(mode="full")
    assert sorted_rows(IndexedTable.for_path(path).to_arrow()) == want == duck(path)


def test_a_merge_matches_duckdbs_merge(tmp_path):
    """A MERGE that updates rows carrying nested values (whole columns set from the source),
    deletes some and inserts others: the table afterwards is DuckDB's MERGE of the same rows."""
    path = str(tmp_path / "t")
    first = rows(range(30))
    t = IndexedTable.create(path, first, index_columns=["id"], num_buckets=4)
    source = rows([2, 3, 4, 9, 10, 77, 78], "src")
    t.merge(source, "target.id = source.id").when_matched_delete("source.id = 9").when_matched_update(
        {"s": "source.s", "l": "source.l", "v": "concat(target.v, '+', source.s.b)"}, "target.s.inner.x < 2"
    ).when_not_matched_insert_all().execute()
    # Conditions and values read fields inside struct columns (Spark's `s.a`).
    t.delete("s.inner.x > 13")
    t.update({"v": "s.b", "l": "NULL"}, "s.a < 2 OR s.b IS NULL")
    con = duckdb.connect()
    con.register("first_rows", first)
    con.register("source_rows", source)
    con.execute("CREATE TABLE target AS SELECT * FROM first_rows")
    con.execute("MERGE INTO target AS t USING source_rows AS s ON t.id = s.id "
                "WHEN MATCHED AND s.id = 9 THEN DELETE "
                "WHEN MATCHED AND t.s.inner.x < 2 THEN UPDATE SET s = s.s, l = s.l, v = concat(t.v, '+', s.s.b) "
                "WHEN NOT MATCHED THEN INSERT *")
    con.execute("DELETE FROM target WHERE s.inner.x > 13")
    con.execute("UPDATE target SET v = s.b, l = NULL WHERE s.a < 2 OR s.b IS NULL")
    want = sorted_rows(con.execute("SELECT * FROM target").to_arrow_table())
    assert sorted_rows(IndexedTable.for_path(path).to_arrow()) == want == duck(path) == delta_rs(path)
    assert sorted_rows(IndexedTable.for_path(path).lookup([2, 9, 77])) == [r for r in want if r["id"] in (2, 9, 77)]


def test_appends_check_the_nested_shape(tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(range(5)), index_columns=["id"], num_buckets=2)
    # Other Arrow spellings of the same types are accepted: large lists, list field names,
    # nanosecond timestamps inside a struct, non-null fields where the table allows NULL.
    spelled = rows(range(5, 8)).cast(pa.schema([
        SCHEMA.field("id"), SCHEMA.field("v"),
        pa.field("s", pa.struct([("a", pa.int64()), ("b", pa.large_string()),
                                 ("inner", pa.struct([("x", pa.float64()), ("ts", pa.timestamp("ns", tz="UTC"))]))])),
        pa.field("l", pa.large_list(pa.field("item", pa.int32()))),
        SCHEMA.field("m"), SCHEMA.field("ls"), SCHEMA.field("ms")]))
    t.append(spelled)
    assert sorted_rows(IndexedTable.for_path(path).to_arrow()) == sorted_rows(rows(range(8))) == duck(path)
    # A struct with another field is a type change, unless the write evolves the schema:
    # then the struct gains the field at its end (Delta's mergeSchema), and the fields the
    # data lacks are NULL in its rows.
    other = rows([9]).set_column(2, "s", pa.array([{"a": 1, "c": "x"}], pa.struct([("a", pa.int64()), ("c", pa.string())])))
    with pytest.raises((TypeChangeError, indexeddf.errors.SchemaMismatchError), match="struct<a:long,b:string"):
        t.append(other)
    retyped = rows([9]).set_column(2, "s", pa.array([{"a": "one"}], pa.struct([("a", pa.string())])))
    with pytest.raises(TypeChangeError, match="struct<a:long,b:string"):
        t.append(retyped, schema_mode="merge")  # a field's type changes: refused
    t.append(other, schema_mode="merge")
    assert [f.name for f in IndexedTable.for_path(path).schema.field("s").type] == ["a", "b", "inner", "c"]
    got = {r["id"]: r["s"] for r in IndexedTable.for_path(path).to_arrow().to_pylist()}
    assert got[9] == {"a": 1, "b": None, "inner": None, "c": "x"} and got[0]["c"] is None
    assert sorted_rows(IndexedTable.for_path(path).to_arrow()) == duck(path)
    assert {r["id"]: r["s"] for r in IndexedTable.for_path(path).lookup([0, 9]).to_pylist()} == \
        {0: got[0], 9: got[9]}
    # schema_mode="merge" adds a new nested column; old rows read it as NULL.
    more = rows([20]).append_column("extra", pa.array([[1.5]], pa.list_(pa.float64())))
    t.append(more, schema_mode="merge")
    got = {r["id"]: r for r in IndexedTable.for_path(path).to_arrow().to_pylist()}
    assert got[20]["extra"] == [1.5] and got[0]["extra"] is None
    old = duckdb_delta().execute(f"SELECT id FROM delta_scan('{path}') WHERE extra IS NULL ORDER BY id").fetchall()
    assert old == [(i,) for i in [*range(8), 9]]
    # ADD COLUMNS takes a nested type too (an Arrow type or the type's Delta JSON).
    t.add_columns([("tags", pa.map_(pa.string(), pa.list_(pa.string())))])
    assert IndexedTable.for_path(path).schema.field("tags").type == pa.map_(pa.string(), pa.list_(pa.field(
        "element", pa.string())))


def test_a_nested_index_column_is_refused(tmp_path):
    path = str(tmp_path / "t")
    for column in ("s", "l", "m"):
        with pytest.raises(NestedIndexColumnError, match=f"'{column}' is (struct|array|map)<") as e:
            IndexedTable.create(path, rows(range(3)), index_columns=["id", column])
        assert e.value.columns == [column]
    assert not os.path.exists(os.path.join(path, "_delta_log"))
    t = IndexedTable.create(path, rows(range(3)), index_columns=["id"])
    with pytest.raises(NestedIndexColumnError, match="'ls' is array<struct<q:long,tags:array<string>>>"):
        t.create_index("by_ls", ["ls"])
    other = str(tmp_path / "rs")
    deltalake.write_deltalake(other, rows(range(3)))
    with pytest.raises(NestedIndexColumnError):
        IndexedTable.convert(other, index_columns=["ms"])
    assert deltalake.DeltaTable(other).version() == 0


# -- Delta tables delta-rs wrote, converted ------------------------------------------------------


@pytest.fixture
def converted(tmp_path):
    """A nested delta-rs table (Parquet lists named ``item``, a map's entries named after the
    column, nested statistics), converted, then appended to by delta-rs and by indexeddf."""
    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, rows(range(50)))
    deltalake.write_deltalake(path, rows(range(50, 60), "two"), mode="append")
    IndexedTable.convert(path, index_columns=["id"], num_buckets=4,
                         properties={"indexeddf.hybridScan.maxAppendedRatio": "0.9"})
    deltalake.write_deltalake(path, rows(range(60, 70), "late"), mode="append")
    IndexedTable.for_path(path).append(rows(range(70, 75), "ours"))
    return path


def test_a_converted_delta_rs_table_reads_like_duckdb(converted):
    t = IndexedTable.for_path(converted)
    stats = [a.stats for a in t.snapshot.live_files() if a.bucket is None]
    # delta-rs's statistics of a struct column are objects per leaf: kept as read.
    assert stats and all(s.numRecords and isinstance(s.nullCount["s"], dict) for s in stats)
    assert all(isinstance(s.minValues["s"]["inner"], dict) for s in stats)
    want = duck(converted)
    assert len(want) == 75
    assert t.to_arrow().schema == SCHEMA
    assert sorted_rows(t.to_arrow()) == want == delta_rs(converted)
    probes = [0, 3, 17, 55, 61, 68, 72, 999]
    from indexeddf.optimizer.planner import plan_keys

    plan = plan_keys(t.snapshot, probes)
    assert plan.why_not is None and plan.scanned_files  # the index answers, with a hybrid scan
    assert sorted_rows(t.lookup(probes)) == duck(converted, where_ids(probes))
    t.update({"v": "'x'"}, "id = 3")
    t.merge(rows([17, 61, 80], "m"), "target.id = source.id").when_matched_update_all() \
        .when_not_matched_insert_all().execute()
    t = IndexedTable.for_path(converted)
    want = duck(converted)
    assert sorted_rows(t.to_arrow()) == want == delta_rs(converted)
    assert sorted_rows(t.lookup(probes + [80])) == duck(converted, where_ids(probes + [80]))
    from indexeddf.format.checkpoint import write_checkpoint

    write_checkpoint(t.snapshot.storage, IndexedTable.for_path(converted).snapshot)
    t = IndexedTable.for_path(converted)
    assert sorted_rows(t.to_arrow()) == want == duck(converted) == delta_rs(converted)
    assert any(isinstance(a.stats.nullCount.get("s"), dict) for a in t.snapshot.live_files())  # through the checkpoint
    t.optimize(mode="full")
    assert sorted_rows(IndexedTable.for_path(converted).to_arrow()) == want == duck(converted) == delta_rs(converted)


# -- Spark ------------------------------------------------------------------------------------------


def spark_rows(df, columns=SCHEMA.names) -> list[dict]:
    """A Spark DataFrame's rows in :func:`sorted_rows` form (maps as lists of pairs, Rows as dicts)."""
    def plain(v):
        if hasattr(v, "asDict"):
            return {k: plain(x) for k, x in v.asDict().items()}
        if isinstance(v, dict):
            return [(k, plain(x)) for k, x in v.items()]
        if isinstance(v, list):
            return [plain(x) for x in v]
        if isinstance(v, dt.datetime):
            return v.replace(tzinfo=UTC)  # the session's time zone is UTC
        return v

    return sorted(({c: plain(r[c]) for c in columns} for r in df.collect()), key=lambda r: r["id"])


def unordered_maps(rows_: list[dict]) -> list[dict]:
    """Rows with map values as sorted pair lists (Spark's maps keep no order)."""
    def fix(v):
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, list) and v and all(isinstance(p, tuple) and len(p) == 2 for p in v):
            return sorted((k, fix(x)) for k, x in v)
        if isinstance(v, list):
            return [fix(x) for x in v]
        return v

    return [fix(r) for r in rows_]


@pytest.mark.spark
def test_the_connector_reads_nested_columns_on_every_path(spark, converted, conf):
    df = read(spark, converted)
    schema = json.loads(df.schema.json())
    assert [f["type"]["type"] for f in schema["fields"][2:]] == ["struct", "array", "map", "array", "map"]
    meta = IndexedTable.for_path(converted).snapshot.metadata
    # The connector's schema, serialized by the JVM's Spark, is the log's JSON exactly.
    assert df._jdf.schema().json() == schema_string(meta.schema_)
    want = duck(converted)
    assert unordered_maps(spark_rows(df)) == unordered_maps(want)
    assert unordered_maps(spark_rows(df.where("s.a > 40 AND size(l) > 1"))) == \
        unordered_maps(duck(converted, "s.a > 40 AND len(l) > 1"))
    for where in ("id IN (0, 3, 55, 61, 72, 999)", "id = 17"):  # driver lookups
        q = df.where(where)
        assert "LocalTableScan" in physical(q), physical(q)
        assert unordered_maps(spark_rows(q)) == unordered_maps(duck(converted, where)), where
    conf("spark.indexeddf.driverLookup.maxKeys", "2")
    conf("spark.indexeddf.lookup.maxReadFraction", "1.0")
    q = df.where("id IN (1, 5, 62, 71)")
    assert "ProbeRDD" in lineage(q)
    assert unordered_maps(spark_rows(q)) == unordered_maps(duck(converted, "id IN (1, 5, 62, 71)"))
    conf("spark.indexeddf.driverLookup.maxKeys", "1000")
    conf("spark.indexeddf.driverLookup.maxRows", "1")
    q = df.where("id IN (2, 6, 63, 73)")
    assert "LookupRDD" in lineage(q)
    assert unordered_maps(spark_rows(q)) == unordered_maps(duck(converted, "id IN (2, 6, 63, 73)"))
    probe = spark.createDataFrame([(k,) for k in (1, 2, 61)], "id bigint")
    assert unordered_maps(spark_rows(df.join(probe, "id"))) == unordered_maps(duck(converted, "id IN (1, 2, 61)"))
    t = IndexedTable.for_path(converted)
    for strategy in ("shuffle", "broadcast"):  # the Python API's joins: the index's rows and the unindexed files
        got = t.join(spark.createDataFrame([(k,) for k in (4, 66)], "id bigint"), on="id", strategy=strategy)
        assert unordered_maps(spark_rows(got)) == unordered_maps(duck(converted, "id IN (4, 66)")), strategy
    for bucketed in (False, True):
        assert unordered_maps(spark_rows(t.to_df(spark, bucketed=bucketed))) == unordered_maps(want)
    indexeddf.register(spark)
    assert unordered_maps(spark_rows(spark.read.format("indexeddf_python").load(converted))) == unordered_maps(want)


@pytest.mark.spark
def test_a_struct_gains_fields_through_spark_and_every_reader_agrees(spark, tmp_path):
    """mergeSchema adds a struct's new fields at its end (in a struct, a list of structs and
    a map's struct values); the connector's scans and driver lookups, to_arrow, lookup,
    delta-rs and DuckDB's delta extension read the old rows' new fields as NULL alike."""
    indexeddf.register(spark)
    path = str(tmp_path / "t")
    one = "id bigint, s struct<a:bigint>, l array<struct<a:bigint>>, m map<string,struct<a:bigint>>"
    two = "id bigint, s struct<a:bigint,b:string>, l array<struct<a:bigint,b:string>>, " \
          "m map<string,struct<a:bigint,b:string>>"
    spark.createDataFrame([(1, (1,), [(1,)], {"x": (1,)}), (2, None, [], {})], one) \
        .write.format("indexeddf").option("indexColumns", "id").option("numBuckets", "2").save(path)
    spark.createDataFrame([(3, (3, "c"), [(3, "c")], {"y": (3, "c")})], two) \
        .write.format("indexeddf").mode("append").option("mergeSchema", "true").save(path)
    t = IndexedTable.for_path(path)
    assert str(t.schema.field("m").type) == "map<string, struct<a: int64, b: string>>"

    def plain(rows):  # maps as dicts, whatever each reader returns them as
        return sorted(({**r, "m": dict(r["m"]) if r["m"] is not None else None} for r in rows), key=lambda r: r["id"])
    want = plain(t.to_arrow().to_pylist())
    assert want[0] == {"id": 1, "s": {"a": 1, "b": None}, "l": [{"a": 1, "b": None}], "m": {"x": {"a": 1, "b": None}}}
    assert plain(duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}')").to_arrow_table().to_pylist()) == want
    assert plain(deltalake.DeltaTable(path).to_pyarrow_table().to_pylist()) == want
    assert plain(t.lookup([1, 3]).to_pylist()) == [want[0], want[2]]
    got = [r.asDict(recursive=True) for r in spark.read.format("indexeddf").load(path).collect()]
    assert plain(got) == want
    one_row = [r.asDict(recursive=True) for r in spark.read.format("indexeddf").load(path).where("id = 1").collect()]
    assert plain(one_row) == [want[0]]


@pytest.mark.spark
def test_spark_writes_and_changes_nested_columns(spark, tmp_path):
    indexeddf.register(spark)  # Spark writes go through the Python data source
    path = str(tmp_path / "t")
    df = spark.createDataFrame(rows(range(20)))
    df.write.format("indexeddf").option("indexColumns", "id").option("numBuckets", "2").save(path)
    spark.createDataFrame(rows(range(20, 30), "app")).write.format("indexeddf").mode("append").save(path)
    t = IndexedTable.for_path(path)
    assert t.schema == SCHEMA
    want = duck(path)
    assert sorted_rows(t.to_arrow()) == want == delta_rs(path) and len(want) == 30
    assert unordered_maps(spark_rows(read(spark, path))) == unordered_maps(want)
    with pytest.raises(Exception, match="NestedIndexColumnError"):
        df.write.format("indexeddf").option("indexColumns", "s").save(str(tmp_path / "refused"))
    # Spark SQL's MERGE: matched rows take the source's nested values, new rows are inserted.
    source = rows([3, 4, 40], "sql")
    spark.createDataFrame(source).createOrReplaceTempView("nested_source")
    spark.sql(f"MERGE INTO indexeddf.`{path}` AS t USING nested_source AS s ON t.id = s.id "
              "WHEN MATCHED THEN UPDATE SET t.s = s.s, t.m = s.m WHEN NOT MATCHED THEN INSERT *")
    spark.sql(f"UPDATE indexeddf.`{path}` SET l = NULL, v = 'u' WHERE id = 5")
    spark.sql(f"DELETE FROM indexeddf.`{path}` WHERE s.inner.x > 12 OR s.b = 'app25'")
    spark.sql(f"UPDATE indexeddf.`{path}` SET v = s.b WHERE s.a < 2")
    con = duckdb.connect()
    con.register("first_rows", IndexedTable.for_path(path, version=1).to_arrow())
    con.register("source_rows", source)
    con.execute("CREATE TABLE target AS SELECT * FROM first_rows")
    con.execute("MERGE INTO target AS t USING source_rows AS s ON t.id = s.id "
                "WHEN MATCHED THEN UPDATE SET s = s.s, m = s.m WHEN NOT MATCHED THEN INSERT *")
    con.execute("UPDATE target SET l = NULL, v = 'u' WHERE id = 5")
    con.execute("DELETE FROM target WHERE s.inner.x > 12 OR s.b = 'app25'")
    con.execute("UPDATE target SET v = s.b WHERE s.a < 2")
    want = sorted_rows(con.execute("SELECT * FROM target").to_arrow_table())
    assert sorted_rows(IndexedTable.for_path(path).to_arrow()) == want == duck(path) == delta_rs(path)
    # IndexedTable.merge with a Spark DataFrame source (staged by bucket) carries nested values too.
    more = rows([6, 7, 41], "df")
    IndexedTable.for_path(path).merge(spark.createDataFrame(more), "target.id = source.id") \
        .when_matched_update_all().when_not_matched_insert_all().execute()
    con.register("more_rows", more)
    con.execute("MERGE INTO target AS t USING more_rows AS s ON t.id = s.id "
                "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    want = sorted_rows(con.execute("SELECT * FROM target").to_arrow_table())
    assert sorted_rows(IndexedTable.for_path(path).to_arrow()) == want == duck(path) == delta_rs(path)


@pytest.mark.spark
def test_sql_tables_with_nested_columns(spark, tmp_path):
    """CREATE TABLE with nested columns, INSERT of nested values, ALTER TABLE ADD COLUMNS of a
    nested type: the log holds the types Spark declared, and DuckDB reads the rows."""
    indexeddf.register(spark)
    path = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE nested_sql (id bigint, s struct<a: int, tags: array<string>>, m map<string, date>) "
              f"USING indexeddf OPTIONS (indexColumns 'id', numBuckets 2) LOCATION '{path}'")
    try:
        spark.sql("INSERT INTO nested_sql VALUES (1, named_struct('a', 5, 'tags', array('x', null)), "
                  "map('d', date'2024-02-03')), (2, null, map())")
        spark.sql("ALTER TABLE nested_sql ADD COLUMNS (pts array<struct<x: double, y: double>>)")
        spark.sql("INSERT INTO nested_sql VALUES (3, named_struct('a', 6, 'tags', array()), null, "
                  "array(named_struct('x', 1.5D, 'y', -2D)))")
        t = IndexedTable.for_path(path)
        assert [display(f.type) for f in t.snapshot.metadata.schema_] == [
            "long", "struct<a:integer,tags:array<string>>", "map<string,date>", "array<struct<x:double,y:double>>"]
        want = duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}') ORDER BY id").to_arrow_table().to_pylist()
        assert t.to_arrow().sort_by("id").to_pylist() == want
        assert want[0]["s"] == {"a": 5, "tags": ["x", None]} and want[2]["pts"] == [{"x": 1.5, "y": -2.0}]
        got = spark.sql("SELECT s.a, m['d'] AS d, pts[0].y AS y FROM nested_sql WHERE id IN (1, 3) ORDER BY id")
        assert [tuple(r) for r in got.collect()] == [(5, dt.date(2024, 2, 3), None), (6, None, -2.0)]
    finally:
        spark.sql("DROP TABLE IF EXISTS nested_sql")


def delta_log_around(path: str, schema_json: str, files: list[str]) -> None:
    """Version 0 of a Delta table holding Parquet ``files`` (relative to ``path``) that
    another engine wrote: what Spark's Delta writer commits around its files."""
    os.makedirs(os.path.join(path, "_delta_log"))
    lines = [{"commitInfo": {"timestamp": 1_700_000_000_000, "operation": "WRITE"}},
             {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
             {"metaData": {"id": "spark-written", "format": {"provider": "parquet", "options": {}},
                           "schemaString": schema_json, "partitionColumns": [], "configuration": {},
                           "createdTime": 1_700_000_000_000}}]
    for name in files:
        size = os.path.getsize(os.path.join(path, name))
        lines.append({"add": {"path": name, "partitionValues": {}, "size": size, "modificationTime": 1_700_000_000_000,
                              "dataChange": True}})
    with open(os.path.join(path, "_delta_log", f"{0:020d}.json"), "x") as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines))


@pytest.mark.spark
def test_files_spark_wrote_in_every_nested_layout(spark, tmp_path, conf):
    """Spark's own Parquet writer: INT96 timestamps and fixed-length decimals inside a
    struct, standard 3-level lists and maps, and the legacy layout (``writeLegacyFormat``:
    2-level lists named ``bag``/``array``). Converted, every path reads what Spark's own
    Parquet reader reads from the files, and what DuckDB's delta extension reads from the
    standard layout (it reads the legacy file's lists as NULL elements: no oracle there)."""
    path = str(tmp_path / "t")
    query = ("SELECT id, named_struct('a', cast(id AS int), 'ts', timestamp'2024-01-02 03:04:05.123456' + "
             "make_interval(0, 0, 0, 0, cast(id AS int)), 'dec', cast(id / 4 AS decimal(9, 2))) AS s, "
             "IF(id % 3 = 0, NULL, array(id, NULL)) AS l, map('k', id) AS m, "
             "array(named_struct('q', id, 'tags', array('t', NULL))) AS ls FROM range({lo}, {hi})")
    files = []
    for i, legacy in enumerate(("false", "true")):
        conf("spark.sql.parquet.writeLegacyFormat", legacy)
        conf("spark.sql.parquet.outputTimestampType", "INT96")
        df = spark.sql(query.format(lo=i * 20, hi=i * 20 + 20))
        df.coalesce(1).write.parquet(os.path.join(path, f"w{i}"))
        files += [f"w{i}/{n}" for n in os.listdir(os.path.join(path, f"w{i}")) if n.endswith(".parquet")]
    columns = df.columns
    delta_log_around(path, df._jdf.schema().json(), files)
    spark_read = spark_rows(spark.read.schema(df.schema).parquet(*[os.path.join(path, f) for f in files]), columns)
    want = [{c: r[c] for c in columns} for r in
            duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}') ORDER BY id").to_arrow_table().to_pylist()]
    assert len(spark_read) == 40 and spark_read[:20] == want[:20]
    assert spark_read[22]["l"] == [22, None] and want[22]["l"] == [None, None]  # DuckDB's reading of the legacy lists
    assert spark_read[1]["s"]["ts"] == dt.datetime(2024, 1, 2, 4, 4, 5, 123456, tzinfo=UTC)  # INT96 in a struct

    def ours(t: pa.Table) -> list[dict]:
        return unordered_maps(t.sort_by("id").to_pylist())

    t = IndexedTable.convert(path, index_columns=["id"], num_buckets=2)
    assert ours(t.to_arrow()) == unordered_maps(spark_read)
    assert ours(t.lookup([0, 5, 21, 39])) == unordered_maps([r for r in spark_read if r["id"] in (0, 5, 21, 39)])
    got = spark_rows(read(spark, path).where("id IN (5, 21)"), columns)
    assert unordered_maps(got) == unordered_maps([r for r in spark_read if r["id"] in (5, 21)])
    t.optimize(mode="full")  # rewritten by indexeddf: the same rows, now DuckDB reads them all
    assert ours(IndexedTable.for_path(path).to_arrow()) == unordered_maps(spark_read)
    assert unordered_maps(duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}') ORDER BY id")
                          .to_arrow_table().to_pylist()) == unordered_maps(spark_read)


@pytest.mark.parametrize("vectors", ["false", "true"])
def test_a_merge_evolves_a_struct_or_refuses_to_drop_its_fields(tmp_path, vectors):
    """MERGE with schema_mode="merge" (UPDATE SET * / INSERT *) adds the source struct's new
    fields to the column; without it, a source struct with fields the column lacks is
    refused rather than cut (Arrow's cast would drop them), and nothing is committed."""
    path = str(tmp_path / "t")
    one, two = pa.struct([("a", pa.int64())]), pa.struct([("a", pa.int64()), ("b", pa.string())])
    t = IndexedTable.create(path, pa.table({"k": pa.array([1, 2], pa.int64()), "st": pa.array([{"a": 1}, {"a": 2}], one)}),
                            ["k"], num_buckets=2, properties={"delta.enableDeletionVectors": vectors})
    source = pa.table({"k": pa.array([2, 3], pa.int64()), "st": pa.array([{"a": 20, "b": "x"}, {"a": 30, "b": "y"}], two)})
    with pytest.raises(indexeddf.errors.SchemaMismatchError, match=r"struct fields the column lacks: \['b'\]"):
        t.merge(source, "t.k = s.k", "s", "t").when_matched_update_all().when_not_matched_insert_all().execute()
    assert t.update_incremental().version == 0
    t.merge(source, "t.k = s.k", "s", "t", schema_mode="merge").when_matched_update_all() \
        .when_not_matched_insert_all().execute()
    want = [(1, {"a": 1, "b": None}), (2, {"a": 20, "b": "x"}), (3, {"a": 30, "b": "y"})]
    assert [(r["k"], r["st"]) for r in IndexedTable.for_path(path).to_arrow().sort_by("k").to_pylist()] == want
    assert duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}') ORDER BY k").fetchall() == want
    assert [(r["k"], r["st"]) for r in IndexedTable.for_path(path).lookup([1, 2]).sort_by("k").to_pylist()] == want[:2]
