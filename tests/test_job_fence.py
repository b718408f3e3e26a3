"""The fence between a failed Spark job and its tasks still running (``indexeddf/spark/job_fence.py``),
with real threads on a real folder: the failure path returns only when no task writes any more,
and a task that was still writing deletes its own files. (The Spark jobs that use it are tested
with real faults in test_spark_maintenance.py and test_spark_optimize.py.)"""

from __future__ import annotations

import threading
import time

import pytest

from indexeddf.format.storage import TableStorage
from indexeddf.spark.job_fence import ABORTED, JobAborted, JobFence


def _files(storage: TableStorage, folder: str) -> set[str]:
    return set(storage.list_names(folder))


def test_a_task_still_writing_when_its_job_fails_leaves_nothing_after_the_abort(tmp_path):
    storage = TableStorage(str(tmp_path))
    fence = JobFence.new()
    started, aborting = threading.Event(), threading.Event()
    outcome: list[BaseException] = []

    def late_task():
        written: list[str] = []
        try:
            with fence.task(storage, written):
                started.set()
                aborting.wait(10)
                time.sleep(0.3)  # still writing after the failure path began
                storage.write_bytes("data/late.parquet", b"x")
                written.append("data/late.parquet")
        except JobAborted as e:
            outcome.append(e)

    worker = threading.Thread(target=late_task)
    worker.start()
    assert started.wait(10)
    aborting.set()
    began = time.monotonic()
    fence.abort(storage)
    assert time.monotonic() - began >= 0.3  # it waited for the task
    assert not storage.exists("data/late.parquet")  # the task deleted what it wrote
    worker.join(10)
    assert len(outcome) == 1
    assert _files(storage, fence.folder) == {ABORTED}  # the token is gone, the marker stays


def test_a_task_that_starts_after_the_failure_writes_nothing(tmp_path):
    storage = TableStorage(str(tmp_path))
    fence = JobFence.new()
    fence.abort(storage, timeout=1)
    ran = []
    with pytest.raises(JobAborted):
        with fence.task(storage, []):
            ran.append(True)
    assert not ran and _files(storage, fence.folder) == {ABORTED}


def test_a_job_that_succeeds_leaves_no_fence(tmp_path):
    storage = TableStorage(str(tmp_path))
    fence = JobFence.new()
    written: list[str] = []
    with fence.task(storage, written):
        storage.write_bytes("data/kept.parquet", b"x")
        written.append("data/kept.parquet")
    fence.close(storage)
    assert storage.exists("data/kept.parquet")
    assert not (tmp_path / fence.folder).exists()
