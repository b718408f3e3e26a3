"""A fence between a failed Spark job and those of its Python tasks that still run.

When one task of a maintenance job fails (an index build, an optimize, an index compaction),
Spark fails the job and kills its other tasks; but a killed task's Python worker is not
stopped with it: Spark ends the task in the JVM and the worker runs on until it next talks to
the JVM. A rewrite or build task can so write its files after the failure was reported to the
caller: after the operation deleted what the job wrote and cancelled itself, after a
``vacuum`` that followed. Waiting a while (Spark's ``spark.python.task.killTimeout``) makes
that rare, not impossible.

The fence makes it exact with small files in the table's storage, under
``_indexes/_jobs/<job>/``: each task creates a token when it starts and deletes it when it
ends; the failure path (:meth:`JobFence.abort`) writes the job's ``_aborted`` marker, then
waits until no token is left. A task looks for the marker after creating its token (a task
that starts after the failure writes nothing), between its units of work (it stops early), and
when its work is done (it deletes the files it wrote). Either a task saw the marker, or its
token was there before the marker was, and the failure path waited for it. So when the failure
reaches the caller no task of the job writes any more, and whatever one wrote is gone or, named
by no version, collected by ``vacuum``.

A token whose worker died (its executor lost) is never deleted: the failure path waits at most
:data:`ABORT_WAIT_SECONDS` for it. A job that succeeds deletes its folder (:meth:`JobFence.close`);
the marker of a failed job stays, so that a task Spark launched just before the failure and
whose Python code starts after it still finds it: ``vacuum`` leaves a fence's files alone for
``writer.maintenance.FENCE_RETENTION_HOURS`` whatever its retention.
"""

from __future__ import annotations

import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from ..writer.index_files import JOBS_DIR
from ..writer.tree import remove_empty_dirs

ABORTED = "_aborted"
"""The marker a failed job's fence holds."""

TOKEN = ".running"
"""The suffix of a running task's token."""

ABORT_WAIT_SECONDS = 60.0
"""How long the failure path waits for the tasks still running (a lost worker never ends)."""


class JobAborted(RuntimeError):
    """Raised in a task that finds its job failed: it stops, its files deleted."""


@dataclass(frozen=True)
class JobFence:
    """The fence of one Spark job: a folder of the table's storage (relative path)."""

    folder: str

    @classmethod
    def new(cls) -> "JobFence":
        """A fence for a new job (nothing is written until a task starts)."""
        return cls(f"{JOBS_DIR}/{uuid.uuid4().hex}")

    @contextmanager
    def task(self, storage, written: list[str]) -> Iterator["JobFence"]:
        """Run a task's work inside the fence; ``written``: the paths the task writes (the
        list the work appends to). When the work fails, or the job did meanwhile
        (:class:`JobAborted`), the task's files are deleted, before its token: nothing of the
        task is committed."""
        token = f"{self.folder}/{uuid.uuid4().hex}{TOKEN}"
        storage.write_bytes(token, b"")
        try:
            self.check(storage)
            yield self
            self.check(storage)
        except BaseException:
            for path in written:
                storage.delete(path)
            raise
        finally:
            storage.delete(token)

    def check(self, storage) -> None:
        """Raise :class:`JobAborted` if the job failed (inside :meth:`task`: its files are deleted)."""
        if storage.exists(f"{self.folder}/{ABORTED}"):
            raise JobAborted(f"the Spark job of fence {self.folder} failed; this task stops")

    def abort(self, storage, timeout: float = ABORT_WAIT_SECONDS) -> None:
        """The job failed: mark it, then wait until its running tasks have ended (at most
        ``timeout`` seconds)."""
        storage.write_bytes(f"{self.folder}/{ABORTED}", b"")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(n.endswith(TOKEN) for n in storage.list_names(self.folder)):
            time.sleep(0.05)

    def close(self, storage) -> None:
        """The job succeeded: delete its folder (every task has ended)."""
        for name in storage.list_names(self.folder):
            storage.delete(f"{self.folder}/{name}")
        remove_empty_dirs(storage, self.folder)
