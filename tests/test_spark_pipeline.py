"""A three-stage streaming pipeline over indexeddf tables, restarted and killed, lands every
event exactly once (the stages: tests/pipeline_stages.py).

Raw JSON events stream into bronze (the sink, no ``txnAppId``); a second stream MERGEs bronze's
new rows into silver in ``foreachBatch`` (Delta's ``txnAppId`` / ``txnVersion``); a third
appends silver's insert-only commits to gold (``skipChangeCommits``). After each round of new
input every stream restarts from its checkpoint; in the last round the silver stream runs in a
separate Spark application that is SIGKILLed after its MERGE committed and before Spark recorded
the batch, then restarted here. The answers come from engines nobody here wrote: DuckDB over the
raw JSON files, delta-rs's reads of every table and version.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pipeline_stages import SILVER_APP, bronze, gold, silver

import indexeddf
from indexeddf import IndexedTable
from indexeddf.format.log import list_log
from indexeddf.format.storage import TableStorage

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module", autouse=True)
def registered(spark):
    indexeddf.register(spark)


def write_events(folder: Path, first: int, files: int, updates: bool) -> None:
    """Files ``first .. first+files-1``, each with three new ids and, with ``updates``, newer
    versions (a higher ``seq``) of ids earlier files hold."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(first, first + files):
        rows = [{"id": i * 10 + j, "seq": i, "v": f"new{i}"} for j in range(3)]
        if updates:
            rows += [{"id": k * 10, "seq": i, "v": f"upd{i}"} for k in range(0, i, 2)]
        with open(folder / f"events-{i:04d}.json", "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))


def rows_of(path: str, version: int | None = None) -> list[tuple]:
    """delta-rs's rows of a table (id, seq, v), sorted."""
    t = DeltaTable(path, version=version).to_pyarrow_table().select(["id", "seq", "v"])
    return sorted(zip(*(t[c].to_pylist() for c in t.column_names)))


def expected_silver(events: Path) -> list[tuple]:
    """DuckDB: each id's newest event over every raw file."""
    return sorted(duckdb.sql(
        f"SELECT id, max(seq), arg_max(v, seq) FROM read_json('{events}/*.json', "
        "columns = {id: 'BIGINT', seq: 'BIGINT', v: 'VARCHAR'}) GROUP BY id").fetchall())


def all_events(events: Path) -> list[tuple]:
    return sorted(duckdb.sql(f"SELECT id, seq, v FROM read_json('{events}/*.json', "
                             "columns = {id: 'BIGINT', seq: 'BIGINT', v: 'VARCHAR'})").fetchall())


def expected_gold(silver_path: str, start: int) -> list[tuple]:
    """delta-rs + DuckDB: what Delta's source gives a stream first started at silver's version
    ``start``: that version's rows (the initial snapshot), then the rows each later commit that
    removed nothing added (the commits ``skipChangeCommits`` reads)."""
    out = rows_of(silver_path, start)
    log = Path(silver_path) / "_delta_log"
    for v in range(start + 1, DeltaTable(silver_path).version() + 1):
        actions = [json.loads(line) for line in (log / f"{v:020d}.json").read_text().splitlines() if line]
        if any("remove" in a for a in actions):
            continue
        con = duckdb.connect()
        con.register("new_rows", DeltaTable(silver_path, version=v).to_pyarrow_table())
        con.register("old_rows", DeltaTable(silver_path, version=v - 1).to_pyarrow_table())
        out += con.execute("SELECT id, seq, v FROM new_rows EXCEPT ALL SELECT id, seq, v FROM old_rows").fetchall()
    return sorted(out)


def check(events: Path, bronze_path: str, silver_path: str, gold_path: str, gold_start: int) -> None:
    assert rows_of(bronze_path) == all_events(events)  # every event once
    assert rows_of(silver_path) == expected_silver(events)
    merges = [h for h in IndexedTable.for_path(silver_path).history() if h.operation == "MERGE"]
    batches = [h.parameters["txnVersion"] for h in merges]
    assert all(h.parameters["txnAppId"] == SILVER_APP for h in merges)
    assert not [b for b, n in Counter(batches).items() if n > 1]  # no batch merged twice
    gold_rows = rows_of(gold_path)
    assert gold_rows == expected_gold(silver_path, gold_start)


def test_a_bronze_silver_gold_pipeline_lands_every_event_once(spark, tmp_path):
    events = tmp_path / "events"
    bronze_path, silver_path, gold_path = (str(tmp_path / n) for n in ("bronze", "silver", "gold"))
    ck = {n: str(tmp_path / "ck" / n) for n in ("bronze", "silver", "gold")}
    empty = pa.table({"id": pa.array([], pa.int64()), "seq": pa.array([], pa.int64()), "v": pa.array([], pa.string())})
    IndexedTable.create(silver_path, empty, index_columns=["id"], num_buckets=2)

    # The silver stream's separate Spark application for the last round starts now, so that its
    # start-up overlaps the first rounds; it waits for the go file.
    go = tmp_path / "go"
    stages = str(Path(__file__).with_name("pipeline_stages.py"))
    proc = subprocess.Popen([sys.executable, stages, "silver", bronze_path, silver_path, ck["silver"], "120", str(go)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        rounds(spark, events, bronze_path, silver_path, gold_path, ck, proc, go)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)


def rounds(spark, events, bronze_path, silver_path, gold_path, ck, proc, go):
    def run_all():
        bronze(spark, str(events), bronze_path, ck["bronze"])
        silver(spark, bronze_path, silver_path, ck["silver"])
        gold(spark, silver_path, gold_path, ck["gold"])

    write_events(events, 0, 2, updates=True)
    run_all()
    gold_start = IndexedTable.for_path(silver_path).version  # gold's first run read this version whole
    check(events, bronze_path, silver_path, gold_path, gold_start)
    write_events(events, 2, 2, updates=True)  # more input: every stream restarts from its checkpoint
    run_all()
    check(events, bronze_path, silver_path, gold_path, gold_start)
    # A restart with no new input commits nothing anywhere.
    versions = [IndexedTable.for_path(p).version for p in (bronze_path, silver_path, gold_path)]
    assert rows_of(gold_path) == rows_of(silver_path, gold_start)  # the updating MERGE was skipped
    run_all()
    assert [IndexedTable.for_path(p).version for p in (bronze_path, silver_path, gold_path)] == versions

    # The silver stream in its own Spark application, SIGKILLed after its first MERGE committed
    # (Spark has not recorded the batch: the restart runs it again, and its txn makes it a no-op).
    write_events(events, 4, 1, updates=False)  # an inserts-only MERGE, which gold reads
    bronze(spark, str(events), bronze_path, ck["bronze"])
    merged_before = IndexedTable.for_path(silver_path).version
    go.touch()
    storage = TableStorage(silver_path)
    deadline = time.time() + 180
    try:
        while time.time() < deadline and proc.poll() is None:
            commits, _ = list_log(storage)
            if commits and commits[-1] > merged_before:
                break
            time.sleep(0.05)
        assert proc.poll() is None, f"the silver stream ended before it was killed: {proc.stderr.read()[-3000:]}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM, no clean shutdown
        proc.wait(timeout=60)
    killed_batch = IndexedTable.for_path(silver_path).snapshot.txn_version(SILVER_APP)
    assert not (Path(ck["silver"]) / "commits" / str(killed_batch)).exists()  # Spark never recorded it
    silver(spark, bronze_path, silver_path, ck["silver"])
    gold(spark, silver_path, gold_path, ck["gold"])
    assert (Path(ck["silver"]) / "commits" / str(killed_batch)).exists()  # the restart ran it again
    check(events, bronze_path, silver_path, gold_path, gold_start)
    assert len(rows_of(gold_path)) == len(rows_of(silver_path, gold_start)) + 3  # the inserts-only MERGE
