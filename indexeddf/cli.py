"""The ``indexeddf`` admin command: inspect and maintain tables without writing Spark code.

Exit codes: 0 success, 1 a user error (its message on stderr), 2 a concurrency
conflict (another writer won; retry). ``--json`` prints machine-readable output.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import sys
from typing import Any

from . import IndexedTable
from .errors import ConcurrentModificationError, IndexedDFError


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
    entries = IndexedTable.for_path(args.path).history(limit=args.limit)
    rows = [
        {"version": e.version, "timestamp": e.timestamp.isoformat(timespec="milliseconds"), "operation": e.operation,
         "parameters": json.dumps(e.parameters), "rows": e.metrics.get("numOutputRows", "")}
        for e in entries
    ]
    _emit(args, entries, _table(rows, ["version", "timestamp", "operation", "parameters", "rows"]))


def cmd_refresh(args) -> None:
    t = IndexedTable.for_path(args.path)
    versions = t.refresh(index=args.index, mode=args.mode)
    _emit(args, {"versions": versions}, f"refreshed ({args.mode}): committed versions {versions}")


def cmd_lookup(args) -> None:
    t = IndexedTable.for_path(args.path, version=args.version)
    index = t.snapshot.indexes.get(args.index or "primary")
    types = [t.schema.field(c).type for c in index.columns] if index else []
    keys = [_parse_key(k, types) for k in args.keys]
    rows = t.lookup(keys, index=args.index).to_pylist()
    _emit(args, rows, _table(rows, t.schema.names) + f"\n({len(rows)} rows)")


def _parse_key(text: str, types) -> Any:
    """A key from the command line: comma-separated values for a composite index."""
    import pyarrow as pa

    parts = text.split(",") if len(types) > 1 else [text]
    values = []
    for raw, t in zip(parts, types):
        if raw.lower() == "null":
            values.append(None)
        else:
            values.append(pa.scalar(raw).cast(t).as_py())
    return tuple(values) if len(types) > 1 else values[0]


def cmd_index(args) -> None:
    t = IndexedTable.for_path(args.path)
    if args.action == "list":
        rows = [dataclasses.asdict(i) for i in t.indexes()]
        for r in rows:
            r["columns"] = ",".join(r["columns"])
        _emit(args, rows, _table(rows, list(rows[0])) if rows else "(no indexes)")
    elif args.action == "create":
        if not args.name or not args.columns:
            raise IndexedDFError("index create needs --name and --columns")
        v = t.create_index(args.name, args.columns.split(","), num_buckets=args.num_buckets)
        _emit(args, {"version": v}, f"index {args.name!r} created at version {v}")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the command (every option documented in --help)."""
    p = argparse.ArgumentParser(prog="indexeddf", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("describe", help="location, id, version, files, bytes, buckets, properties, indexes")
    s.add_argument("path", help="table location (folder or fsspec URL)")
    s.set_defaults(run=cmd_describe)

    s = sub.add_parser("history", help="commits, newest first")
    s.add_argument("path", help="table location")
    s.add_argument("--limit", type=int, default=None, help="at most N commits")
    s.set_defaults(run=cmd_history)

    s = sub.add_parser("refresh", help="bring indexes up to the newest version")
    s.add_argument("path", help="table location")
    s.add_argument("--index", default=None, help="one index (default: every ACTIVE index)")
    s.add_argument("--mode", choices=["incremental", "full", "quick"], default="incremental",
                   help="incremental: index appended files; full: rebuild; quick: record the version only")
    s.set_defaults(run=cmd_refresh)

    s = sub.add_parser("lookup", help="rows whose index key equals KEY (composite keys: comma-separated)")
    s.add_argument("path", help="table location")
    s.add_argument("keys", nargs="+", metavar="KEY", help="key values; 'null' for NULL")
    s.add_argument("--index", default=None, help="index name (default: primary)")
    s.add_argument("--version", type=int, default=None, help="table version (default: newest)")
    s.set_defaults(run=cmd_lookup)

    s = sub.add_parser("index", help="list or create indexes")
    s.add_argument("action", choices=["list", "create"], help="what to do")
    s.add_argument("path", help="table location")
    s.add_argument("--name", help="index name (create)")
    s.add_argument("--columns", help="comma-separated columns (create)")
    s.add_argument("--num-buckets", type=int, default=None, help="index buckets (create; default: the table's)")
    s.set_defaults(run=cmd_index)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns its exit code."""
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except ConcurrentModificationError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except IndexedDFError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
