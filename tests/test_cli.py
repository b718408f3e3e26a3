"""The indexeddf command, run as a real process."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa

from indexeddf import IndexedTable


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "indexeddf.cli", *args], capture_output=True, text=True, timeout=120)


def make(path: str) -> IndexedTable:
    data = pa.table({"k": pa.array([1, 2, 3, 3], pa.int64()), "s": ["a", "b", "c", None]})
    t = IndexedTable.create(path, data, index_columns=["k"], num_buckets=4)
    t.append(pa.table({"k": pa.array([4], pa.int64()), "s": ["d"]}))
    return t


def test_describe_history_lookup_index(table_path):
    make(table_path)
    d = json.loads(run("--json", "describe", table_path).stdout)
    assert d["version"] == 1 and d["num_rows"] == 5 and d["indexes"][0]["name"] == "primary"
    text = run("describe", table_path).stdout
    assert "primary" in text and "num_buckets: 4" in text
    h = json.loads(run("--json", "history", table_path, "--limit", "1").stdout)
    assert [e["version"] for e in h] == [1]
    rows = json.loads(run("--json", "lookup", table_path, "3").stdout)
    assert sorted(r["s"] or "" for r in rows) == ["", "c"]
    assert run("index", "create", table_path, "--name", "by_s", "--columns", "s").returncode == 0
    rows = json.loads(run("--json", "lookup", table_path, "null", "--index", "by_s").stdout)
    assert rows == [{"k": 3, "s": None}]
    listed = json.loads(run("--json", "index", "list", table_path).stdout)
    assert {i["name"] for i in listed} == {"by_s", "primary"}
    assert run("refresh", table_path, "--mode", "full").returncode == 0


def test_user_errors_exit_1_with_message(tmp_path):
    r = run("describe", str(tmp_path / "missing"))
    assert r.returncode == 1 and "no indexeddf table" in r.stderr
    r = run("--help")
    assert r.returncode == 0 and "describe" in r.stdout
