"""What the reader executes: a lookup plan and its tasks.

The planner (:mod:`indexeddf.optimizer.planner`) decides which index answers, which
buckets it probes and which files it scans; this module only holds the result, so
that the executor (:mod:`.lookup`, Spark tasks, joins) depends on the shape of a plan
and not on how it was chosen.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from ..spec.actions import AddFile, IndexEntry, IndexFile


@dataclass(frozen=True)
class LookupTask:
    """One unit of work: probe one index bucket for ``keys``, or scan ``scan_files``."""

    bucket: int | None
    keys: pa.Table
    index_files: tuple[IndexFile, ...] = ()
    scan_files: tuple[AddFile, ...] = ()


@dataclass
class LookupPlan:
    """What a lookup reads: the index used, and its tasks."""

    index: IndexEntry
    keys: pa.Table
    tasks: list[LookupTask] = field(default_factory=list)
    live_covered_ids: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    why_not: str | None = None
    """Why the index is not used (the plan only scans), or None when it is."""

    @property
    def buckets(self) -> list[int]:
        """Index buckets probed."""
        return sorted(t.bucket for t in self.tasks if t.bucket is not None)

    @property
    def scanned_files(self) -> list[AddFile]:
        """Live data files the index does not cover, which the lookup scans."""
        return [f for t in self.tasks for f in t.scan_files]
