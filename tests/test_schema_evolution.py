"""Schemas that grow, from Python: ``append/overwrite(..., schema_mode=...)`` and
``add_columns``, each one commit with a new ``metaData`` and no data rewritten; what is
refused (typed, before anything is written); the conflict rule of a schema change; and
delta-rs and DuckDB reading every version of an evolved table as indexeddf does."""

from __future__ import annotations

import json
import os
import warnings

import deltalake
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import duckdb_delta

from indexeddf import IndexedTable
from indexeddf.errors import (
    ColumnCaseConflictError,
    ConcurrentModificationError,
    ConcurrentSchemaChangeError,
    IndexColumnChangeError,
    InvalidOptionError,
    MetadataChangedError,
    SchemaEvolutionError,
    SchemaMismatchError,
    TypeChangeError,
)
from indexeddf.writer import operations


def base() -> pa.Table:
    return pa.table({"k": pa.array([1, 2, 3], pa.int64()), "b": pa.array([1, -2, 3], pa.int8()),
                     "s": ["a", "b", None]})


@pytest.fixture
def table(table_path) -> IndexedTable:
    return IndexedTable.create(table_path, base(), index_columns=["k"], num_buckets=4)


def data_files(path: str) -> set[str]:
    out = set()
    for folder, _, names in os.walk(os.path.join(path, "data")):
        out |= {os.path.relpath(os.path.join(folder, n), path) for n in names}
    return out


def commit_actions(path: str, version: int) -> list[dict]:
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as f:
        return [json.loads(line) for line in f if line.strip()]


def schema_json(path: str, version: int) -> dict:
    meta = next(a["metaData"] for a in commit_actions(path, version) if "metaData" in a)
    return json.loads(meta["schemaString"])


def rows(t: IndexedTable, version: int | None = None) -> list[dict]:
    return t.to_arrow(version=version).sort_by("k").to_pylist()


def test_append_with_merge_adds_columns_at_the_end_and_old_rows_read_null(table, table_path):
    before = data_files(table_path)
    v = table.append(pa.table({"x": ["new"], "k": pa.array([4], pa.int64())}), schema_mode="merge")
    assert table.schema.names == ["k", "b", "s", "x"]
    assert rows(table)[0] == {"k": 1, "b": 1, "s": "a", "x": None}
    assert rows(table)[3] == {"k": 4, "b": None, "s": None, "x": "new"}  # columns the data lacks are NULL
    # One commit: the metaData and the new file; the old files are untouched.
    actions = commit_actions(table_path, v)
    assert [next(iter(a)) for a in actions].count("metaData") == 1
    assert len(data_files(table_path) - before) == 1 and before <= data_files(table_path)
    assert table.history(1)[0].parameters.get("mergeSchema") is True
    # Lookups read the old file's missing column as NULL too, through the index.
    assert table.lookup([1, 4], columns=["k", "x"]).sort_by("k").to_pylist() == [
        {"k": 1, "x": None}, {"k": 4, "x": "new"}]
    # The version before the change keeps its schema.
    assert table.to_arrow(version=0).schema.names == ["k", "b", "s"]


def test_without_schema_mode_a_new_column_is_refused_and_nothing_is_written(table, table_path):
    before = data_files(table_path)
    with pytest.raises(SchemaMismatchError, match="schema_mode='merge'"):
        table.append(pa.table({"k": pa.array([4], pa.int64()), "b": pa.array([1], pa.int8()), "s": ["x"],
                               "x": [1]}))
    assert data_files(table_path) == before and table.update_incremental().version == 0


def test_merge_widens_byte_to_integer_and_narrower_data_fits(table, table_path):
    assert table.lookup([1, 2]).column("b").type == pa.int8()  # caches the old file's row groups as byte
    table.append(pa.table({"k": pa.array([4], pa.int64()), "b": pa.array([70_000], pa.int32())}),
                 schema_mode="merge")
    assert table.schema.field("b").type == pa.int32()
    assert schema_json(table_path, 1)["fields"][1]["type"] == "integer"
    assert [r["b"] for r in rows(table)] == [1, -2, 3, 70_000]  # the byte file read as integer
    # Lookups of the newest version read the cached file's rows as integer too.
    got = table.lookup([1, 2, 4]).sort_by("k")
    assert got.schema == table.schema and got.column("b").to_pylist() == [1, -2, 70_000]
    assert table.lookup([1], version=0).column("b").type == pa.int8()
    table.append(pa.table({"k": pa.array([5], pa.int64()), "b": pa.array([7], pa.int16())}), schema_mode="merge")
    assert table.schema.field("b").type == pa.int32() and table.version == 2  # no metaData: nothing changed
    assert "metaData" not in [next(iter(a)) for a in commit_actions(table_path, 2)]


@pytest.mark.parametrize("data, error, column", [
    (pa.table({"k": pa.array([4], pa.int64()), "b": pa.array([1], pa.int64())}), TypeChangeError, "b"),
    (pa.table({"k": pa.array([4], pa.int64()), "s": pa.array([1.5])}), TypeChangeError, "s"),
    (pa.table({"k": pa.array([4], pa.int32())}), TypeChangeError, "k"),  # an index column never changes
    (pa.table({"k": pa.array([4], pa.int64()), "S": ["x"]}), ColumnCaseConflictError, "S"),
    (pa.table({"k": pa.array([4], pa.int64()), "y": [1], "Y": [2]}), ColumnCaseConflictError, "Y"),
    (pa.table({"s": ["no key"]}), IndexColumnChangeError, "k"),
])
def test_merge_refusals_are_typed_and_write_nothing(table, table_path, data, error, column):
    before = data_files(table_path)
    with pytest.raises(error) as e:
        table.append(data, schema_mode="merge")
    assert column in e.value.columns
    assert isinstance(e.value, SchemaEvolutionError)
    assert data_files(table_path) == before and table.update_incremental().version == 0


def test_index_column_widening_is_refused(table_path):
    t = IndexedTable.create(table_path, pa.table({"k": pa.array([1], pa.int16())}), ["k"], 2)
    with pytest.raises(TypeChangeError, match="never for an index column"):
        t.append(pa.table({"k": pa.array([1], pa.int32())}), schema_mode="merge")


def test_overwrite_schema_modes(table, table_path):
    table.create_index("by_s", ["s"], num_buckets=2)
    v = table.overwrite(pa.table({"k": pa.array([9], pa.int64()), "n": [1.5], "s": ["z"]}), schema_mode="merge")
    assert table.schema.names == ["k", "b", "s", "n"]
    assert rows(table, v) == [{"k": 9, "b": None, "s": "z", "n": 1.5}]
    # overwrite replaces the schema; the bucketing column and every index's columns must stay.
    with pytest.raises(IndexColumnChangeError, match="by_s|'s'"):
        table.overwrite(pa.table({"k": pa.array([1], pa.int64())}), schema_mode="overwrite")
    table.drop_index("by_s")
    table.vacuum_index("by_s")
    v = table.overwrite(pa.table({"k": pa.array([1], pa.int64()), "s": pa.array([5], pa.int32())}),
                        schema_mode="overwrite")
    assert table.schema.names == ["k", "s"] and rows(table, v) == [{"k": 1, "s": 5}]
    with pytest.raises(IndexColumnChangeError):
        table.overwrite(pa.table({"j": [1]}), overwrite_schema=True)
    with pytest.raises(InvalidOptionError):
        table.append(base(), schema_mode="overwrite")  # delta-rs: overwrite mode only with overwrites
    with pytest.raises(InvalidOptionError):
        table.overwrite(base(), schema_mode="replace")


def test_add_columns_is_one_metadata_commit_with_comments(table, table_path):
    before = data_files(table_path)
    v = table.add_columns([("n", "long"), ("c", pa.string(), "the customer"),
                           pa.field("d", pa.decimal128(10, 2), metadata={"comment": "amount"})])
    actions = commit_actions(table_path, v)
    assert sorted(next(iter(a)) for a in actions) == ["commitInfo", "metaData"]
    assert data_files(table_path) == before
    fields = schema_json(table_path, v)["fields"]
    assert [(f["name"], f["type"], f["metadata"]) for f in fields[3:]] == [
        ("n", "long", {}), ("c", "string", {"comment": "the customer"}), ("d", "decimal(10,2)", {"comment": "amount"})]
    assert table.column_comments == {"c": "the customer", "d": "amount"}
    assert rows(table)[0] == {"k": 1, "b": 1, "s": "a", "n": None, "c": None, "d": None}
    # Comments survive the next metaData another change writes (a property change here).
    table.set_properties({"indexeddf.checkpointInterval": "1"})
    assert IndexedTable.for_path(table_path).column_comments == {"c": "the customer", "d": "amount"}
    # The new column takes data, and an index, at once; old rows are indexed as NULL.
    table.append(pa.table({"k": pa.array([4], pa.int64()), "b": pa.array([0], pa.int8()), "s": ["q"],
                           "n": pa.array([40], pa.int64()), "c": ["x"], "d": pa.array([None], pa.decimal128(10, 2))}))
    table.create_index("by_n", ["n"], num_buckets=2)
    assert table.lookup([40], index="by_n", columns=["k"]).to_pylist() == [{"k": 4}]
    assert sorted(table.lookup([None], index="by_n", columns=["k"]).column("k").to_pylist()) == [1, 2, 3]


@pytest.mark.parametrize("columns, error", [
    ([("s", "string")], SchemaEvolutionError),
    ([("S", "string")], ColumnCaseConflictError),
    ([("x", "long"), ("X", "long")], ColumnCaseConflictError),
    ([pa.field("x", pa.int64(), nullable=False)], SchemaEvolutionError),
    ([("x", "varchar")], SchemaMismatchError),
    ([("x", pa.list_(pa.duration("s")))], SchemaMismatchError),
    ([], InvalidOptionError),
    (("x", "long"), InvalidOptionError),
])
def test_add_columns_refusals(table, table_path, columns, error):
    with pytest.raises(error):
        table.add_columns(columns)
    assert table.update_incremental().version == 0


def test_a_schema_change_conflicts_with_a_concurrent_append_and_loses_nothing(table, table_path):
    """Delta's rule: a metadata change conflicts with concurrent transactions. The append
    that won stays; a write that evolves the schema fails with a typed error naming both
    versions, and its files are gone. A metadata-only ADD COLUMNS read no data: it rebases
    over the append (as in Delta), whose rows read the new column as NULL."""
    read = table.snapshot
    operations.append(read, base().select(["k", "b", "s"]))
    before = data_files(table_path)
    with pytest.raises(ConcurrentSchemaChangeError, match="version 0.*version 1") as e:
        operations.append(read, pa.table({"k": pa.array([7], pa.int64()), "y": ["y"]}), schema_mode="merge")
    assert isinstance(e.value, ConcurrentModificationError)
    assert data_files(table_path) == before
    assert table.update_incremental().version == 1 and table.schema.names == ["k", "b", "s"]
    assert operations.add_columns(read, [("x", "long")]).version == 2
    assert table.update_incremental().schema.names == ["k", "b", "s", "x"]
    want = [{"k": k, "b": b, "s": s, "x": None} for k, b, s in zip([1, 2, 3] * 2, [1, -2, 3] * 2, ["a", "b", None] * 2)]
    assert sorted(map(str, rows(table))) == sorted(map(str, want))
    # The other way round: an append that read the old schema loses to the schema change
    # (MetadataChangedError), and its retry on the new version lands.
    read = table.snapshot
    operations.add_columns(read, [("x2", "long")])
    with pytest.raises(MetadataChangedError):
        operations.append(read, base().append_column("x", pa.nulls(3, pa.int64())))
    table.update_incremental().append(base(), schema_mode="merge")
    assert len(rows(table)) == 9
    # Changes that are not data changes (an index creation) do not conflict with it.
    read = table.snapshot
    table.create_index("by_s", ["s"], num_buckets=2)
    assert operations.add_columns(read, [("z", "string")]).version == table.version + 1



def test_add_columns_does_not_rebase_over_a_file_holding_a_column_of_its_name(table, table_path):
    """A winner's file with a column outside the schema (a writer that ignored it) named as
    a column ADD COLUMNS adds: after the rebase, readers would take that file's values, of
    its own type, for the new column's; the rebase is refused, typed, naming both versions."""
    import pyarrow.parquet as pq

    read = table.snapshot
    result = operations.append(read, pa.table({"k": pa.array([9], pa.int64()), "b": pa.array([1], pa.int8()),
                                               "s": ["z"]}))
    added = [a for a in result.snapshot.live_files() if a.path not in {f.path for f in read.live_files()}]
    # What such a writer leaves: the same rows with one more physical column.
    full = os.path.join(table_path, added[0].path)
    pq.write_table(pq.read_table(full).append_column("X", pa.array([5], pa.int32())), full)
    with pytest.raises(ConcurrentSchemaChangeError, match="version 0.*version 1"):
        operations.add_columns(read, [("x", "string")])
    assert table.update_incremental().schema.names == ["k", "b", "s"]
    assert operations.add_columns(read, [("y", "string")]).version == 2  # another name rebases

# -- oracles: delta-rs and DuckDB read every version as indexeddf does ----------------------

NEW_TYPES = {"long": pa.int64(), "string": pa.string(), "double": pa.float64(), "date": pa.date32(),
             "short": pa.int16()}

evolutions = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 20), st.booleans(), st.booleans()),
        st.tuples(st.just("merge"), st.sampled_from(sorted(NEW_TYPES)), st.integers(1, 20)),
        st.tuples(st.just("widen"), st.integers(1, 20)),
        st.tuples(st.just("add_columns"), st.sampled_from(sorted(NEW_TYPES)), st.booleans()),
        st.tuples(st.just("overwrite_merge"), st.integers(0, 10)),
        st.tuples(st.just("optimize"),),
    ),
    min_size=1, max_size=8,
)


def _values(t: pa.DataType, n: int, start: int) -> pa.Array:
    import datetime as dt

    if t == pa.string():
        return pa.array([None if i % 3 == 0 else f"v{i}" for i in range(start, start + n)])
    if t == pa.date32():
        return pa.array([dt.date(2026, 1, 1) + dt.timedelta(days=i % 50) for i in range(start, start + n)])
    if t == pa.float64():
        return pa.array([i / 4 for i in range(start, start + n)])
    return pa.array([None if i % 5 == 0 else (i % 200) - 100 for i in range(start, start + n)], t)


def _batch(t: IndexedTable, n: int, start: int, drop_one: bool, narrow: bool) -> pa.Table:
    """Rows for every column of the table (one non-key column left out when ``drop_one``,
    integer columns written narrower when ``narrow``)."""
    cols = {}
    for f in t.schema:
        typ = f.type
        if narrow and typ in (pa.int32(), pa.int16()):
            typ = pa.int8()
        cols[f.name] = _values(typ, n, start) if f.name != "k" else pa.array(range(start, start + n), pa.int64())
    if drop_one and len(cols) > 2:
        del cols[list(cols)[-1]]
    return pa.table(cols)


def _evolve(t: IndexedTable, op, counter: list[int]) -> None:
    counter[0] += 1
    start = counter[0] * 100
    kind = op[0]
    if kind == "append":
        t.append(_batch(t, op[1], start, op[2], op[3]), schema_mode="merge" if (op[2] or op[3]) else None)
    elif kind == "merge":
        data = _batch(t, op[2], start, False, False)
        t.append(data.append_column(f"c{counter[0]}", _values(NEW_TYPES[op[1]], op[2], start)), schema_mode="merge")
    elif kind == "widen":
        # 'w' starts as byte; data with integer values widens it (when the table has it).
        data = _batch(t, op[1], start, False, False)
        if "w" in t.schema.names:
            data = data.set_column(data.schema.get_field_index("w"), "w",
                                   pa.array(range(70_000, 70_000 + op[1]), pa.int32()))
        t.append(data, schema_mode="merge")
    elif kind == "add_columns":
        t.add_columns([(f"a{counter[0]}", NEW_TYPES[op[1]], "note" if op[2] else None)[:3 if op[2] else 2]])
    elif kind == "overwrite_merge":
        t.overwrite(_batch(t, op[1], start, True, False), schema_mode="merge")
    elif kind == "optimize":
        t.optimize(mode="full")


def _canonical(table: pa.Table) -> list[str]:
    return sorted(repr(tuple(sorted(r.items()))) for r in table.to_pylist())


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(evolutions, st.integers(0, 2000))
def test_every_version_of_an_evolved_table_reads_alike_in_delta_rs_and_duckdb(tmp_path_factory, sequence, probe):
    path = str(tmp_path_factory.mktemp("evolve"))
    first = pa.table({"k": pa.array(range(30), pa.int64()), "w": _values(pa.int8(), 30, 0)})
    t = IndexedTable.create(path, first, index_columns=["k"], num_buckets=4)
    counter = [0]
    for op in sequence:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _evolve(t, op, counter)
    con = duckdb_delta()
    for v in range(t.version + 1):
        mine = IndexedTable.for_path(path, version=v)
        ours = mine.to_arrow()
        theirs = deltalake.DeltaTable(path, version=v).to_pyarrow_table()
        assert theirs.schema.names == ours.schema.names, f"version {v}"
        assert _canonical(theirs.cast(ours.schema)) == _canonical(ours), f"version {v}"
        keys = sorted({probe % 30, *(ours.column("k").to_pylist()[:3])})
        got = mine.lookup(keys)
        want = ours.filter(pa.compute.is_in(ours["k"], pa.array(keys, pa.int64())))
        assert _canonical(got) == _canonical(want), f"version {v}, lookup {keys}"
    newest = IndexedTable.for_path(path).to_arrow()
    duck = con.execute(f"SELECT * FROM delta_scan('{path}')").to_arrow_table()
    assert duck.schema.names == newest.schema.names
    assert _canonical(duck.cast(newest.schema)) == _canonical(newest)
