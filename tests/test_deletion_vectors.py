"""Delta deletion vectors (DVs): the codec, Z85, the descriptor, DV files, the log actions.

The bytes are checked against readers nobody here wrote: the examples of Delta's
PROTOCOL.md and delta-kernel-rs, and DuckDB's ``delta`` extension (delta-kernel-rs),
which must read a deltalake-written table whose files got DVs from our writer (several
in one file, with a random prefix, at an absolute path, inline) and return exactly the
rows minus the deleted ones.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import duckdb_delta
from pyroaring import BitMap64

from indexeddf import IndexedTable
from indexeddf.errors import CorruptDeletionVectorError, MissingFileError
from indexeddf.format import checkpoint as ckpt
from indexeddf.format.deletion_vectors import (
    INLINE_MAX_BYTES,
    inline_descriptor,
    keep_mask,
    read_deletion_vector,
    write_deletion_vectors,
)
from indexeddf.format.storage import TableStorage
from indexeddf.spec.actions import AddFile, FileStats, RemoveFile
from indexeddf.spec.deletion_vectors import (
    MAGIC_NUMBER,
    DeletionVectorDecodeError,
    DeletionVectorDescriptor,
    decode_uuid,
    deserialize,
    encode_uuid,
    serialize,
    z85_decode,
    z85_encode,
)
from indexeddf.spec.delta import decode_line, encode_action

# -- the codec ------------------------------------------------------------------------------

row_index = st.one_of(
    st.integers(0, 2**16),                                   # one container
    st.integers(2**32 - 3, 2**32 + 3),                        # across the first bucket key
    st.integers(0, 2**63 - 1),                                # anywhere a DV may point
)
runs = st.tuples(st.integers(0, 2**40), st.integers(1, 70_000)).map(lambda t: np.arange(t[0], t[0] + t[1], dtype=np.uint64))
row_sets = st.tuples(st.lists(row_index, max_size=200), st.lists(runs, max_size=3)).map(
    lambda t: np.concatenate([np.array(t[0], dtype=np.uint64), *t[1]]) if t[1] else np.array(t[0], dtype=np.uint64))


@settings(max_examples=150, deadline=None)
@given(row_sets)
def test_codec_round_trip(rows):
    data = serialize(rows)
    assert int.from_bytes(data[:4], "little") == MAGIC_NUMBER
    got = deserialize(data)
    assert got.dtype == np.uint64
    assert np.array_equal(got, np.unique(rows))
    assert serialize(BitMap64(rows)) == data  # a bitmap and an array of the same rows give the same bytes


def test_codec_edges():
    assert deserialize(serialize([])).size == 0
    assert deserialize(serialize(np.array([], dtype=np.int64))).size == 0
    dense = np.arange(3_000_000, dtype=np.uint64)
    data = serialize(dense)
    assert len(data) < 1_000  # run containers: ~14 bytes per 65536 rows, not a bit per row
    assert np.array_equal(deserialize(data), dense)
    top = np.array([0, 2**63 - 1], dtype=np.uint64)
    assert np.array_equal(deserialize(serialize(top)), top)
    assert list(deserialize(serialize([5, 5, 1]))) == [1, 5]


@pytest.mark.parametrize("bad, error", [
    ([-1], ValueError), ([2**63], ValueError), ([1.5], TypeError), ([2**70], TypeError),
])
def test_codec_refuses_what_a_dv_cannot_hold(bad, error):
    with pytest.raises(error):
        serialize(bad)


def test_deserialize_refuses_other_bytes():
    with pytest.raises(DeletionVectorDecodeError, match="magic"):
        deserialize(b"\0" * 16)
    native = (MAGIC_NUMBER - 1).to_bytes(4, "little") + b"\0" * 12
    with pytest.raises(DeletionVectorDecodeError, match="native"):
        deserialize(native)
    with pytest.raises(DeletionVectorDecodeError, match="buckets"):
        deserialize(MAGIC_NUMBER.to_bytes(4, "little") + (10**9).to_bytes(8, "little") + b"\0" * 8)
    with pytest.raises(DeletionVectorDecodeError):
        deserialize(serialize([1, 2, 3])[:-3])
    # A key with its top bit set (Java would read it negative).
    signed = MAGIC_NUMBER.to_bytes(4, "little") + BitMap64([2**63 + 1]).serialize()
    with pytest.raises(DeletionVectorDecodeError, match="most significant bit"):
        deserialize(signed)


# -- Z85 ------------------------------------------------------------------------------------


def test_z85_spec_example():
    # The example of the Z85 spec (rfc.zeromq.org/spec/32).
    raw = bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert z85_encode(raw) == "HelloWorld"
    assert z85_decode("HelloWorld") == raw


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_z85_round_trip(raw):
    text = z85_encode(raw)
    assert len(text) == (len(raw) + 3) // 4 * 5
    assert z85_decode(text, len(raw)) == raw


@settings(max_examples=50, deadline=None)
@given(st.uuids())
def test_uuid_round_trip(u):
    assert len(encode_uuid(u)) == 20
    assert decode_uuid(encode_uuid(u)) == u


@pytest.mark.parametrize("text", ["abcd", "abcd~", "abcdé", "%%%%%"])
def test_z85_refuses_bad_text(text):
    with pytest.raises(DeletionVectorDecodeError):
        z85_decode(text)


# -- the descriptor: Delta PROTOCOL.md's own examples ----------------------------------------


def test_protocol_example_relative_path_with_random_prefix():
    d = DeletionVectorDescriptor.model_validate(
        {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 4, "sizeInBytes": 40, "cardinality": 6})
    assert d.random_prefix == "ab"
    assert d.file_uuid == uuid.UUID("d2c639aa-8816-431a-aaf6-d3fe2512ff61")
    assert d.absolute_path("s3://mytable/") == "s3://mytable/ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    assert d.unique_id == "uab^-aqEH.-t@S}K{vb[*k^@4"
    assert DeletionVectorDescriptor.in_file(d.file_uuid, 4, 40, 6, prefix="ab") == d
    # delta-kernel-rs's example without a prefix.
    bare = d.model_copy(update={"pathOrInlineDv": "vBn[lx{q8@P<9BNH/isA", "offset": None})
    assert bare.relative_path == "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin"
    assert bare.unique_id == "uvBn[lx{q8@P<9BNH/isA" and bare.file_offset == 1


def test_protocol_example_absolute_path():
    path = "s3://mytable/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    d = DeletionVectorDescriptor(storageType="p", pathOrInlineDv=path, offset=4, sizeInBytes=40, cardinality=6)
    assert d.absolute_path("s3://elsewhere") == path
    assert d.unique_id == f"p{path}@4"


def test_inline_example():
    """PROTOCOL.md's inline example ("wi5b=0000...", 40 bytes, rows 3, 4, 7, 11, 18, 29)
    is not in the format the same document defines: its first 4 bytes, read little
    endian as the protocol says, are no magic number (they are Delta Spark's old native
    magic written big endian). delta-kernel-rs tests with a corrected payload of 44 bytes
    for the same rows; our encoder gives exactly that text."""
    kernel_rs = "^Bg9^0rr910000000000iXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"
    assert z85_encode(serialize([3, 4, 7, 11, 18, 29])) == kernel_rs
    d = inline_descriptor([29, 3, 4, 7, 11, 18])
    assert d.wire() == {"storageType": "i", "pathOrInlineDv": kernel_rs, "sizeInBytes": 44, "cardinality": 6}
    assert d.unique_id == "i" + kernel_rs
    assert list(read_deletion_vector(TableStorage("memory://unused"), d)) == [3, 4, 7, 11, 18, 29]
    protocol_md = DeletionVectorDescriptor(storageType="i", pathOrInlineDv="wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
                                           sizeInBytes=40, cardinality=6)
    with pytest.raises(CorruptDeletionVectorError, match="magic number"):
        read_deletion_vector(TableStorage("memory://unused"), protocol_md)


@pytest.mark.parametrize("body", [
    {"storageType": "i", "pathOrInlineDv": "HelloWorld", "offset": 1, "sizeInBytes": 8, "cardinality": 1},
    {"storageType": "u", "pathOrInlineDv": "short", "offset": 1, "sizeInBytes": 8, "cardinality": 1},
    {"storageType": "r", "pathOrInlineDv": "x.bin", "offset": 1, "sizeInBytes": 8, "cardinality": 1},
    {"storageType": "u", "pathOrInlineDv": "vBn[lx{q8@P<9BNH/isA", "offset": -1, "sizeInBytes": 8, "cardinality": 1},
])
def test_descriptor_refuses_what_the_protocol_does_not_allow(body):
    with pytest.raises(ValueError):
        DeletionVectorDescriptor.model_validate(body)


# -- the log actions ------------------------------------------------------------------------

FILE_DV = DeletionVectorDescriptor(storageType="u", pathOrInlineDv="ab^-aqEH.-t@S}K{vb[*k^", offset=4, sizeInBytes=40, cardinality=6)


def _add(dv):
    return AddFile(path="part-0.parquet", size=10, modificationTime=5, bucket=None, fileId=7,
                   stats=FileStats(numRecords=100), deletionVector=dv)


@pytest.mark.parametrize("dv", [None, FILE_DV, inline_descriptor([1, 2])])
def test_add_and_remove_carry_the_deletion_vector_on_the_wire(dv):
    remove = RemoveFile(path="part-0.parquet", deletionTimestamp=9, bucket=None, fileId=7, size=10, deletionVector=dv)
    for action, key in ((_add(dv), "add"), (remove, "remove")):
        line = encode_action(action)
        body = json.loads(line)[key]
        if dv is None:
            assert "deletionVector" not in body
        else:
            assert body["deletionVector"] == dv.wire()
            assert ("offset" in body["deletionVector"]) == (dv.storageType != "i")
        assert decode_line(line) == [action]


def test_decoding_ignores_fields_the_protocol_does_not_define():
    body = {"path": "p.parquet", "size": 1, "modificationTime": 1, "dataChange": True,
            "deletionVector": {**FILE_DV.wire(), "maxRowIndex": 99, "offset": None}}
    (add,) = decode_line(json.dumps({"add": body}))
    assert add.deletionVector == FILE_DV.model_copy(update={"offset": None})


def test_checkpoints_keep_deletion_vectors(tmp_path):
    storage = TableStorage(str(tmp_path))
    adds = [_add(FILE_DV), _add(None).model_copy(update={"path": "other.parquet", "fileId": 8})]
    remove = RemoveFile(path="gone.parquet", deletionTimestamp=9, bucket=None, fileId=9, size=1,
                        deletionVector=inline_descriptor([4]))
    rows = [{"add": ckpt._file_row(a)} for a in adds] + [{"remove": ckpt._file_row(remove)}]
    buf = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=ckpt._SCHEMA), buf)
    storage.write_bytes(ckpt.checkpoint_path(0), buf.getvalue().to_pybytes())
    storage.write_bytes(ckpt.index_state_path(0), b'{"version":0,"timestamp":0,"indexes":[]}')
    got = ckpt.read_checkpoint(storage, 0)
    assert [a for a in got if isinstance(a, AddFile)] == adds
    deferred = [d for d in got if isinstance(d, ckpt.DeferredRemoves)]
    assert deferred[0].by_path() == {"gone.parquet": (9, 1)}  # read from the columns, before any decoding
    assert [a for a in got if isinstance(a, RemoveFile)] + [r for d in deferred for r in d.decode()] == [remove]


@pytest.mark.parametrize("kind", ["add", "remove"])
def test_replay_reconciles_files_by_path_and_deletion_vector(table_path, kind):
    """A file action with a DV is read (tests/test_dv_reads.py checks every reader against
    DuckDB): an add's DV drops its rows; a remove naming a DV the live file does not have
    removes another logical file (Delta keys files by path and DV), so the live one stays."""
    t = IndexedTable.create(table_path, pa.table({"k": pa.array(range(10), pa.int64())}), index_columns=["k"], num_buckets=2)
    live = t.snapshot.live_files()[0]
    dv = inline_descriptor([0])
    action = live.model_copy(update={"deletionVector": dv}) if kind == "add" else \
        RemoveFile(path=live.path, deletionTimestamp=1, bucket=live.bucket, fileId=live.fileId, size=live.size, deletionVector=dv)
    info = {"commitInfo": {"timestamp": int(time.time() * 1000) + 1000, "operation": "DELETE"}}
    (Path(table_path) / "_delta_log" / f"{1:020d}.json").write_text(json.dumps(info) + "\n" + encode_action(action) + "\n")
    assert IndexedTable.for_path(table_path).to_arrow().num_rows == (9 if kind == "add" else 10)
    assert IndexedTable.for_path(table_path, version=0).to_arrow().num_rows == 10


# -- DV files -------------------------------------------------------------------------------


def test_one_file_holds_several_deletion_vectors(tmp_path):
    storage = TableStorage(str(tmp_path))
    sets = [np.array([0, 5, 2**33]), np.arange(1000, 90_000), np.array([], dtype=np.uint64), np.array([7])]
    ds = write_deletion_vectors(storage, sets)
    assert len({d.pathOrInlineDv for d in ds}) == 1 and [d.storageType for d in ds] == ["u"] * 4
    assert ds[0].offset == 1 and ds[1].offset == 1 + ds[0].sizeInBytes + 8
    assert [d.cardinality for d in ds] == [3, 89_000, 0, 1]
    assert os.listdir(tmp_path) == [ds[0].relative_path]
    raw = (tmp_path / ds[0].relative_path).read_bytes()
    assert raw[0] == 1 and len(raw) == 1 + sum(d.sizeInBytes + 8 for d in ds)
    for d, rows in zip(ds, sets):
        assert np.array_equal(read_deletion_vector(storage, d), np.unique(rows.astype(np.uint64)))


def test_inline_threshold_and_prefix(tmp_path):
    storage = TableStorage(str(tmp_path))
    small, large = [1, 2, 3], np.arange(0, 200_000, 3)
    ds = write_deletion_vectors(storage, [small, large], prefix="x7", inline_max_bytes=INLINE_MAX_BYTES)
    assert ds[0] == inline_descriptor(small) and ds[0].sizeInBytes <= INLINE_MAX_BYTES
    assert ds[1].storageType == "u" and ds[1].random_prefix == "x7" and ds[1].offset == 1
    assert (tmp_path / ds[1].relative_path).parent.name == "x7"
    # All inline: no file at all.
    assert [d.is_inline for d in write_deletion_vectors(TableStorage(str(tmp_path / "none")), [small], inline_max_bytes=10**6)] == [True]
    assert not (tmp_path / "none").exists()
    with pytest.raises(ValueError, match="prefix"):
        write_deletion_vectors(storage, [small], prefix="../up")


def test_absolute_path_dv(tmp_path):
    storage = TableStorage(str(tmp_path / "table"))
    (d,) = write_deletion_vectors(TableStorage(str(tmp_path / "elsewhere dir")), [[4, 40]])
    url = (tmp_path / "elsewhere dir" / d.relative_path).as_uri()  # a file: URI, percent-encoded
    p = DeletionVectorDescriptor(storageType="p", pathOrInlineDv=url, offset=d.offset, sizeInBytes=d.sizeInBytes,
                                 cardinality=d.cardinality)
    assert list(read_deletion_vector(storage, p)) == [4, 40]


def _corrupt_copy(tmp_path, name: str, edit) -> tuple[TableStorage, list[DeletionVectorDescriptor]]:
    storage = TableStorage(str(tmp_path / name))
    ds = write_deletion_vectors(storage, [[1, 2, 3], np.arange(10, 500)])
    path = tmp_path / name / ds[0].relative_path
    path.write_bytes(edit(bytearray(path.read_bytes()), ds))
    return storage, ds


def _flip(raw, at):
    raw[at] ^= 0xFF
    return bytes(raw)


@pytest.mark.parametrize("name, edit, which, message", [
    ("crc", lambda raw, ds: _flip(raw, ds[1].offset + 4 + ds[1].sizeInBytes - 1), 1, "CRC-32 mismatch"),
    ("stored-crc", lambda raw, ds: _flip(raw, ds[0].offset + 4 + ds[0].sizeInBytes), 0, "CRC-32 mismatch"),
    ("size", lambda raw, ds: _flip(raw, ds[1].offset + 3), 1, "the log says"),
    ("version", lambda raw, ds: _flip(raw, 0), 0, "format version"),
    ("truncated", lambda raw, ds: bytes(raw[:-2]), 1, "truncated"),
])
def test_damaged_files_raise_typed_errors(tmp_path, name, edit, which, message):
    storage, ds = _corrupt_copy(tmp_path, name, edit)
    with pytest.raises(CorruptDeletionVectorError, match=message) as e:
        read_deletion_vector(storage, ds[which])
    assert ds[which].relative_path in str(e.value) and e.value.path.endswith(ds[which].relative_path)
    assert "restore" in str(e.value)


def test_wrong_cardinality_and_missing_file(tmp_path):
    storage = TableStorage(str(tmp_path))
    (d,) = write_deletion_vectors(storage, [[1, 2, 3]])
    with pytest.raises(CorruptDeletionVectorError, match="cardinality says 4"):
        read_deletion_vector(storage, d.model_copy(update={"cardinality": 4}))
    with pytest.raises(CorruptDeletionVectorError, match="cardinality says 2"):
        read_deletion_vector(storage, inline_descriptor([1, 2, 3]).model_copy(update={"cardinality": 2}))
    bad_uuid = d.model_copy(update={"pathOrInlineDv": "~" * 20})
    with pytest.raises(CorruptDeletionVectorError, match="Z85"):
        read_deletion_vector(storage, bad_uuid)
    os.remove(tmp_path / d.relative_path)
    with pytest.raises(MissingFileError, match=d.relative_path):
        read_deletion_vector(storage, d)


def test_keep_mask():
    assert keep_mask(5, np.array([0, 3], dtype=np.uint64)).tolist() == [False, True, True, False, True]
    assert keep_mask(3, np.array([], dtype=np.uint64)).all()
    with pytest.raises(CorruptDeletionVectorError, match="row 5 of a data file of 5 rows"):
        keep_mask(5, np.array([5], dtype=np.uint64))


# -- an independent reader: DuckDB's delta extension (delta-kernel-rs) ----------------------


def _log_adds(log: Path) -> list[dict]:
    adds = []
    for commit in sorted(log.glob("*.json")):
        adds += [json.loads(line)["add"] for line in commit.read_text().splitlines() if '"add"' in line[:8]]
    return adds


def test_duckdb_reads_our_deletion_vectors(tmp_path):
    deltalake = pytest.importorskip("deltalake")
    path = tmp_path / "dv table"
    sizes = [70_000, 1_000, 5_000, 300, 2_000, 100]
    for i, n in enumerate(sizes):  # one Parquet file per write; k holds (file, ordinal)
        keys = pa.array(np.arange(n, dtype=np.int64) + i * 1_000_000)
        deltalake.write_deltalake(str(path), pa.table({"k": keys, "s": pa.array([f"r{k}" for k in keys.to_pylist()])}), mode="append")
    adds = _log_adds(path / "_delta_log")
    assert len(adds) == len(sizes)
    storage = TableStorage(str(path))
    deleted = [
        np.concatenate([np.arange(100, 66_000), [0, 69_999]]),  # runs across a container boundary
        np.array([1, 2, 3, 999]),
        np.arange(0, 5_000, 2),                                 # every other row
        np.array([7, 8, 9]),                                    # inline
        np.array([0, 1999]),                                    # file with a random prefix
        np.array([1, 2, 50]),                                   # absolute path, outside the table
    ]
    in_file = write_deletion_vectors(storage, deleted[:3])      # three DVs in one file
    assert len({d.pathOrInlineDv for d in in_file}) == 1 and len({d.offset for d in in_file}) == 3
    inline = inline_descriptor(deleted[3])
    (prefixed,) = write_deletion_vectors(storage, deleted[4:5], prefix="q1")
    (elsewhere,) = write_deletion_vectors(TableStorage(str(tmp_path / "other dir")), deleted[5:])
    absolute = DeletionVectorDescriptor(
        storageType="p", pathOrInlineDv=(tmp_path / "other dir" / elsewhere.relative_path).as_uri(),
        offset=elsewhere.offset, sizeInBytes=elsewhere.sizeInBytes, cardinality=elsewhere.cardinality)
    descriptors = [*in_file, inline, prefixed, absolute]
    now = int(time.time() * 1000)
    lines = [
        {"commitInfo": {"timestamp": now, "operation": "DELETE"}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                      "readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}},
    ]
    for add, d in zip(adds, descriptors):
        lines.append({"remove": {"path": add["path"], "deletionTimestamp": now, "dataChange": True,
                                 "extendedFileMetadata": True, "partitionValues": {}, "size": add["size"]}})
        lines.append({"add": {**add, "modificationTime": now, "deletionVector": d.wire()}})
    (path / "_delta_log" / f"{len(sizes):020d}.json").write_text("".join(json.dumps(x) + "\n" for x in lines))

    con = duckdb_delta()
    got = con.execute(f"SELECT k, s FROM delta_scan('{path}')").fetchall()
    want = set()
    for add, d, dels in zip(adds, descriptors, deleted):
        # Our reader applies the DV to the file as a reader must: drop those ordinals.
        rows = pq.read_table(path / add["path"])
        assert np.array_equal(read_deletion_vector(storage, d), np.unique(dels.astype(np.uint64)))
        kept = rows.filter(pa.array(keep_mask(rows.num_rows, read_deletion_vector(storage, d))))
        want |= set(zip(kept["k"].to_pylist(), kept["s"].to_pylist()))
    assert len(got) == len(set(got)) == sum(sizes) - sum(len(np.unique(x)) for x in deleted)
    assert set(got) == want
    # indexeddf reads the table as DuckDB does, every DV kind included, and indexes it.
    t = IndexedTable.convert(str(path), ["k"], num_buckets=2)
    assert sorted(zip(*t.to_arrow().select(["k", "s"]).to_pydict().values())) == sorted(got)


@pytest.mark.parametrize("min_rows", [1, 7, 50, 10**6])
def test_row_groups_read_together_give_the_rows_of_one_at_a_time(tmp_path, min_rows):
    """``iter_live_row_groups(min_rows=)`` (an index build task's read) yields the same live
    rows and file ordinals as a row group at a time, in fewer pieces, across row groups and a
    deletion vector."""
    from indexeddf.format.datafiles import iter_live_row_groups
    from indexeddf.spec.column_mapping import table_schema

    data = pa.table({"k": pa.array(range(300), pa.int64()), "s": pa.array([f"s{i}" for i in range(300)])})
    t = IndexedTable.create(str(tmp_path / "t"), data, ["k"], num_buckets=1,
                            properties={"delta.enableDeletionVectors": "true", "indexeddf.targetRowGroupBytes": "256"})
    t.delete("k % 3 = 0 OR k BETWEEN 40 AND 90")
    snap = IndexedTable.for_path(t.path).snapshot
    (add,) = snap.live_files()
    assert add.deletionVector is not None
    schema = table_schema(snap.metadata)
    one = list(iter_live_row_groups(snap.storage, add, schema, ["s"]))
    assert len(one) > 4, "the file must hold several row groups"
    together = list(iter_live_row_groups(snap.storage, add, schema, ["s"], min_rows=min_rows))
    assert len(together) <= len(one)
    assert np.concatenate([o for o, _ in together]).tolist() == np.concatenate([o for o, _ in one]).tolist()
    assert pa.concat_tables([r for _, r in together]) == pa.concat_tables([r for _, r in one])
    live = sorted(int(k) for k in range(300) if k % 3 and not 40 <= k <= 90)
    assert np.concatenate([o for o, _ in together]).tolist() == live  # k was written in row order
