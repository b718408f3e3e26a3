"""One writer of the load benchmark: appends small uniquely keyed batches until a deadline.

Usage: python load_writer.py TABLE WORKER_ID DEADLINE_EPOCH_S ROWS [STORAGE_OPTIONS_JSON]
Prints one JSON line per commit: {"version": v, "seconds": latency of the append call,
"retries": commit attempts the call lost}. Attempts are counted by wrapping the storage's
put-if-absent of log files (instrumentation only: the call itself is unchanged).
Row keys are worker * 10**9 + append * 10**4 + row, so a reader can tell lost and doubled rows.
"""

import json
import sys
import time

import pyarrow as pa

from indexeddf import IndexedTable
from indexeddf.format.storage import TableStorage

ATTEMPTS = {"log": 0}
_put = TableStorage.put_if_absent


def _counted_put(self, rel, data):
    if "_log/" in rel and rel.endswith(".json"):
        ATTEMPTS["log"] += 1
    return _put(self, rel, data)


TableStorage.put_if_absent = _counted_put


def main() -> None:
    path, worker, deadline, per = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    options = json.loads(sys.argv[5]) if len(sys.argv) > 5 else None
    table = IndexedTable.for_path(path, storage_options=options)
    i = 0
    while time.time() < deadline:
        base = worker * 10**9 + i * 10**4
        batch = pa.table({"k": pa.array(range(base, base + per), pa.int64()), "w": pa.array([worker] * per, pa.int32())})
        ATTEMPTS["log"] = 0
        t0 = time.perf_counter()
        version = table.append(batch)
        seconds = time.perf_counter() - t0
        print(json.dumps({"version": version, "seconds": seconds, "retries": max(0, ATTEMPTS["log"] - 1)}), flush=True)
        i += 1


if __name__ == "__main__":
    main()
