"""Fuzzed logs: hypothesis damages the commit files of a real table (mutated fields,
wrong types, huge numbers, unicode and path tricks, unknown actions, garbage lines,
truncations) and every reader, vacuum and the command must answer or raise an
``indexeddf.errors`` type; a log error names the file. Nothing outside the table is
ever touched.

The mutations start from the table's own commit lines, whatever the log format, so
they stay close to valid actions.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from indexeddf import IndexedTable
from indexeddf.cli import main as cli
from indexeddf.errors import CorruptLogError, IndexedDFError

COMMIT_NAME_DIGITS = 20
TRICKS = ["../outside/sentinel.parquet", "../../outside/sentinel.parquet", "/etc/passwd", "data/../../outside/x",
          "%2E%2E/outside/sentinel.parquet", "s3://elsewhere/x.parquet", "C:\\windows\\x", "data/\x00x", "é/ü/☃.parquet",
          "", ".", "data/bucket=00000/../../../outside/sentinel.parquet"]
VALUES = st.one_of(
    st.sampled_from(TRICKS),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([10**30, -1, 0, 2**63, 2**64 + 1, 1.5, float("inf")]),
    st.text(max_size=12),
    st.sampled_from([None, True, False, [], {}, [1, "x"], {"a": 1}]),
)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    path = root / "t"
    data = pa.table({"k": pa.array(range(40), pa.int64()), "s": [f"s{i % 5}" for i in range(40)]})
    t = IndexedTable.create(str(path), data, index_columns=["k"], num_buckets=2)
    t.append(pa.table({"k": pa.array([100, 101], pa.int64()), "s": ["x", "y"]}))
    t.create_index("by_s", ["s"], num_buckets=2)
    t.delete("k = 3")
    t.append(pa.table({"k": pa.array([200], pa.int64()), "s": ["z"]}), txn=("app", 1))
    return path


def commit_files(table: Path) -> list[Path]:
    return sorted(p for p in table.rglob("*.json")
                  if p.stem.isdigit() and len(p.stem) == COMMIT_NAME_DIGITS and "_indexes" not in p.parts[-3:-1])


def mutate_value(obj, path: list, value):
    """``obj`` with the value at ``path`` (indices into nested dicts) replaced, or deleted
    when ``value`` is the marker ``"__delete__"``."""
    if not path:
        return value
    if isinstance(obj, dict) and obj:
        keys = sorted(obj)
        key = keys[path[0] % len(keys)]
        out = dict(obj)
        if len(path) == 1 and value == "__delete__":
            del out[key]
        else:
            out[key] = mutate_value(obj[key], path[1:], value)
        return out
    if isinstance(obj, list) and obj:
        out = list(obj)
        i = path[0] % len(obj)
        out[i] = mutate_value(obj[i], path[1:], value)
        return out
    return value


MUTATION = st.one_of(
    st.tuples(st.just("value"), st.lists(st.integers(0, 50), min_size=1, max_size=4),
              st.one_of(VALUES, st.just("__delete__"))),
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("line"), st.sampled_from(['{"bogus": {}}', "not json", "{}", "[]", '{"add": null}',
                                                 '{"add": {}, "remove": {}}', "\ufeff{}", '{"protocol": {"minReaderVersion": 99, "minWriterVersion": 99}}'])),
)


def damage(table: Path, which: int, line_no: int, mutation) -> Path:
    files = commit_files(table)
    target = files[which % len(files)]
    raw = target.read_bytes()
    lines = raw.decode("utf-8").split("\n")[:-1]
    kind = mutation[0]
    if kind == "truncate":
        target.write_bytes(raw[: int(len(raw) * mutation[1])])
        return target
    i = line_no % len(lines)
    if kind == "line":
        lines.insert(i, mutation[1])
    else:
        obj = json.loads(lines[i])
        lines[i] = json.dumps(mutate_value(obj, mutation[1], mutation[2]), ensure_ascii=False)
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


def exercise(path: str) -> list[BaseException]:
    """Every reader, vacuum and the command on the damaged table; the errors they raised."""
    errors: list[BaseException] = []

    def attempt(fn):
        try:
            fn()
        except IndexedDFError as e:
            errors.append(e)

    def newest():
        t = IndexedTable.for_path(path)
        t.to_arrow()
        t.lookup([1, 100])
        t.lookup(["s1"], index="by_s")
        t.history()
        t.indexes()
        t.explain("k = 5")
        for v in range(t.version + 1):
            attempt(lambda v=v: IndexedTable.for_path(path, version=v).to_arrow())
        t.vacuum(retention_hours=0, enforce_retention=False, dry_run=True)
        t.vacuum(retention_hours=0, enforce_retention=False)

    attempt(newest)
    for argv in (["describe", path], ["history", path, "--json"], ["lookup", path, "1"]):
        assert cli(argv) in (0, 1, 2)
    return errors


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(which=st.integers(0, 20), line_no=st.integers(0, 20), mutation=MUTATION)
@example(which=0, line_no=3, mutation=("value", [0, 10], "."))  # an add naming the table root itself
@example(which=0, line_no=3, mutation=("value", [0, 10], "data"))  # an add naming a folder of the table
@example(which=0, line_no=0, mutation=("truncate", 0.3753360489812342))  # version 0 cut before its metaData
def test_damaged_logs_give_typed_errors_and_touch_nothing_outside(pristine, which, line_no, mutation):
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        outside = root / "outside"
        outside.mkdir()
        sentinel = outside / "sentinel.parquet"
        sentinel.write_bytes(b"not the table's")
        table = root / "t"
        shutil.copytree(pristine, table)
        damaged = damage(table, which, line_no, mutation)
        errors = exercise(str(table))
        for e in errors:
            if isinstance(e, CorruptLogError):  # a damaged log: the message names the file
                assert re.search(r"\d{20}\.(json|checkpoint\.parquet)", str(e)), (damaged.name, str(e))
        assert sentinel.read_bytes() == b"not the table's"
        assert sorted(p.name for p in outside.iterdir()) == ["sentinel.parquet"]
