"""Log actions: canonical JSON round trip and refusal of bad lines."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexeddf.errors import CorruptLogError, UnsafePathError
from indexeddf.format.log import parse_commit
from indexeddf.spec.actions import (
    AddFile,
    CommitInfo,
    FileStats,
    IndexEntry,
    IndexFile,
    Metadata,
    Protocol,
    RemoveFile,
    Txn,
    parse_line,
    to_line,
)
from indexeddf.spec.delta import encode_commit
from indexeddf.spec.schema import Field
from indexeddf.spec.states import INDEX_STATES

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
ints = st.integers(min_value=0, max_value=2**62)
millis = st.integers(min_value=0, max_value=253_402_300_799_999)  # up to year 9999
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.text(max_size=8))
rel_paths = st.builds(lambda b, u: f"data/bucket={b:05d}/part-{u}.parquet", st.integers(0, 999), st.uuids())

stats = st.builds(
    FileStats,
    numRecords=ints,
    minValues=st.dictionaries(names, json_scalars, max_size=3),
    maxValues=st.dictionaries(names, json_scalars, max_size=3),
    nullCount=st.dictionaries(names, ints, max_size=3),
)
actions = st.one_of(
    st.sampled_from([Protocol(), Protocol(minReaderVersion=1, minWriterVersion=1),
                     Protocol(minReaderVersion=3, minWriterVersion=7, readerFeatures=("timestampNtz",), writerFeatures=("timestampNtz",))]),
    st.builds(
        Metadata,
        id=st.uuids().map(str),
        name=st.none() | names,
        description=st.none() | names,
        schema=st.lists(st.builds(Field, name=names, type=st.sampled_from(["long", "string", "decimal(10,2)"]), nullable=st.booleans()), max_size=4).map(tuple),
        indexColumns=st.lists(names, min_size=1, max_size=3).map(tuple),
        numBuckets=st.integers(1, 1024),
        configuration=st.dictionaries(names, names, max_size=3),
        createdTime=millis,
    ),
    st.builds(AddFile, path=rel_paths, size=ints, modificationTime=millis, dataChange=st.booleans(), bucket=st.integers(0, 999), fileId=ints, stats=stats),
    st.builds(RemoveFile, path=rel_paths, deletionTimestamp=millis, dataChange=st.booleans(), bucket=st.integers(0, 999), fileId=ints, size=ints),
    st.builds(Txn, appId=names, version=ints, lastUpdated=millis),
    st.builds(
        IndexEntry,
        name=names,
        columns=st.lists(names, min_size=1, max_size=2).map(tuple),
        kind=st.sampled_from(["primary", "secondary"]),
        state=st.sampled_from(INDEX_STATES),
        numBuckets=st.integers(1, 64),
        coveredVersion=ints,
        files=st.lists(st.builds(IndexFile, path=rel_paths, size=ints, bucket=st.integers(0, 63), numEntries=ints,
                                 fileIds=st.lists(ints, max_size=3).map(tuple)), max_size=2).map(tuple),
        removedFiles=st.lists(rel_paths, max_size=2).map(tuple),
    ),
    st.builds(
        CommitInfo,
        timestamp=millis,
        operation=names,
        operationParameters=st.dictionaries(names, json_scalars, max_size=3),
        readVersion=st.none() | ints,
        isBlindAppend=st.booleans(),
        engineInfo=names,
        operationMetrics=st.dictionaries(names, ints, max_size=3),
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(actions, min_size=1, max_size=6))
def test_every_commit_round_trips_through_the_delta_form(body):
    """encode_commit -> parse_commit gives the same actions: index actions ride in the
    commitInfo line (so a commit with index actions has one) and come back after the rest,
    which keep their order."""
    info = [a for a in body if isinstance(a, CommitInfo)][:1] or [CommitInfo(timestamp=0, operation="X")]
    rest = [a for a in body if not isinstance(a, CommitInfo)]
    parsed = parse_commit(encode_commit(info + rest), "x.json")
    indexes = [a for a in rest if isinstance(a, IndexEntry)]
    others = [a for a in rest if not isinstance(a, IndexEntry)]
    assert parsed == info + others + indexes


@settings(max_examples=300, deadline=None)
@given(actions)
def test_every_action_round_trips_exactly(action):
    line = to_line(action)
    assert "\n" not in line
    parsed = parse_line(line)
    assert parsed == action
    assert to_line(parsed) == line


def test_actions_are_immutable():
    t = Txn(appId="a", version=1, lastUpdated=0)
    with pytest.raises(Exception):
        t.version = 2


def _add(path: str) -> AddFile:
    return AddFile(path=path, size=1, modificationTime=0, bucket=0, fileId=0, stats=FileStats(numRecords=1))


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside.parquet", "data/../../x.parquet", "s3://bucket/x", "file:///x", "C:/x", "\\\\server\\x"])
def test_paths_outside_the_root_are_refused(path):
    text = encode_commit([Protocol(), _add(path)])
    with pytest.raises(UnsafePathError) as e:
        parse_commit(text, "00000000000000000003.json")
    assert "00000000000000000003.json line 2" in str(e.value)


def test_an_inner_dotdot_that_stays_inside_is_still_refused():
    # '..' anywhere is refused: a reader must not need path arithmetic to stay safe.
    with pytest.raises(UnsafePathError):
        parse_commit(encode_commit([_add("data/a/../b.parquet")]), "x.json")


@pytest.mark.parametrize(
    "text, line",
    [
        ('{"txn":{"appId":"a","version":1,"lastUpdated":0}}\n{"add":{"path":"data/x"', 2),  # truncated
        ("not json\n", 1),
        ('{"txn":{"appId":"a","version":1,"lastUpdated":0}}\n[1,2]\n', 2),
        ('{"mystery":{}}\n', 1),
        ('{"txn":{"appId":"a"}}\n', 1),  # missing fields
        ('{"txn":{"appId":"a","version":"one","lastUpdated":0}}\n', 1),  # wrong type
        ('{"add":{"path":"data/x","size":1,"modificationTime":0,"dataChange":true,"stats":"{"}}\n', 1),
        ('{"add":{"path":"data/x","size":1,"modificationTime":0,"tags":{"indexeddf.bucket":"x"}}}\n', 1),
    ],
)
def test_corrupt_lines_name_file_and_line(text, line):
    with pytest.raises(CorruptLogError) as e:
        parse_commit(text, "/t/_delta_log/00000000000000000007.json")
    assert e.value.line == line
    assert e.value.path.endswith("00000000000000000007.json")
    assert f"line {line}" in str(e.value)
