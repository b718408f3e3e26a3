"""The log's files (Delta's ``_delta_log/``): naming, listing and parsing commits into actions.

The wire format of each line is ``spec/delta.py``'s; this module frames files and
names the file and line of every error.
"""

from __future__ import annotations

import posixpath
import re

from ..errors import CorruptLogError, UnsafePathError
from ..spec.actions import Action, ActionParseError, AddFile, CdcFile, CommitInfo, IndexEntry, Protocol, RemoveFile
from ..spec.delta import decode_line
from ..spec.features import check_readable
from .storage import TableStorage

LOG_DIR = "_delta_log"
LAST_CHECKPOINT = f"{LOG_DIR}/_last_checkpoint"
_COMMIT_NAME = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT_NAME = re.compile(r"^(\d{20})\.checkpoint(?:\.parquet|\.[0-9a-fA-F-]{36}\.(?:json|parquet))$")
"""A classic checkpoint, or a UUID-named (v2 spec) one, JSON or Parquet; multi-part
checkpoints are not listed (their versions replay from the commits)."""
SIDECAR_DIR = f"{LOG_DIR}/_sidecars"
"""Where a v2 checkpoint's sidecar files (its add and remove actions) are."""
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def commit_path(version: int) -> str:
    """Relative path of the commit file of ``version`` (20 zero-padded digits)."""
    return f"{LOG_DIR}/{version:020d}.json"


def checkpoint_path(version: int) -> str:
    """Relative path of the checkpoint written at ``version``."""
    return f"{LOG_DIR}/{version:020d}.checkpoint.parquet"


def uuid_checkpoint_path(storage: TableStorage, version: int) -> str | None:
    """Relative path of a UUID-named (v2 spec) checkpoint of ``version`` (the first by name
    when several exist: each is the whole state), or None."""
    names = sorted(n for n in storage.list_names(LOG_DIR)
                   if n.startswith(f"{version:020d}.checkpoint.") and _CHECKPOINT_NAME.match(n)
                   and not n.endswith(".checkpoint.parquet"))
    return f"{LOG_DIR}/{names[0]}" if names else None


def list_log(storage: TableStorage, log_dir: str = LOG_DIR) -> tuple[list[int], list[int]]:
    """Sorted commit versions and checkpoint versions present in the log folder
    (``log_dir``: another one, such as the first layout's for ``upgrade``)."""
    commits, checkpoints = [], []
    for name in storage.list_names(log_dir):
        m = _COMMIT_NAME.match(name)
        if m:
            commits.append(int(m.group(1)))
            continue
        m = _CHECKPOINT_NAME.match(name)
        if m:
            checkpoints.append(int(m.group(1)))
    return sorted(commits), sorted(set(checkpoints))  # a version may have a classic and a UUID-named one


def check_relative_path(path: str, where: str) -> None:
    """Refuse a path that is absolute, has a URL scheme, climbs out with ``..`` or holds
    a NUL character (no filesystem takes one)."""
    if (
        not path
        or "\x00" in path
        or path.startswith("/")
        or path.startswith("\\")
        or _SCHEME.match(path)
        or ".." in posixpath.normpath(path).split("/")
        or ".." in path.replace("\\", "/").split("/")
    ):
        raise UnsafePathError(
            f"{where}: path {path!r} is not inside the table root (absolute paths, URLs and "
            "'..' are refused). The log was not written by indexeddf or was tampered with; "
            "restore the file from a backup or remove the offending commit.",
            where,
        )


def check_action_paths(action: Action, where: str) -> None:
    """Apply :func:`check_relative_path` to every path an action names."""
    if isinstance(action, (AddFile, RemoveFile, CdcFile)):
        check_relative_path(action.path, where)
    elif isinstance(action, IndexEntry):
        for f in action.files:
            check_relative_path(f.path, where)


def parse_commit(text: str, source: str) -> list[Action]:
    """Parse a commit file's text; every error names the file and line."""
    # Delta writers need not end the last line (delta-rs does not): a cut commit shows
    # as a last line that is not JSON. Commits are put whole, so only damage cuts them.
    lines = text.split("\n")
    _refuse_newer_protocol(lines, source)
    actions: list[Action] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            decoded = decode_line(line)
        except ActionParseError as e:
            raise CorruptLogError(
                f"{source} line {number}: {e}. The log file is damaged; restore it from a backup.",
                source,
                number,
            ) from None
        for action in decoded:
            check_action_paths(action, f"{source} line {number}")
            actions.append(action)
    # Index actions ride in the commitInfo line, first in the file; they apply after the
    # commit's file actions, where they stood before they moved there.
    actions = [a for a in actions if not isinstance(a, IndexEntry)] + [a for a in actions if isinstance(a, IndexEntry)]
    if not actions:
        raise CorruptLogError(f"{source}: empty commit (every commit holds at least its commitInfo)", source, 1)
    return actions


def _refuse_newer_protocol(lines: list[str], source: str) -> None:
    """A commit that upgrades the protocol past what we read may hold actions or fields
    we do not know: say so before trying to parse them."""
    for line in lines:
        if '"protocol"' in line[:20]:
            try:
                actions = decode_line(line)
            except ActionParseError:
                continue  # reported with its line number by the parse
            for a in actions:
                if isinstance(a, Protocol):
                    check_readable(a, source)


def read_commit(storage: TableStorage, version: int) -> list[Action]:
    """The actions of one commit; ``FileNotFoundError`` when the version is absent."""
    rel = commit_path(version)
    raw = storage.read_bytes(rel)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorruptLogError(f"{storage.full(rel)}: not UTF-8 ({e})", storage.full(rel)) from None
    return parse_commit(text, storage.full(rel))


_FILE_LINES = ('{"add":', '{"remove":')


def read_commit_for_feed(storage: TableStorage, version: int) -> list[Action]:
    """The actions of one commit that a reader of the change data feed uses: when the commit
    has ``cdc`` actions, every action but its ``add`` and ``remove`` ones, whose lines are never
    parsed (the reader reads nothing else of such a commit, and a copy-on-write change holds
    hundreds of them, each with its statistics); otherwise every action, as :func:`read_commit`."""
    rel = commit_path(version)
    try:
        text = storage.read_bytes(rel).decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorruptLogError(f"{storage.full(rel)}: not UTF-8 ({e})", storage.full(rel)) from None
    if '{"cdc":' in text:
        text = "\n".join(line for line in text.split("\n") if not line.startswith(_FILE_LINES))
    return parse_commit(text, storage.full(rel))


def read_commit_info(storage: TableStorage, version: int) -> CommitInfo | None:
    """The ``commitInfo`` of a version (writers put it on the first line)."""
    for action in read_commit(storage, version):
        if isinstance(action, CommitInfo):
            return action
    return None
