"""Time travel by timestamp: the newest version committed at or before an instant."""

from __future__ import annotations

import datetime as dt

from ..errors import InvalidOptionError, VersionNotFoundError
from .log import commit_path, list_log, read_commit_info
from .storage import TableStorage


def to_millis(timestamp) -> int:
    """Milliseconds since the epoch from a datetime, ISO string or number (ms).

    A naive datetime or a string without a zone is taken as UTC.
    """
    if isinstance(timestamp, (int, float)) and not isinstance(timestamp, bool):
        return int(timestamp)
    if isinstance(timestamp, str):
        text = timestamp.strip().replace("Z", "+00:00")
        try:
            timestamp = dt.datetime.fromisoformat(text)
        except ValueError:
            raise InvalidOptionError(
                f"timestamp {timestamp!r} is not ISO 8601 (e.g. '2026-11-21T10:00:00Z' or "
                "'2026-11-21 10:00:00')"
            ) from None
    if isinstance(timestamp, dt.date) and not isinstance(timestamp, dt.datetime):
        timestamp = dt.datetime.combine(timestamp, dt.time())
    if not isinstance(timestamp, dt.datetime):
        raise InvalidOptionError(f"cannot read a timestamp from {timestamp!r}")
    if timestamp.tzinfo is None:
        timestamp = timestamp.replace(tzinfo=dt.timezone.utc)
    return int(timestamp.timestamp() * 1000)


def version_at(storage: TableStorage, timestamp) -> int:
    """The newest version whose commit timestamp is at or before ``timestamp``.

    Commit timestamps increase strictly with versions (writers enforce it), so this
    bisects the log and reads about log2(versions) commit files.
    """
    ms = to_millis(timestamp)
    commits, _ = list_log(storage)
    if not commits:
        raise VersionNotFoundError(f"{storage.url} has no commits")

    def ts(v: int) -> int:
        info = read_commit_info(storage, v)
        if info is not None and info.timestamp:
            return info.timestamp
        # A Delta writer may leave commitInfo (or its timestamp) out: Delta then dates a
        # commit by its file's modification time.
        return storage.modified_ms(commit_path(v)) or 0

    if ts(commits[0]) > ms:
        first = dt.datetime.fromtimestamp(ts(commits[0]) / 1000, dt.timezone.utc)
        raise VersionNotFoundError(
            f"{storage.url} did not exist at {timestamp}; its oldest version ({commits[0]}) "
            f"was committed at {first.isoformat()}"
        )
    lo, hi = 0, len(commits) - 1  # invariant: ts(commits[lo]) <= ms
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ts(commits[mid]) <= ms:
            lo = mid
        else:
            hi = mid - 1
    return commits[lo]
