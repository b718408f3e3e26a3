"""``indexeddf upgrade``: a table of the first layout (``_indexeddf_log/``, indexeddf's
own line format) becomes a Delta table (``_delta_log/``) in place, data untouched.

What is kept: every version whose commit is still in the old log, under the same
version number, with its actions, commit timestamp and operation; every old checkpoint
becomes a Delta checkpoint of the same version (so versions whose commits were cleaned
up before a checkpoint stay as unreadable as they were). File ids, index definitions,
states and index files are kept as they are, so indexes stay valid. What changes: the
protocol action of each commit becomes the Delta protocol the schema needs
(``spec.features.protocol_for``), and file statistics keep ``numRecords``,
``nullCount`` and the min/max of integer, string and date columns only (the first
layout rendered timestamps, decimals and floats differently from Delta; a Delta reader
would misread them). The old log is left in place, untouched, for the user to delete.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import CorruptLogError, TableExistsError, TableNotFoundError
from ..spec.actions import Action, ActionParseError, AddFile, FileStats, Metadata, Protocol, parse_line
from ..spec.delta import encode_commit
from ..spec.features import protocol_for
from ..spec.schema import arrow_schema
from . import checkpoint as ckpt
from .log import LOG_DIR, commit_path, list_log
from .snapshot import ReplayState
from .storage import TableStorage

OLD_LOG_DIR = "_indexeddf_log"
"""Where the first layout kept its log."""


@dataclass
class UpgradeResult:
    """What ``upgrade`` wrote."""

    commits: list[int] = field(default_factory=list)
    """Versions rewritten as Delta commits."""
    checkpoints: list[int] = field(default_factory=list)
    """Versions whose old checkpoint became a Delta checkpoint."""


def _parse_lines(lines: list[str], source: str) -> list[Action]:
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            out.append(parse_line(line))
        except ActionParseError as e:
            raise CorruptLogError(f"{source} line {number}: {e}", source, number) from None
    return out


def _old_commit(storage: TableStorage, version: int) -> list[Action]:
    rel = f"{OLD_LOG_DIR}/{version:020d}.json"
    return _parse_lines(storage.read_bytes(rel).decode("utf-8").split("\n"), storage.full(rel))


def _old_checkpoint(storage: TableStorage, version: int) -> list[Action]:
    rel = f"{OLD_LOG_DIR}/{version:020d}.checkpoint.parquet"
    try:
        lines = pq.ParquetFile(io.BytesIO(storage.read_bytes(rel))).read(columns=["line"]).column("line").to_pylist()
    except (pa.ArrowInvalid, OSError, KeyError) as e:
        raise CorruptLogError(f"{storage.full(rel)}: not a readable checkpoint ({e})", storage.full(rel)) from None
    return _parse_lines(lines, storage.full(rel))


_KEPT_STAT_TYPES = ("int8", "int16", "int32", "int64", "string", "large_string", "date32[day]")


def _delta_form(actions: list[Action], metadata: Metadata | None) -> list[Action]:
    """The actions as the Delta layout writes them: the protocol the schema needs, and
    statistics reduced to what renders the same in both layouts."""
    out = []
    types = {f.name: str(f.type) for f in arrow_schema(metadata.schema_)} if metadata else {}
    for a in actions:
        if isinstance(a, Metadata):
            types = {f.name: str(f.type) for f in arrow_schema(a.schema_)}
        if isinstance(a, Protocol):
            meta = next((m for m in actions if isinstance(m, Metadata)), metadata)
            a = protocol_for(meta.schema_) if meta is not None else a
        elif isinstance(a, AddFile) and a.stats is not None:
            keep = {c for c, t in types.items() if t in _KEPT_STAT_TYPES}
            s = a.stats
            a = a.model_copy(update={"stats": FileStats(
                numRecords=s.numRecords, nullCount=s.nullCount,
                minValues={c: v for c, v in s.minValues.items() if c in keep},
                maxValues={c: v for c, v in s.maxValues.items() if c in keep})})
        out.append(a)
    return out


def upgrade(storage: TableStorage, progress=None) -> UpgradeResult:
    """Write ``_delta_log/`` from ``_indexeddf_log/`` (see the module docstring).

    Stop every writer of the table first: a commit made to the old log after the
    upgrade starts is not carried over. Re-running after an interruption rewrites the
    Delta log from the old one, as long as no Delta commit past the old log's newest
    version exists (then the table was written as a Delta table since, and this raises
    ``TableExistsError``).
    """
    say = progress or (lambda _m: None)
    commits, checkpoints = list_log(storage, OLD_LOG_DIR)
    if not commits and not checkpoints:
        raise TableNotFoundError(f"no {OLD_LOG_DIR}/ at {storage.url}: nothing to upgrade")
    newest = max(commits[-1] if commits else -1, checkpoints[-1] if checkpoints else -1)
    delta_commits, _ = list_log(storage)
    if delta_commits and delta_commits[-1] > newest:
        raise TableExistsError(
            f"{storage.url} already has Delta commits past version {newest} of {OLD_LOG_DIR}/: it was "
            "upgraded and written since; delete the old log when you no longer need it"
        )
    result = UpgradeResult()
    state = ReplayState()
    start = 0
    if not commits or commits[0] > 0:
        # The oldest commits were cleaned up: start from the checkpoint they left behind.
        usable = [c for c in checkpoints if not commits or c >= commits[0] - 1]
        if not usable:
            raise CorruptLogError(f"{storage.url}: {OLD_LOG_DIR}/ starts at version {commits[0]} with no "
                                  "checkpoint before it; the old log cannot be replayed", storage.url)
        base = usable[0] if commits else usable[-1]
        state.apply(_delta_form(_old_checkpoint(storage, base), None))
        snap = state.freeze(storage, base)
        ckpt.write_checkpoint(storage, snap)
        result.checkpoints.append(base)
        start = base + 1
    for v in [c for c in commits if c >= start]:
        actions = _delta_form(_old_commit(storage, v), state.metadata)
        storage.write_bytes(commit_path(v), encode_commit(actions).encode("utf-8"))
        state.apply(actions)
        result.commits.append(v)
        if v in checkpoints:
            ckpt.write_checkpoint(storage, state.freeze(storage, v))
            result.checkpoints.append(v)
        say(f"upgrade: version {v} -> {LOG_DIR}/")
    say(f"upgrade: {len(result.commits)} commits and {len(result.checkpoints)} checkpoints written to "
        f"{LOG_DIR}/; {OLD_LOG_DIR}/ is untouched (delete it when you no longer need it)")
    return result
