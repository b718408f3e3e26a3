"""The indexeddf command. Its ``main`` is what ``python -m indexeddf.cli`` exits with: most
commands are checked by calling it in this process (``run_here``: its exit code, stdout and
stderr, as a process would give them; a process costs a second of imports each), and the
command runs as a real process where the process itself matters: exit codes and output of a
piped run, a pseudo-terminal, a Spark driver."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pytest

from indexeddf import IndexedTable


def run(*args: str) -> subprocess.CompletedProcess:
    """The command as a real process."""
    return subprocess.run([sys.executable, "-m", "indexeddf.cli", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def run_here(capsys):
    """The command's ``main`` called here: ``run_here(*args)`` gives what :func:`run` gives."""
    from indexeddf import cli as command

    def call(*args: str) -> subprocess.CompletedProcess:
        capsys.readouterr()  # what was printed before is not this command's
        code = command.main(list(args))
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["indexeddf", *args], code, out, err)

    return call


def make(path: str) -> IndexedTable:
    data = pa.table({"k": pa.array([1, 2, 3, 3], pa.int64()), "s": ["a", "b", "c", None]})
    t = IndexedTable.create(path, data, index_columns=["k"], num_buckets=4)
    t.append(pa.table({"k": pa.array([4], pa.int64()), "s": ["d"]}))
    return t


def test_describe_history_lookup_index(table_path, run_here):
    make(table_path)
    d = json.loads(run("--json", "describe", table_path).stdout)
    assert d["version"] == 1 and d["num_rows"] == 5 and d["indexes"][0]["name"] == "primary"
    text = run_here("describe", table_path).stdout
    assert "primary" in text and "num_buckets: 4" in text
    h = json.loads(run_here("--json", "history", table_path, "--limit", "1").stdout)
    assert [e["version"] for e in h] == [1]
    rows = json.loads(run_here("--json", "lookup", table_path, "3").stdout)
    assert sorted(r["s"] or "" for r in rows) == ["", "c"]
    assert run_here("index", "create", table_path, "--name", "by_s", "--columns", "s").returncode == 0
    rows = json.loads(run_here("--json", "lookup", table_path, "null", "--index", "by_s").stdout)
    assert rows == [{"k": 3, "s": None}]
    listed = json.loads(run_here("--json", "index", "list", table_path).stdout)
    assert {i["name"] for i in listed} == {"by_s", "primary"}
    assert run_here("refresh", table_path, "--mode", "full").returncode == 0


def test_user_errors_exit_1_with_message(tmp_path):
    r = run("describe", str(tmp_path / "missing"))
    assert r.returncode == 1 and "no indexeddf table" in r.stderr
    r = run("--help")
    assert r.returncode == 0 and "describe" in r.stdout


def test_maintenance_commands(table_path, run_here):
    t = make(table_path)
    for i in range(3):
        t.append(pa.table({"k": pa.array([10 + i, 20 + i], pa.int64()), "s": ["x", "y"]}))
    r = run_here("optimize", table_path, "--mode", "full")
    assert r.returncode == 0 and "optimized (full)" in r.stdout and "optimize: bucket" in r.stderr  # progress on stderr
    out = json.loads(run_here("--json", "optimize", table_path).stdout)
    assert out["committed"] is False  # nothing left
    r = run_here("vacuum", table_path, "--retention-hours", "1")
    assert r.returncode == 1 and "minRetentionHours" in r.stderr
    r = run_here("--json", "vacuum", table_path, "--retention-hours", "0", "--no-enforce-retention", "--dry-run")
    dry = json.loads(r.stdout)
    assert r.returncode == 0 and dry["dry_run"] and dry["files"]
    assert all((__import__("os").path.exists(f"{table_path}/{f}")) for f in dry["files"])
    r = run_here("restore", table_path, "1")
    assert r.returncode == 0 and "restored" in r.stdout
    assert sorted(IndexedTable.for_path(table_path).to_arrow().column("k").to_pylist()) == [1, 2, 3, 3, 4]
    r = run_here("vacuum", table_path, "--retention-hours", "0", "--no-enforce-retention")
    assert r.returncode == 0 and "deleted" in r.stdout and "vacuum: deleted" in r.stderr
    r = run_here("restore", table_path, "3")
    assert r.returncode == 1 and "vacuum" in r.stderr  # its files are gone
    r = run_here("restore", table_path, "99")
    assert r.returncode == 1 and "version" in r.stderr


def test_index_lifecycle_commands(table_path, run_here):
    make(table_path)
    r = run_here("index", "create", table_path, "by_s", "--columns", "s")
    assert r.returncode == 0 and "index by_s:" in r.stderr  # progress
    assert run_here("--json", "index", "drop", table_path, "by_s").returncode == 0
    listed = {i["name"]: i["state"] for i in json.loads(run_here("--json", "index", "list", table_path).stdout)}
    assert listed == {"by_s": "DELETED", "primary": "ACTIVE"}
    r = run_here("index", "drop", table_path, "by_s")
    assert r.returncode == 1 and "DELETED" in r.stderr  # drop of a DELETED index
    assert json.loads(run_here("--json", "index", "restore", table_path, "--name", "by_s").stdout)["state"] == "ACTIVE"
    assert run_here("index", "optimize", table_path, "by_s", "--mode", "full").returncode == 0
    r = run_here("index", "cancel", table_path, "by_s")
    assert r.returncode == 1 and "cancel" in r.stderr  # nothing to cancel
    from indexeddf.writer import lifecycle

    snap = IndexedTable.for_path(table_path).snapshot
    lifecycle.begin(snap, snap.indexes["by_s"], "REFRESHING", "REFRESH INDEX", {})  # as if its process died
    r = run_here("refresh", table_path, "--index", "by_s")
    assert r.returncode == 1 and "REFRESHING" in r.stderr and "cancel_index" in r.stderr
    assert json.loads(run_here("--json", "index", "cancel", table_path, "by_s").stdout)["state"] == "ACTIVE"
    assert run_here("refresh", table_path, "--index", "by_s", "-q").stderr == ""
    assert run_here("index", "drop", table_path, "by_s").returncode == 0
    r = run_here("index", "vacuum", table_path, "by_s")
    assert r.returncode == 0 and "vacuumed" in r.stdout
    r = run_here("index", "drop", table_path)
    assert r.returncode == 1 and "needs an index name" in r.stderr


def test_conflict_exits_2_and_usage_errors_exit_1(table_path, monkeypatch, capsys, run_here):
    from indexeddf import cli
    from indexeddf.errors import ConcurrentIndexError

    make(table_path)

    def lose(*args, **kwargs):
        raise ConcurrentIndexError("lost to version 3, which changed index 'primary' too; retry")

    monkeypatch.setattr(IndexedTable, "optimize", lose)
    assert cli.main(["optimize", table_path]) == 2 and "retry" in capsys.readouterr().err
    assert cli.main(["optimize", table_path, "--mode", "bogus"]) == 1
    assert cli.main(["vacuum", "--help"]) == 0
    for command in ("optimize", "vacuum", "restore", "index"):
        text = run_here(command, "--help").stdout
        assert "--help" in text or "-h" in text
    text = run_here("vacuum", "--help").stdout
    assert all(o in text for o in ("--retention-hours", "--dry-run", "--no-enforce-retention", "--quiet"))


def test_options_go_where_people_type_them(table_path, run_here):
    make(table_path)
    after = json.loads(run_here("history", table_path, "--json").stdout)
    before = json.loads(run_here("--json", "history", table_path).stdout)
    assert after == before and [e["version"] for e in after] == [1, 0]
    assert json.loads(run_here("describe", table_path, "--json").stdout)["version"] == 1
    assert run_here("optimize", table_path, "--mode", "full", "-q").returncode == 0
    version = run_here("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"indexeddf {__import__('indexeddf').__version__}"


def test_progress_is_a_bar_on_a_terminal_and_lines_elsewhere(table_path):
    """Run under a real pseudo-terminal: progress redraws one line with a bar."""
    import os
    import pty

    t = make(table_path)
    for i in range(3):
        t.append(pa.table({"k": pa.array([10 + i], pa.int64()), "s": ["x"]}))
    t.optimize(mode="full")  # leaves files for vacuum to delete
    plain = run("vacuum", table_path, "--retention-hours", "0", "--no-enforce-retention", "--dry-run")
    assert plain.returncode == 0 and "vacuum: would delete 1/" in plain.stderr  # piped: plain lines
    assert "\r" not in plain.stderr and "\x1b[K" not in plain.stderr and "[#" not in plain.stderr
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "indexeddf.cli", "vacuum", table_path, "--retention-hours", "0",
                             "--no-enforce-retention"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=child)
    os.close(child)
    out = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=120)
    os.close(main)
    text = out.decode()
    assert proc.returncode == 0
    assert "\r\x1b[K[" in text and "] vacuum: deleted " in text and text.endswith("\n"), text


@pytest.mark.spark
@pytest.mark.spark_elsewhere  # the command is the driver
def test_spark_master_runs_the_work_as_a_spark_job(table_path):
    """``--spark-master`` starts a session on that master (the command's process is the driver)
    and the work runs as its job; the rows stay what DuckDB read before."""
    from oracles import duckdb_delta

    t = make(table_path)
    for i in range(3):
        t.append(pa.table({"k": pa.array([10 + i, 20 + i], pa.int64()), "s": ["x", "y"]}))
    query = f"SELECT k, s FROM delta_scan('{table_path}') ORDER BY k, s"
    before = duckdb_delta().execute(query).fetchall()
    files_before = len(IndexedTable.for_path(table_path).snapshot.live_files())
    r = run("optimize", table_path, "--mode", "full", "--spark-master", "local[2]",
            "--spark-conf", "spark.ui.enabled=false", "--spark-conf", "spark.sql.shuffle.partitions=2")
    assert r.returncode == 0, r.stderr
    assert "optimized (full)" in r.stdout and "optimize: Spark job over" in r.stderr
    assert IndexedTable.for_path(table_path).history(1)[0].operation == "OPTIMIZE"
    buckets = [a.bucket for a in IndexedTable.for_path(table_path).snapshot.live_files()]
    assert len(buckets) == len(set(buckets)) < files_before  # one file a bucket
    assert duckdb_delta().execute(query).fetchall() == before


def test_spark_flags_are_checked_before_any_session_starts(table_path, capsys, run_here):
    from indexeddf import cli

    make(table_path)
    assert cli.main(["optimize", table_path, "--spark-conf", "spark.ui.enabled=false"]) == 1
    assert "--spark-conf needs --spark-master" in capsys.readouterr().err
    assert cli.main(["optimize", table_path, "--spark-master", "local[2]", "--spark-conf", "novalue"]) == 1
    assert "KEY=VALUE" in capsys.readouterr().err
    assert cli.main(["index", "drop", table_path, "primary", "--spark-master", "local[2]"]) == 1
    assert "for index create" in capsys.readouterr().err
    # convert and index optimize take the flags too (the session is asked for before any work).
    for command in (["convert", table_path, "--index-columns", "k"], ["index", "optimize", table_path, "primary"]):
        assert cli.main([*command, "--spark-conf", "spark.ui.enabled=false"]) == 1
        assert "--spark-conf needs --spark-master" in capsys.readouterr().err
    for command in (["refresh"], ["optimize"], ["index", "create"], ["convert"]):
        assert "--spark-master" in run_here(*command, "--help").stdout
