"""The ``indexeddf`` admin command: inspect and maintain tables without writing Spark code.

Exit codes: 0 success, 1 a user error (its message on stderr), 2 a concurrency
conflict (another writer won; retry). ``--json`` prints machine-readable output; it
and ``-q`` go before or after the command's own arguments. Long commands (refresh,
optimize, vacuum, index create/vacuum/cancel) show progress on stderr: a bar on a
terminal, plain lines otherwise (``-q`` silences them). See docs/admin.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import re
import shutil
import sys
from typing import Any, TextIO

from . import IndexedTable, __version__
from .errors import ConcurrentModificationError, IndexedDFError, InvalidOptionError


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return value


def _table(rows: list[dict], columns: list[str]) -> str:
    """A plain text table for people."""
    cells = [[str(r.get(c, "")) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
    return "\n".join([line(columns), line(["-" * w for w in widths])] + [line(r) for r in cells])


def _emit(args, payload: Any, text: str) -> None:
    print(json.dumps(_jsonable(payload), indent=2) if args.json else text)


def cmd_describe(args) -> None:
    """``describe``: location, id, version, files, bytes, buckets, properties, indexes."""
    t = IndexedTable.for_path(args.path)
    d = t.detail()
    indexes = [
        {"name": i["name"], "columns": ",".join(i["columns"]), "kind": i["kind"], "state": i["state"],
         "covered": i["covered_version"], "files": i["num_files"], "bytes": i["size_bytes"],
         "appended": f"{i['appended_ratio']:.1%}", "deleted": f"{i['deleted_ratio']:.1%}"}
        for i in d["indexes"]
    ]
    head = "\n".join(f"{k}: {v}" for k, v in d.items() if k != "indexes")
    text = head + "\n\nindexes:\n" + (_table(indexes, list(indexes[0])) if indexes else "(none)")
    _emit(args, d, text)


def cmd_history(args) -> None:
    """``history``: commits, newest first."""
    entries = IndexedTable.for_path(args.path).history(limit=args.limit)
    rows = [
        {"version": e.version, "timestamp": e.timestamp.isoformat(timespec="milliseconds"), "operation": e.operation,
         "parameters": json.dumps(e.parameters), "rows": e.metrics.get("numOutputRows", "")}
        for e in entries
    ]
    _emit(args, entries, _table(rows, ["version", "timestamp", "operation", "parameters", "rows"]))


class Progress:
    """Progress of a long command on ``stream``: on a terminal one line redrawn in place,
    with a bar when the message counts ``done/total``; elsewhere one plain line each."""

    _COUNT = re.compile(r"(\d+)/(\d+)")

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.live = stream.isatty()
        self.drawn = False

    def __call__(self, message: str) -> None:
        if not self.live:
            print(message, file=self.stream, flush=True)
            return
        width = shutil.get_terminal_size((80, 24)).columns
        m = self._COUNT.search(message)
        bar = ""
        if m and int(m.group(2)) > 0:
            done, total = int(m.group(1)), int(m.group(2))
            filled = min(20, 20 * done // total)
            bar = "[" + "#" * filled + "." * (20 - filled) + "] "
        self.stream.write("\r\x1b[K" + (bar + message)[: max(10, width - 1)])
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        """End the redrawn line, so what follows starts on a line of its own."""
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False


def _progress(args):
    """The progress display of a command (None with --quiet)."""
    if getattr(args, "quiet", False):
        return None
    args.progress_display = Progress(sys.stderr)
    return args.progress_display


def _spark(args):
    """The Spark session a command runs its job in (``--spark-master``, ``--spark-conf``),
    started with the connector (``indexeddf.spark_session``); None without ``--spark-master``
    (the command works in this process). The session is stopped when the command ends."""
    master, confs = getattr(args, "spark_master", None), getattr(args, "spark_conf", None) or []
    if not master:
        if confs:
            raise InvalidOptionError("--spark-conf needs --spark-master (the Spark master the job runs on)")
        return None
    pairs = []
    for text in confs:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise InvalidOptionError(f"--spark-conf {text!r}: give a Spark setting as KEY=VALUE")
        pairs.append((key.strip(), value))
    from . import spark_session

    args.spark_session = spark_session(master, dict(pairs), app_name=f"indexeddf {args.command}")
    return args.spark_session


def cmd_refresh(args) -> None:
    """``refresh``: bring indexes up to the newest version."""
    versions = IndexedTable.for_path(args.path).refresh(args.index, mode=args.mode, progress=_progress(args),
                                                        spark=_spark(args))
    _emit(args, {"versions": versions}, f"refreshed ({args.mode}): committed versions {versions}")


def cmd_optimize(args) -> None:
    """``optimize``: compact small data files per bucket, and their index files."""
    t = IndexedTable.for_path(args.path)
    before = t.version
    v = t.optimize(mode=args.mode, progress=_progress(args), spark=_spark(args), num_buckets=args.num_buckets)
    entry = t.history(limit=1)[0] if v != before else None
    metrics = entry.metrics if entry else {}
    payload = {"version": v, "committed": v != before, "metrics": metrics}
    text = (f"optimized ({args.mode}) at version {v}: {metrics.get('numRemovedFiles', 0)} data files -> "
            f"{metrics.get('numAddedFiles', 0)}, {metrics.get('numIndexFilesRemoved', 0)} index files -> "
            f"{metrics.get('numIndexFilesAdded', 0)}") if v != before else f"nothing to optimize (version {v})"
    _emit(args, payload, text)


def cmd_vacuum(args) -> None:
    """``vacuum``: delete files that no version inside the retention needs."""
    t = IndexedTable.for_path(args.path)
    r = t.vacuum(retention_hours=args.retention_hours, dry_run=args.dry_run,
                 enforce_retention=not args.no_enforce_retention, progress=_progress(args))
    verb = "would delete" if r.dry_run else "deleted"
    lines = ([f"  {f}" for f in r.files] if r.dry_run else []) + [
        f"{verb} {len(r.files)} files ({r.bytes} bytes); retention {r.retention_hours:g} h; "
        f"versions from {r.oldest_version_kept} on keep all their files"]
    _emit(args, r, "\n".join(lines))


def cmd_convert(args) -> None:
    """``convert``: index, in place, a Delta table another engine wrote."""
    t = IndexedTable.convert(args.path, [c.strip() for c in args.index_columns.split(",") if c.strip()],
                             num_buckets=args.num_buckets, progress=_progress(args), spark=_spark(args))
    _emit(args, {"version": t.version, "indexColumns": t.index_columns, "numBuckets": t.num_buckets},
          f"indexed by {t.index_columns} into {t.num_buckets} buckets at version {t.version}; "
          "its files get buckets with: indexeddf optimize PATH --mode full")


def cmd_upgrade(args) -> None:
    """``upgrade``: an ``_indexeddf_log`` table becomes a Delta table in place."""
    r = IndexedTable.upgrade(args.path, progress=_progress(args))
    _emit(args, {"commits": r.commits, "checkpoints": r.checkpoints},
          f"upgraded: {len(r.commits)} commits ({r.commits[0] if r.commits else '-'}..{r.commits[-1] if r.commits else '-'}) "
          f"and {len(r.checkpoints)} checkpoints written to _delta_log/; _indexeddf_log/ is untouched "
          "(delete it when you no longer need it)")


def cmd_restore(args) -> None:
    """``restore``: commit a new version whose content equals an older one's."""
    t = IndexedTable.for_path(args.path)
    before = t.update_incremental().version
    v = t.restore(args.version)
    text = f"restored to the content of version {args.version} as version {v}" if v != before else \
        f"version {before} already has the content of version {args.version}; nothing committed"
    _emit(args, {"version": v, "restored": args.version, "committed": v != before}, text)


def cmd_lookup(args) -> None:
    """``lookup``: rows whose index key equals the keys given."""
    t = IndexedTable.for_path(args.path, version=args.version)
    index = t.snapshot.indexes.get(args.index or "primary")
    types = [t.schema.field(c).type for c in index.columns] if index else []
    keys = [_parse_key(k, types) for k in args.keys]
    rows = t.lookup(keys, index=args.index).to_pylist()
    _emit(args, rows, _table(rows, t.schema.names) + f"\n({len(rows)} rows)")


def _parse_key(text: str, types) -> Any:
    """A key from the command line: comma-separated values for a composite index, ``null``
    for NULL. The text is handed to ``lookup`` as it is: the lookup casts it to the index
    column's type and names the column and its type when it is no value of it."""
    parts = text.split(",") if len(types) > 1 else [text]
    values = [None if raw.lower() == "null" else raw for raw in parts]
    return tuple(values) if len(types) > 1 else values[0]


def cmd_index(args) -> None:
    """``index``: list, create, drop, restore, vacuum, cancel or optimize indexes."""
    t = IndexedTable.for_path(args.path)
    name = args.name or args.index_name
    if args.action == "list":
        rows = [dataclasses.asdict(i) for i in t.indexes()]
        for r in rows:
            r["columns"] = ",".join(r["columns"])
        _emit(args, rows, _table(rows, list(rows[0])) if rows else "(no indexes)")
        return
    if not name:
        raise InvalidOptionError(f"index {args.action} needs an index name (NAME or --name)")
    if args.action not in ("create", "optimize") and args.spark_master:
        raise InvalidOptionError(f"index {args.action} runs no Spark job: --spark-master is for index create "
                                 "and index optimize")
    if args.action == "create":
        if not args.columns:
            raise InvalidOptionError("index create needs --columns")
        v = t.create_index(name, args.columns.split(","), args.num_buckets, progress=_progress(args),
                           spark=_spark(args))
    elif args.action == "optimize":
        v = t.optimize_index(name, mode=args.mode or "quick", progress=_progress(args), spark=_spark(args))
    else:
        run = {"drop": t.drop_index, "restore": t.restore_index}.get(args.action)
        if run is not None:
            v = run(name)
        else:
            v = {"vacuum": t.vacuum_index, "cancel": t.cancel_index}[args.action](name, progress=_progress(args))
    state = t.update_incremental().snapshot.indexes[name].state
    done = {"create": "created", "drop": "dropped", "restore": "restored", "vacuum": "vacuumed",
            "cancel": "cancelled", "optimize": "optimized"}[args.action]
    _emit(args, {"version": v, "name": name, "state": state}, f"index {name!r} {done} at version {v}; now {state}")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the command (every option documented in --help)."""
    p = argparse.ArgumentParser(prog="indexeddf", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--version", action="version", version=f"indexeddf {__version__}")
    # Each command takes --json and -q too, where people type them: after its arguments.
    # SUPPRESS keeps a command's default from undoing the same flag given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON instead of tables")
    common.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="no progress on stderr")
    # The commands whose work can run as a Spark job (create or optimize an index, refresh,
    # optimize, convert).
    on_spark = argparse.ArgumentParser(add_help=False)
    on_spark.add_argument("--spark-master", metavar="URL", default=None,
                          help="run the work as one Spark job on this master (local[2], spark://host:7077, yarn, ...), "
                               "the command's process being the driver; default: in this process, without Spark")
    on_spark.add_argument("--spark-conf", metavar="KEY=VALUE", action="append", default=[],
                          help="a Spark setting of that session (repeatable), e.g. spark.executor.memory=4g")
    sub = p.add_subparsers(dest="command", required=True)
    add = sub.add_parser

    def command(name: str, spark: bool = False, **kw):
        return add(name, parents=[common] + ([on_spark] if spark else []), **kw)


    s = command("describe", help="location, id, version, files, bytes, buckets, properties, indexes")
    s.add_argument("path", help="table location (folder or fsspec URL)")
    s.set_defaults(run=cmd_describe)

    s = command("history", help="commits, newest first")
    s.add_argument("path", help="table location")
    s.add_argument("--limit", type=int, default=None, help="at most N commits")
    s.set_defaults(run=cmd_history)

    s = command("refresh", spark=True, help="bring indexes up to the newest version (REFRESHING, then ACTIVE)")
    s.add_argument("path", help="table location")
    s.add_argument("--index", default=None, help="one index (default: every ACTIVE index)")
    s.add_argument("--mode", choices=["incremental", "full", "quick"], default="incremental",
                   help="incremental: index appended files; full: rebuild; quick: record the version only")
    s.set_defaults(run=cmd_refresh)

    s = command("lookup", help="rows whose index key equals KEY (composite keys: comma-separated)")
    s.add_argument("path", help="table location")
    s.add_argument("keys", nargs="+", metavar="KEY", help="key values; 'null' for NULL")
    s.add_argument("--index", default=None, help="index name (default: primary)")
    s.add_argument("--version", type=int, default=None, help="table version (default: newest)")
    s.set_defaults(run=cmd_lookup)

    s = command("optimize", spark=True, help="compact small data files per bucket, and their index files (one commit, no data change)")
    s.add_argument("path", help="table location")
    s.add_argument("--mode", choices=["quick", "full"], default="quick",
                   help="quick: merge the files under 32 MiB of each bucket; full: one file per bucket (default quick)")
    s.add_argument("--num-buckets", type=int, default=None,
                   help="with --mode full: rewrite the table into this many buckets (see docs/indexes.md)")
    s.set_defaults(run=cmd_optimize)

    s = command("vacuum", help="delete files that no version inside the retention needs (never the log)")
    s.add_argument("path", help="table location")
    s.add_argument("--retention-hours", type=float, default=None,
                   help="keep every file of the versions of the last H hours (default and minimum: the table "
                        "property indexeddf.vacuum.minRetentionHours, 168)")
    s.add_argument("--dry-run", action="store_true", help="list the files that would be deleted; delete nothing")
    s.add_argument("--no-enforce-retention", action="store_true",
                   help="allow a retention below indexeddf.vacuum.minRetentionHours (may delete files of running writes)")
    s.set_defaults(run=cmd_vacuum)

    s = command("restore", help="commit a new version whose content (files, indexes) equals VERSION's")
    s.add_argument("path", help="table location")
    s.add_argument("version", type=int, metavar="VERSION", help="the version to go back to")
    s.set_defaults(run=cmd_restore)

    s = command("convert", spark=True, help="index, in place, a Delta table another engine wrote (no data rewritten)")
    s.add_argument("path", help="location of the Delta table")
    s.add_argument("--index-columns", required=True, help="comma-separated columns to bucket and index by")
    s.add_argument("--num-buckets", type=int, default=None,
                   help="buckets (default: from the table's bytes, 16 to 1024; see docs/indexes.md)")
    s.set_defaults(run=cmd_convert)

    s = command("upgrade", help="turn a table of the first layout (_indexeddf_log/) into a Delta table in place",
                description="Every version still in _indexeddf_log/ is rewritten to _delta_log/ under the same "
                            "number (actions, timestamps, indexes kept; statistics reduced to integer, string "
                            "and date min/max); old checkpoints become Delta checkpoints; no data file is "
                            "rewritten and _indexeddf_log/ is left untouched. Stop the table's writers first.")
    s.add_argument("path", help="table location")
    s.set_defaults(run=cmd_upgrade)

    s = command("index", spark=True, help="list, create, drop, restore, vacuum, cancel or optimize indexes",
                       description="list: every index and its state. create: build a secondary index (--columns). "
                                   "drop: soft delete (DELETED, files kept). restore: DELETED -> ACTIVE. vacuum: "
                                   "delete a DELETED index's files for good. cancel: return an index stuck in a "
                                   "transient state (crashed operation) to its last stable state. optimize: merge "
                                   "an index's small files. --spark-master: create and optimize only.")
    s.add_argument("action", choices=["list", "create", "drop", "restore", "vacuum", "cancel", "optimize"], help="what to do")
    s.add_argument("path", help="table location")
    s.add_argument("index_name", nargs="?", metavar="NAME", help="index name (all actions but list)")
    s.add_argument("--name", help="index name (same as NAME)")
    s.add_argument("--columns", help="comma-separated columns (create)")
    s.add_argument("--num-buckets", type=int, default=None, help="index buckets (create; default: the table's)")
    s.add_argument("--mode", choices=["quick", "full"], default=None, help="optimize: quick (small files) or full")
    s.set_defaults(run=cmd_index)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns its exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # argparse: 0 after --help, 2 for a usage error (a user error here)
        return 1 if e.code == 2 else int(e.code or 0)
    try:
        args.run(args)
    except ConcurrentModificationError as e:
        _close_progress(args)
        print(f"error: {e}", file=sys.stderr)
        return 2
    except IndexedDFError as e:
        _close_progress(args)
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        _stop_spark(args)
    _close_progress(args)
    return 0


def _stop_spark(args) -> None:
    """Stop the session ``--spark-master`` started (its executors are the command's)."""
    session = getattr(args, "spark_session", None)
    if session is not None:
        session.stop()
        args.spark_session = None


def _close_progress(args) -> None:
    display = getattr(args, "progress_display", None)
    if display is not None:
        display.close()


if __name__ == "__main__":
    raise SystemExit(main())
