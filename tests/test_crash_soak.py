"""Crash soak: writer processes running random operations are SIGKILLed at random
moments while others keep writing, locally and on an S3 endpoint (moto's server).

Afterwards every version opens and holds the rows its files say (the sum of the adds'
``numRecords``), no half-written commit is visible, a new writer succeeds, and a vacuum
past the retention removes the orphans of the killed writers and nothing the newest
version needs.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from s3_endpoint import MotoServer

from indexeddf import IndexedTable
from indexeddf.format.storage import TableStorage

pytestmark = pytest.mark.slow
WORKER = str(Path(__file__).parent / "workers" / "random_ops.py")


def soak(url: str, options: dict | None, seed: int) -> None:
    rng = random.Random(seed)
    start = pa.table({"k": pa.array(range(50), pa.int64()), "s": pa.array(["a"] * 50),
                      "v": pa.array(range(50), pa.int64())})
    IndexedTable.create(url, start, index_columns=["k"], num_buckets=4, storage_options=options)
    args = [json.dumps(options)] if options else []
    procs = [subprocess.Popen([sys.executable, WORKER, url, str(seed * 10 + w), *args],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for w in range(3)]
    try:
        # Kill only once the writers are writing: on a loaded machine their start-up (imports,
        # the S3 client) can outlast the random delays below, and nothing would be tested.
        deadline = time.monotonic() + 120
        while IndexedTable.for_path(url, storage_options=options).version < 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        for victim in rng.sample(procs, 2):  # two of the three die, at random moments
            time.sleep(rng.uniform(0.5, 3.0))
            os.kill(victim.pid, signal.SIGKILL)
        time.sleep(rng.uniform(0.5, 2.0))
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
    check_every_version(url, options)
    check_new_writer_and_vacuum(url, options)


def check_every_version(url: str, options: dict | None) -> None:
    latest = IndexedTable.for_path(url, storage_options=options)
    assert latest.version >= 1
    for v in range(latest.version + 1):
        t = IndexedTable.for_path(url, version=v, storage_options=options)
        said = sum(a.stats.numRecords for a in t.snapshot.live_files())
        assert t.to_arrow().num_rows == said, v
        for entry in t.snapshot.indexes.values():
            assert entry.state in ("ACTIVE", "DELETED", "CREATING", "REFRESHING", "OPTIMIZING", "DELETING",
                                   "RESTORING", "VACUUMING")


def check_new_writer_and_vacuum(url: str, options: dict | None) -> None:
    t = IndexedTable.for_path(url, storage_options=options)
    for name, entry in t.snapshot.indexes.items():
        if entry.state not in ("ACTIVE", "DELETED"):
            t.cancel_index(name)  # a killed index operation leaves it transient
    before = t.to_arrow().num_rows
    t.append(pa.table({"k": pa.array([7], pa.int64()), "s": ["z"], "v": pa.array([1], pa.int64())}))
    assert t.to_arrow().num_rows == before + 1
    keep = {a.path for a in t.snapshot.live_files()} | {f.path for e in t.snapshot.indexes.values() for f in e.files}
    t.vacuum(retention_hours=0, enforce_retention=False)
    storage = TableStorage(url, options)
    left = set()
    for top in ("data", "_indexes"):
        base = storage.full(top)
        if storage.exists(top):
            left |= {p[len(storage.root) + 1:] for p in storage.fs.find(base)}
    # The index state kept beside checkpoints stays (vacuum never deletes it): files named
    # for versions of the table (a kill between a state file and its checkpoint leaves one
    # without its checkpoint, which is harmless).
    states = {p for p in left if p.startswith("_indexes/_state/")}
    # A kill between a put-if-absent's temporary file and its link leaves a hidden
    # ".<name>.<uuid>.tmp" there; readers never list the folder, and vacuum, like Delta's,
    # leaves hidden files alone.
    temps = {p for p in states if p.rsplit("/", 1)[1].startswith(".")}
    assert all(p.endswith(".tmp") for p in temps), temps
    assert all(int(p.rsplit("/", 1)[1].split(".")[0]) <= t.version for p in states - temps)
    left -= states
    assert left == keep, (sorted(left - keep)[:5], sorted(keep - left)[:5])
    assert IndexedTable.for_path(url, storage_options=options).to_arrow().num_rows == before + 1


LOCAL_SEEDS, S3_SEEDS = range(2), range(1)
"""Each seed kills at other moments; more seeds cost ~14 s each."""


def run_soaks(folder: str) -> None:
    """Every soak of this module in turn, in this process (``python test_crash_soak.py FOLDER``:
    ``conftest.py`` runs it from the run's first test on, beside the tests, since a soak mostly
    waits on its writers); prints one JSON line a soak, its name and its error (None)."""
    import traceback

    def report(name: str, run) -> None:
        try:
            run()
            error = None
        except BaseException:  # the test of that soak fails with it
            error = traceback.format_exc()
        print(json.dumps({"soak": name, "error": error}), flush=True)

    for seed in LOCAL_SEEDS:
        report(f"local-{seed}", lambda: soak(f"{folder}/local-{seed}", None, seed))
    server = MotoServer()
    try:
        server.endpoint.create_bucket("soak")
        for seed in S3_SEEDS:
            report(f"s3-{seed}", lambda: soak(f"s3://soak/t{seed}", server.endpoint.options(), 100 + seed))
    finally:
        server.stop()


def soaked(crash_soaks, name: str) -> None:
    """Fails with the soak's own error, if it had one."""
    done, _ = crash_soaks
    results = {r["soak"]: r["error"] for r in map(json.loads, (line for line in done.stdout.splitlines()
                                                                if line.startswith('{"soak"')))}
    assert name in results, (done.returncode, done.stderr[-3000:])
    assert results[name] is None, results[name]


@pytest.mark.parametrize("seed", LOCAL_SEEDS)
def test_crash_soak_locally(crash_soaks, seed):
    soaked(crash_soaks, f"local-{seed}")


@pytest.mark.parametrize("seed", S3_SEEDS)
def test_crash_soak_on_s3(crash_soaks, seed):
    soaked(crash_soaks, f"s3-{seed}")


if __name__ == "__main__":
    run_soaks(sys.argv[1])
