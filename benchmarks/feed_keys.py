"""The change data feed of one key against the whole feed, and the whole feed against
delta-rs's ``load_cdf``, over ten 1,000-row MERGEs of the check table of benchmarks/changes.py.

    python benchmarks/feed_keys.py [--rows 20000000] [--buckets 32] [--rounds 5] [--merges 10]
                                   [--source-rows 1000] [--out benchmarks/results]

The table is the one ``changes.py`` builds (keys 0..rows-1, optimized into one sorted file a
bucket), with ``delta.enableChangeDataFeed = true`` set afterwards; then ``--merges`` upserts
of 1,000 source rows each (half existing random keys, updated; half new keys, inserted) by
the Python engine. Timed, each opening the table as a reader would (``--rounds`` rounds,
median), each on a table opened before the clock: the whole feed of the merges' versions
(``IndexedTable.changes``), one key's feed (``changes(..., keys=[k])``, a key two merges
updated) and delta-rs's ``DeltaTable.load_cdf`` of the same versions read into Arrow, beside the
floors of benchmarks/feed_floor.py (the whole feed's commits and change files read by pyarrow; the
key's files alone, known in advance, only its bucket's row groups that admit it: a perfect index
over the feed). Prints the timings and the two ratios (goals: the key
at least 20x faster than the whole feed, the whole feed at least 5x faster than delta-rs) and each
read's ratio to its floor,
and writes them as a results JSON into ``--out``. ``--source-rows`` sizes the merges (a
larger change's data spans many row groups, of which a key's read decodes one a version).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from changes import (  # noqa: E402  (the check table of changes.py)
    SCENARIOS,  # noqa: E402
    _record,
    _rows,
    _shown,
    build,
)
from feed_floor import commits_floor, files_floor, key_floor  # noqa: E402

PRINTED: list[str] = []


def say(line: str) -> None:
    """Print a line and keep it for the results JSON."""
    print(line, flush=True)
    PRINTED.append(line)


def merge_source(rows: int, n: int, i: int, shared: np.ndarray) -> pa.Table:
    """The ``i``-th merge's ``n`` source rows: half existing keys (``shared`` among them, so a
    key has changes in several versions), half keys no merge inserted before."""
    rng = np.random.default_rng(100 + i)
    old = np.concatenate([shared, rng.choice(rows, n // 2, replace=False)])
    old = old[np.sort(np.unique(old, return_index=True)[1])][:n // 2]  # distinct, shared first
    new = np.arange(rows + i * n, rows + i * n + n - len(old), dtype=np.int64)
    out = _rows(0, n, 1000 + i)
    return out.set_column(0, "k", pa.array(np.concatenate([old.astype(np.int64), new])))


def timed(fn, rounds: int) -> tuple[list[float], object]:
    """Wall times of ``rounds`` calls of ``fn`` (after one untimed warm-up) and its last result."""
    out = fn()
    secs = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn()
        secs.append(time.perf_counter() - t0)
    return secs, out


def run(args) -> dict:
    from deltalake import DeltaTable

    from indexeddf import IndexedTable
    from indexeddf.spec.bucketing import bucket_ids

    work = Path(args.work or tempfile.mkdtemp(prefix="feed-keys-"))
    path = work / "t"
    t0 = time.perf_counter()
    build(path, args.rows, args.buckets)
    t = IndexedTable.for_path(str(path))
    t.set_properties({"delta.enableChangeDataFeed": "true"})
    say(f"table: {args.rows:,} rows, {args.buckets} buckets, built in {time.perf_counter() - t0:.0f} s")
    key = int(np.random.default_rng(7).integers(0, args.rows))
    first = t.version + 1
    t0 = time.perf_counter()
    for i in range(args.merges):
        shared = np.array([key] if i in (2, 7) else [], np.int64)
        (t.merge(merge_source(args.rows, args.source_rows, i, shared), "t.k = s.k", source_alias="s", target_alias="t")
         .when_matched_update_all().when_not_matched_insert_all().execute())
    last = t.version
    say(f"{args.merges} merges of {args.source_rows:,} source rows (versions {first}..{last}) in "
        f"{time.perf_counter() - t0:.1f} s")

    # Each engine's table is open (its log read) before the clock, as a service's would be.
    ours, theirs_table = IndexedTable.for_path(str(path)), DeltaTable(str(path))

    def whole():
        return ours.changes(first, last)

    def one_key():
        return ours.changes(first, last, keys=[key])

    def delta_rs():
        return theirs_table.load_cdf(starting_version=first, ending_version=last).read_all()

    whole_s, feed = timed(whole, args.rounds)
    key_s, keyed = timed(one_key, args.rounds)
    theirs_s, theirs = timed(delta_rs, args.rounds)
    # The floors (benchmarks/feed_floor.py): the whole feed's commits and files read by pyarrow;
    # the key's: only the files of the versions that changed it (known), the row groups that admit it.
    key_versions = sorted(set(feed.filter(pc.equal(feed["k"], key))["_commit_version"].to_pylist()))
    key_files = [f for v in key_versions for f in commits_floor(path, v, v)]
    floor_s, floor = timed(lambda: files_floor(commits_floor(path, first, last)), args.rounds)
    bucket = int(bucket_ids([pa.array([key], pa.int64())], args.buckets)[0])
    key_floor_s, key_rows = timed(lambda: key_floor(key_files, "k", key, bucket), args.rounds)
    assert floor.num_rows == feed.num_rows and key_rows.num_rows == keyed.num_rows
    # The answers agree before any time counts: the key's rows are the whole feed's, and
    # delta-rs reads as many rows.
    mask = np.asarray(feed.column("k").to_numpy() == key)
    assert keyed.num_rows == int(mask.sum()) > 0, (keyed.num_rows, int(mask.sum()))
    assert sorted(keyed.column("_change_type").to_pylist()) == sorted(
        feed.filter(pa.array(mask)).column("_change_type").to_pylist())
    assert pa.table(theirs).num_rows == feed.num_rows, (pa.table(theirs).num_rows, feed.num_rows)
    say(f"the feed of versions {first}..{last}: {feed.num_rows:,} rows; key {key}: {keyed.num_rows} rows")
    _record("feed:whole", f"the change data feed of {args.merges} merges, whole, against delta-rs's load_cdf",
            [("delta-rs load_cdf", theirs_s), ("indexeddf changes", whole_s)])
    _record("feed:key", f"one key's changes over {args.merges} merges, against the whole feed",
            [("indexeddf changes, whole feed", whole_s), ("indexeddf changes, keys=[k]", key_s)])
    med = {n: statistics.median(s) for n, s in (("whole", whole_s), ("key", key_s), ("delta-rs", theirs_s),
                                                  ("floor", floor_s), ("key floor", key_floor_s))}
    say("| read | median | min | max |")
    say("|---|---|---|---|")
    for name, secs in (("delta-rs load_cdf", theirs_s), ("changes, whole feed", whole_s),
                       ("changes, keys=[k]", key_s), ("floor: commits + files, pyarrow", floor_s),
                       (f"floor: the key's {len(key_files)} files, its row groups", key_floor_s)):
        say(f"| {name} | {_shown(statistics.median(secs))} | {_shown(min(secs))} | {_shown(max(secs))} |")
    say(f"one key vs the whole feed: {med['whole'] / med['key']:.1f}x faster (goal: 20x); "
        f"at the floors: {med['floor'] / med['key floor']:.1f}x")
    say(f"the whole feed vs delta-rs load_cdf: {med['delta-rs'] / med['whole']:.1f}x faster (goal: 5x); "
        f"the floor: {med['delta-rs'] / med['floor']:.1f}x")
    say(f"to the floor: the whole feed {med['whole'] / med['floor']:.2f}x, the key {med['key'] / med['key floor']:.2f}x")
    return med


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=20_000_000)
    p.add_argument("--buckets", type=int, default=32)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--merges", type=int, default=10)
    p.add_argument("--source-rows", type=int, default=1_000, help="source rows of each merge")
    p.add_argument("--work", default=None, help="folder for the table (default: the system's temp folder)")
    p.add_argument("--out", default=None, help="write the run's results JSON into this folder (benchmarks/results)")
    args = p.parse_args()
    run(args)
    if args.out:
        now = dt.datetime.now(dt.timezone.utc)
        size = f"{args.rows // 1_000_000}m" if args.rows >= 1_000_000 else f"{args.rows // 1000}k"
        name = f"{now:%Y-%m-%d-%H%M}-feed-keys-{size}" + (
            f"-merges-{args.source_rows // 1000}k" if args.source_rows != 1_000 else "")
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or None
        command = " ".join(["python", "benchmarks/feed_keys.py", *sys.argv[1:]])
        out = {"run": name, "kind": "benchmarks/feed_keys.py", "date": f"{now:%Y-%m-%d}", "command": command,
               "commit": commit, "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
                                           f"{platform.python_version()}",
               "source": "written by the command on this machine", "printed": PRINTED, "results": SCENARIOS}
        target = Path(args.out) / f"{name}.json"
        target.write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {target}")


if __name__ == "__main__":
    main()
