"""The log's files (Delta's ``_delta_log/``): naming, listing and parsing commits into actions.

The wire format of each line is ``spec/delta.py``'s; this module frames files and
names the file and line of every error.
"""

from __future__ import annotations

import json
import posixpath
import re

from ..errors import CorruptLogError, UnsafePathError
from ..spec.actions import (
    Action,
    ActionParseError,
    AddFile,
    CdcFile,
    CommitInfo,
    IndexEntry,
    Metadata,
    Protocol,
    RemoveFile,
)
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
    """Refuse a path that is absolute, has a URL scheme, climbs out with ``..``, names a
    folder (the table root itself, or a trailing ``/``) or holds a NUL character (no
    filesystem takes one)."""
    if (
        not path
        or "\x00" in path
        or path.endswith(("/", "\\"))
        or posixpath.normpath(path.replace("\\", "/")) == "."
        or path.startswith("/")
        or path.startswith("\\")
        or _SCHEME.match(path)
        or ".." in posixpath.normpath(path).split("/")
        or ".." in path.replace("\\", "/").split("/")
    ):
        raise UnsafePathError(
            f"{where}: path {path!r} is not inside the table root (absolute paths, URLs, "
            "'..' and folders are refused). The log was not written by indexeddf or was tampered with; "
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


_ACTION_NAME = re.compile(r'\s*\{\s*"([A-Za-z]+)"\s*:')
"""The action a Delta log line holds, read from its first key without parsing the line."""


def read_feed_commit(storage: TableStorage, version: int) -> tuple[list[Action], int | None]:
    """What a reader of the change data feed needs of one commit, only those lines decoded:
    its ``cdc`` actions when it has any, else its ``add`` and ``remove`` actions; its
    ``metaData``; and its commitInfo's timestamp (None without one). A commit's index actions
    (in its commitInfo) and, when it wrote change data, its file actions are never decoded:
    they would be most of the cost of a feed of MERGEs. ``FileNotFoundError`` when absent."""
    rel = commit_path(version)
    source = storage.full(rel)
    raw = storage.read_bytes(rel)
    found = _change_data_commit(raw, source)
    if found is not None:
        return found
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorruptLogError(f"{source}: not UTF-8 ({e})", source) from None
    lines = text.split("\n")
    _refuse_newer_protocol(lines, source)
    return _feed_actions([(n, line, _line_action(line)) for n, line in enumerate(lines, start=1) if line.strip()],
                         source)


_FILE_LINES = (b'{"add":', b'{"remove":')
"""How a compact writer's ``add`` and ``remove`` lines start: skipped unread in a commit that
wrote change data (a MERGE's commit is mostly these)."""


def _change_data_commit(raw: bytes, source: str) -> tuple[list[Action], int | None] | None:
    """:func:`read_feed_commit` of a commit holding ``cdc`` lines, its file lines never decoded
    (not even from UTF-8); None when no line is a ``cdc`` action, or one is a ``protocol``
    (the caller's whole read checks it)."""
    named = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if line.startswith(_FILE_LINES) or not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptLogError(f"{source} line {number}: not UTF-8 ({e})", source, number) from None
        named.append((number, text, _line_action(text)))
    kinds = {kind for _, _, kind in named}
    if "cdc" not in kinds or "protocol" in kinds or None in kinds:
        return None
    return _feed_actions(named, source)


def _feed_actions(named: list[tuple[int, str, str | None]], source: str) -> tuple[list[Action], int | None]:
    """The feed's actions and timestamp of a commit's lines (number, text, action name)."""
    files = {"cdc"} if any(kind == "cdc" for _, _, kind in named) else {"add", "remove"}
    actions: list[Action] = []
    timestamp = None
    for number, line, kind in named:
        if kind == "commitInfo":
            timestamp = _commit_timestamp(line, source, number)
        elif kind is None or kind == "metaData" or kind in files:
            for a in _decoded(line, source, number):
                if not isinstance(a, (IndexEntry, CommitInfo)) and (kind is not None or _feed_action(a, files)):
                    check_action_paths(a, f"{source} line {number}")
                    actions.append(a)
                elif isinstance(a, CommitInfo):
                    timestamp = a.timestamp
    return actions, timestamp


def read_commit_metadata(storage: TableStorage, version: int) -> Metadata | None:
    """The ``metaData`` a commit sets (None: it keeps the table's), no other line decoded: what
    a reader holding an older version needs of the commits it skips."""
    rel = commit_path(version)
    source = storage.full(rel)
    try:
        text = storage.read_bytes(rel).decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorruptLogError(f"{source}: not UTF-8 ({e})", source) from None
    found = None
    for number, line in enumerate(text.split("\n"), start=1):
        kind = _line_action(line) if line.strip() else ""
        if kind is None or kind == "metaData":
            found = next((a for a in _decoded(line, source, number) if isinstance(a, Metadata)), found)
    return found


def _line_action(line: str) -> str | None:
    # A compact writer's line ({"add":{...) is named by its prefix, four times faster than the
    # pattern, which names the others (whitespace before or inside the first key's framing).
    if line.startswith('{"'):
        end = line.find('":', 2)
        name = line[2:end]
        if end > 2 and name.isascii() and name.isalpha():
            return name
    m = _ACTION_NAME.match(line)
    return m.group(1) if m else None


def _feed_action(a: Action, files: set[str]) -> bool:
    """Whether a reader of the feed keeps ``a`` (a line whose action was not read from its start)."""
    kind = {CdcFile: "cdc", AddFile: "add", RemoveFile: "remove"}.get(type(a))
    return kind in files if kind is not None else isinstance(a, Metadata)


_INFO_TIMESTAMP = re.compile(r'\{"commitInfo":\{"timestamp":(\d+)[,}]')
"""A compact commitInfo line that starts with its timestamp (indexeddf's, Spark's, delta-rs's):
read without parsing the rest of the line (a MERGE's index actions ride there, kilobytes)."""


def _commit_timestamp(line: str, source: str, number: int) -> int | None:
    m = _INFO_TIMESTAMP.match(line)
    if m:
        return int(m.group(1))
    try:
        body = json.loads(line).get("commitInfo")
    except (json.JSONDecodeError, AttributeError):
        raise CorruptLogError(f"{source} line {number}: not a JSON object. The log file is damaged; restore it "
                              "from a backup.", source, number) from None
    value = body.get("timestamp") if isinstance(body, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _decoded(line: str, source: str, number: int) -> list[Action]:
    try:
        return decode_line(line)
    except ActionParseError as e:
        raise CorruptLogError(f"{source} line {number}: {e}. The log file is damaged; restore it from a backup.",
                              source, number) from None


def read_commit_info(storage: TableStorage, version: int) -> CommitInfo | None:
    """The ``commitInfo`` of a version (writers put it on the first line)."""
    for action in read_commit(storage, version):
        if isinstance(action, CommitInfo):
            return action
    return None
