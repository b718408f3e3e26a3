"""The corpus of Delta tables other engines write, built at test time (cheap: small tables).

delta-rs (``write_deltalake`` and its table operations) writes partitioned, nested, evolved,
checkpointed, time-zoned, decimal, deleted-from, updated and merged tables;
``foreign_logs.py`` adds the tables whose log is written by hand (files the way Spark
writes them, column mapping, features indexeddf refuses), and deletion vectors come from
``dv_helpers.py``. :data:`CORPUS` names every case; ``tests/test_foreign_corpus.py``
converts a copy of each and reads it on every path against DuckDB's delta extension.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os

import deltalake
import pyarrow as pa
from deltalake import ColumnProperties, WriterProperties
from dv_helpers import file_rows, mark_deleted
from foreign_logs import HAND_WRITTEN, T0, UTC, Case, Of

from indexeddf.errors import NestedIndexColumnError

STRINGS = ["a/b", "x=y", None, "sp ace", "pct%41", "é#?:", "Z"]
"""Strings Delta escapes in partition folders (``%41`` must stay as it is) and NULL."""


def rows(ids, tag: str = "r") -> pa.Table:
    """The plain columns of the corpus: ``id`` (unique), a string, a date, a UTC timestamp,
    an int with NULLs, a double with NaN, a decimal, a value."""
    ids = list(ids)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "s": pa.array([STRINGS[i % len(STRINGS)] for i in ids], pa.string()),
        "d": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 4) for i in ids], pa.date32()),
        "t": pa.array([None if i % 11 == 0 else T0 + dt.timedelta(hours=i % 5) for i in ids], pa.timestamp("us", "UTC")),
        "n": pa.array([None if i % 5 == 0 else i % 3 for i in ids], pa.int32()),
        "x": pa.array([float("nan") if i % 13 == 0 else i / 4 for i in ids], pa.float64()),
        "m": pa.array([decimal.Decimal(i * 101) / 100 for i in ids], pa.decimal128(10, 2)),
        "v": pa.array([f"{tag}{i}" for i in ids], pa.string()),
    })


def write(path: str, data: pa.Table, **kw) -> None:
    deltalake.write_deltalake(path, data, **kw)


def appended(path: str, chunks: list[pa.Table], **kw) -> None:
    """One write per chunk: create, then appends."""
    for i, c in enumerate(chunks):
        write(path, c, mode="append" if i else "error", **kw)


def three(tag="r") -> list[pa.Table]:
    return [rows(range(0, 40), tag), rows(range(40, 70), tag), rows(range(70, 80), tag)]


# -- partitioned ------------------------------------------------------------------------------------
def part_date(path):
    appended(path, three(), partition_by=["d"])


def part_string(path):
    appended(path, three(), partition_by=["s"])


def part_int(path):
    appended(path, three(), partition_by=["n"])


def part_timestamp(path):
    appended(path, three(), partition_by=["t"])


def part_multi(path):
    appended(path, three(), partition_by=["d", "s", "n"])


def part_replace_where(path):
    """A partition overwritten by a predicate (delta-rs's ``replaceWhere``)."""
    appended(path, three(), partition_by=["d"])
    write(path, rows(range(200, 210), "new").set_column(2, "d", pa.array([dt.date(2024, 1, 2)] * 10)),
          mode="overwrite", predicate="d = '2024-01-02'", partition_by=["d"])


# -- nested -----------------------------------------------------------------------------------------
POINT = pa.struct([("x", pa.float64()), ("tags", pa.list_(pa.string())),
                   ("at", pa.struct([("when", pa.timestamp("us", "UTC")), ("n", pa.int32())]))])


def nested_rows(ids, tag="r") -> pa.Table:
    ids = list(ids)
    base = rows(ids, tag).select(["id", "s", "d"])
    return base.append_column("p", pa.array([None if i % 9 == 0 else {
        "x": i / 2, "tags": None if i % 4 == 0 else [f"t{j}" for j in range(i % 3)],
        "at": {"when": T0 + dt.timedelta(days=i), "n": None if i % 6 == 0 else i}} for i in ids], POINT)) \
        .append_column("a", pa.array([None if i % 10 == 0 else list(range(i % 4)) for i in ids], pa.list_(pa.int64()))) \
        .append_column("as_", pa.array([[{"k": f"k{i}", "v": None if i % 2 else i}] * (i % 3) for i in ids],
                                       pa.list_(pa.struct([("k", pa.string()), ("v", pa.int32())])))) \
        .append_column("mp", pa.array([None if i % 8 == 0 else [(f"a{j}", j * i) for j in range(i % 3)] for i in ids],
                                      pa.map_(pa.string(), pa.int64()))) \
        .append_column("ms", pa.array([[(i, {"y": f"y{i}"})] for i in ids],
                                      pa.map_(pa.int32(), pa.struct([("y", pa.string())]))))


def nested(path):
    appended(path, [nested_rows(range(0, 30)), nested_rows(range(30, 50))])


def nested_partitioned(path):
    appended(path, [nested_rows(range(0, 30)), nested_rows(range(30, 50))], partition_by=["d"])


# -- evolved ----------------------------------------------------------------------------------------
def evolved(path):
    """Columns added by ``schema_mode="merge"`` appends: older files lack them."""
    base = rows(range(0, 30)).select(["id", "s", "v"])
    write(path, base)
    write(path, rows(range(30, 50)).select(["id", "s", "v", "t"]), mode="append", schema_mode="merge")
    write(path, rows(range(50, 60)).select(["id", "v", "t", "m", "n"]), mode="append", schema_mode="merge")


def evolved_struct(path):
    """A struct that gains a field through a merge append."""
    s1 = pa.struct([("a", pa.int64())])
    s2 = pa.struct([("a", pa.int64()), ("b", pa.string())])
    write(path, pa.table({"id": pa.array(range(10), pa.int64()), "st": pa.array([{"a": i} for i in range(10)], s1)}))
    write(path, pa.table({"id": pa.array(range(10, 20), pa.int64()),
                          "st": pa.array([{"a": i, "b": f"b{i}"} for i in range(10, 20)], s2)}),
          mode="append", schema_mode="merge")


def evolved_partitioned(path):
    write(path, rows(range(0, 30)).select(["id", "d", "v"]), partition_by=["d"])
    write(path, rows(range(30, 50)).select(["id", "d", "v", "n"]), mode="append", schema_mode="merge",
          partition_by=["d"])


# -- checkpoints, operations --------------------------------------------------------------------------
def checkpointed(path, partition_by=None):
    appended(path, three(), partition_by=partition_by)
    deltalake.DeltaTable(path).delete("id % 7 = 3")
    deltalake.DeltaTable(path).create_checkpoint()
    write(path, rows(range(80, 90)), mode="append", partition_by=partition_by)


def checkpointed_partitioned(path):
    checkpointed(path, ["n"])


def checkpoint_only(path):
    """The commits before the checkpoint cleaned up: only the checkpoint knows the files."""
    checkpointed(path)
    log = os.path.join(path, "_delta_log")
    cp = json.load(open(os.path.join(log, "_last_checkpoint")))["version"]
    for n in os.listdir(log):
        if n.endswith(".json") and int(n[:20]) <= cp:
            os.remove(os.path.join(log, n))


def deleted(path):
    appended(path, three())
    deltalake.DeltaTable(path).delete("s IS NULL OR id > 75")


def deleted_all(path):
    write(path, rows(range(20)))
    deltalake.DeltaTable(path).delete()


def updated(path):
    appended(path, three(), partition_by=["n"])
    deltalake.DeltaTable(path).update(updates={"v": "concat(v, '-u')", "n": "7"}, predicate="id < 25")


def merged(path):
    appended(path, three())
    src = rows(range(60, 100), "m")
    (deltalake.DeltaTable(path).merge(src, "t.id = s.id", source_alias="s", target_alias="t")
     .when_matched_update_all().when_not_matched_insert_all().execute())


def optimized(path):
    appended(path, three() + [rows(range(80, 90))], partition_by=["d"])
    deltalake.DeltaTable(path).optimize.z_order(["id", "n"])


def restored(path):
    appended(path, three())
    deltalake.DeltaTable(path).delete("id < 50")
    deltalake.DeltaTable(path).restore(1)


def overwritten(path):
    appended(path, three())
    write(path, rows(range(500, 530), "o"), mode="overwrite")


def row_groups(path):
    """Small row groups, dictionary off, zstd: many row groups per file."""
    props = WriterProperties(max_row_group_size=7, compression="ZSTD",
                             default_column_properties=ColumnProperties(dictionary_enabled=False))
    appended(path, three(), writer_properties=props)


def empty(path):
    write(path, rows([]))


def with_deletion_vectors(path, partition_by=None, inline=False):
    """Another writer's deletion vectors on three files (every third row; every row of one
    file), then a second DELETE on top of the first ones."""
    appended(path, three(), partition_by=partition_by)
    files = deltalake.DeltaTable(path).file_uris()
    rel = sorted(os.path.relpath(f.removeprefix("file://"), path) for f in files)
    deleted = {p: [r for r in range(file_rows(path, p)) if r % 3 == 1] for p in rel[:2]}
    deleted[rel[2]] = list(range(file_rows(path, rel[2])))
    mark_deleted(path, deleted, inline=inline)
    mark_deleted(path, {rel[0]: [0]}, inline=inline)


def dv_inline(path):
    with_deletion_vectors(path, inline=True)


def dv_partitioned(path):
    with_deletion_vectors(path, ["d"])


# -- types ------------------------------------------------------------------------------------------
def typed(path):
    """Every primitive type, timestamps given in another zone, a local (ntz) timestamp."""
    n = 40
    write(path, pa.table({
        "i8": pa.array([None if i == 3 else i - 20 for i in range(n)], pa.int8()),
        "i16": pa.array([i * 300 for i in range(n)], pa.int16()),
        "f32": pa.array([i / 3 for i in range(n)], pa.float32()),
        "b": pa.array([None if i % 7 == 0 else i % 2 == 0 for i in range(n)]),
        "bin": pa.array([bytes([i, 255 - i]) if i % 6 else None for i in range(n)], pa.binary()),
        "tz": pa.array([dt.datetime(2024, 11, 3, 1, 30, tzinfo=dt.timezone(dt.timedelta(hours=-4))) + dt.timedelta(
            minutes=17 * i) for i in range(n)], pa.timestamp("us", "America/New_York")),
        "ntz": pa.array([dt.datetime(1900, 1, 1) + dt.timedelta(days=977 * i) for i in range(n)], pa.timestamp("us")),
        "big": pa.array([decimal.Decimal(10**30 + i) / 10**8 for i in range(n)], pa.decimal128(38, 8)),
        "d0": pa.array([decimal.Decimal(i - 5) for i in range(n)], pa.decimal128(5, 0)),
    }))


def odd_names(path):
    """Column names with spaces, non-ASCII letters and punctuation (no column mapping)."""
    n = 30
    write(path, pa.table({"the id": pa.array(range(n), pa.int64()), "größe": [f"g{i % 4}" for i in range(n)],
                          "a-b(c)": [i * 1.5 for i in range(n)]}), partition_by=["größe"])


def widened(path):
    """Files written before another engine widened ``k`` (int to long), ``f`` (float to
    double) and ``m`` (decimal(5,2) to decimal(10,4)), then a file of the new types."""
    from foreign_logs import add, commit, last_metadata, protocol

    old = pa.table({"k": pa.array(range(20), pa.int32()), "f": pa.array([i / 8 for i in range(20)], pa.float32()),
                    "m": pa.array([decimal.Decimal(i) / 4 for i in range(20)], pa.decimal128(5, 2))})
    write(path, old)
    meta = last_metadata(path)
    schema = json.loads(meta["schemaString"])
    for f, to in zip(schema["fields"], ["long", "double", "decimal(10,4)"]):
        f["metadata"] = {"delta.typeChanges": [{"fromType": f["type"], "toType": to}]}
        f["type"] = to
    features = ["typeWidening"]
    commit(path, [protocol(3, 7, features, features), {"metaData": {
        **meta, "schemaString": json.dumps(schema),
        "configuration": {**meta["configuration"], "delta.enableTypeWidening": "true"}}}], "CHANGE COLUMN")
    commit(path, [add(path, pa.table({"k": pa.array([2**40, 21], pa.int64()), "f": pa.array([0.1, None]),
                                      "m": pa.array([decimal.Decimal("123456.7891"), None], pa.decimal128(10, 4))}))])


def appended_typed(path):
    typed(path)
    write(path, pa.table(deltalake.DeltaTable(path).to_pyarrow_table()).slice(0, 5), mode="append")


def ts(hours: int) -> dt.datetime:
    return T0 + dt.timedelta(hours=hours)


ID_PROBES = [0, 1, 7, 13, 39, 40, 66, 79, 85, 95, -5, 10**6]
DELTA_RS = [
    Case("partitioned-by-date", part_date, ["id"], ID_PROBES),
    Case("partitioned-by-date-index-date", part_date, ["d"], [dt.date(2024, 1, 2), dt.date(2023, 1, 1)]),
    Case("partitioned-by-escaped-string", part_string, ["id"], ID_PROBES),
    Case("partitioned-by-string-index-string", part_string, ["s"], [None, "a/b", "pct%41", "é#?:", "nope"]),
    Case("partitioned-by-int-null", part_int, ["n"], [None, 0, 2, 9]),
    Case("partitioned-by-timestamp", part_timestamp, ["t"], [None, ts(0), ts(3), ts(99)]),
    Case("partitioned-by-three", part_multi, ["id"], ID_PROBES),
    Case("partitioned-composite-index", part_multi, ["d", "n"], [(dt.date(2024, 1, 2), 1), (dt.date(2024, 1, 1), None),
                                                                  (dt.date(2024, 1, 3), 7)]),
    Case("partition-replaced-where", part_replace_where, ["id"], [1, 5, 201, 209, 300]),
    Case("nested", nested, ["id"], [0, 8, 9, 10, 31, 49, 50]),
    Case("nested-partitioned", nested_partitioned, ["id"], [0, 8, 9, 10, 31, 49, 50]),
    Case("nested-index-refused", nested, ["p"], [], refused=(NestedIndexColumnError, "'p'")),
    Case("evolved-merge-appends", evolved, ["id"], [0, 29, 30, 49, 50, 59, 60]),
    Case("evolved-index-on-added-column", evolved, ["n"], [None, 1, 2, 9]),
    Case("evolved-struct-field", evolved_struct, ["id"], [0, 9, 10, 19, 20]),
    Case("evolved-partitioned", evolved_partitioned, ["id"], [0, 29, 30, 49, 50]),
    Case("checkpointed", checkpointed, ["id"], ID_PROBES),
    Case("checkpointed-partitioned", checkpointed_partitioned, ["n"], [None, 0, 1, 2]),
    Case("checkpoint-without-earlier-commits", checkpoint_only, ["id"], ID_PROBES),
    Case("deleted", deleted, ["id"], ID_PROBES),
    Case("deleted-everything", deleted_all, ["id"], [0, 5]),
    Case("updated-partitioned", updated, ["id"], ID_PROBES),
    Case("updated-index-on-updated-column", updated, ["n"], [None, 0, 7]),
    Case("merged", merged, ["id"], ID_PROBES),
    Case("z-ordered", optimized, ["id"], ID_PROBES),
    Case("restored", restored, ["id"], ID_PROBES),
    Case("overwritten", overwritten, ["id"], [0, 500, 529]),
    Case("small-row-groups", row_groups, ["id"], ID_PROBES),
    Case("timestamp-index", row_groups, ["t"], [None, ts(1), ts(4), ts(7)]),
    Case("double-index-nan", row_groups, ["x"], [float("nan"), 0.25, 19.75, -1.0], connector_xfail=(
        "x = NaN misses rows in Spark's own Parquet scan: delta-rs leaves NaN out of row-group min/max (as Parquet "
        "says to) and parquet-mr's statistics filter then skips those row groups (spark.read.parquet alone answers "
        "the same; spark.sql.parquet.filterPushdown=false answers right)")),
    Case("decimal-index", row_groups, ["m"], [decimal.Decimal("1.01"), decimal.Decimal("0.00"), decimal.Decimal("5")]),
    Case("empty", empty, ["id"], [0, 1]),
    Case("deletion-vectors", with_deletion_vectors, ["id"], ID_PROBES),
    Case("deletion-vectors-partitioned", dv_partitioned, ["id"], ID_PROBES),
    Case("deletion-vectors-inline", dv_inline, ["id"], ID_PROBES),
    Case("odd-column-names", odd_names, ["the id"], [0, 5, 29, 30]),
    Case("odd-column-names-index-partition", odd_names, ["größe"], ["g0", "g3", "g9"]),
    Case("type-widened", widened, ["k"], [0, 7, 19, 21, 2**40, 99]),
    Case("type-widened-decimal-index", widened, ["m"], [Of(0, 3, 2**40), decimal.Decimal("9")]),
    Case("types-index-ntz", typed, ["ntz"], [Of(0, 5), dt.datetime(1900, 1, 1), dt.datetime(1901, 1, 1)]),
    Case("types-index-zoned", appended_typed, ["tz"], [Of(0, 1, 39), dt.datetime(2024, 11, 3, 5, 30, tzinfo=UTC)]),
    Case("types-index-binary", typed, ["bin"], [Of(1, 5), None, b"\x00"]),
    Case("types-index-byte", appended_typed, ["i8"], [None, -20, 0, 19, 100]),
    Case("types-index-bool", typed, ["b"], [True, None]),
    Case("types-index-big-decimal", typed, ["big"], [Of(0, 39), decimal.Decimal(1)]),
    Case("change-data-feed", lambda p: (appended(p, three(), configuration={"delta.enableChangeDataFeed": "true"}),
                                        deltalake.DeltaTable(p).update(updates={"v": "'u'"}, predicate="id < 5")), ["id"],
         ID_PROBES),  # converted: indexeddf's changes write the feed (tests/test_change_data_feed.py)
    Case("check-constraint", lambda p: (appended(p, three()), deltalake.DeltaTable(p).alter.add_constraint(
        {"positive": "id >= 0"})), ["id"], ID_PROBES),  # converted: indexeddf's writes check it
    Case("append-only", lambda p: appended(p, three(), configuration={"delta.appendOnly": "true"}), ["id"], ID_PROBES),
    Case("column-mapping-name-delta-rs", lambda p: appended(p, three(), configuration={
        "delta.columnMapping.mode": "name"}), ["id"], ID_PROBES),
]

CORPUS = {c.name: c for c in DELTA_RS + HAND_WRITTEN}
"""Every table of the corpus by name."""
assert len(CORPUS) == len(DELTA_RS) + len(HAND_WRITTEN), "corpus names must be unique"
