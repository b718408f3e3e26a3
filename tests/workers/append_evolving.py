"""A writer process for the ADD COLUMNS race: appends uniquely keyed rows of the columns it
knows (``k``, ``worker``) while another process adds columns; the table's newer columns are
written as NULL (``schema_mode="merge"``). An append that read a version before an ADD
COLUMNS loses to it (``MetadataChangedError``, Delta's rule) and is retried on the new one.

Usage: python append_evolving.py TABLE WORKER_ID COUNT ROWS_PER_APPEND
Prints the version of each commit, then the number of retries as ``retries N``.
"""

import sys

import pyarrow as pa

from indexeddf import IndexedTable
from indexeddf.errors import MetadataChangedError


def main() -> None:
    path, worker, count, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    table = IndexedTable.for_path(path)
    retries = 0
    for i in range(count):
        base = worker * 1_000_000 + i * 1_000
        batch = pa.table({"k": pa.array(range(base, base + per), pa.int64()),
                          "worker": pa.array([worker] * per, pa.int32())})
        while True:
            try:
                print(table.append(batch, schema_mode="merge"), flush=True)
                break
            except MetadataChangedError:
                retries += 1
    print(f"retries {retries}", flush=True)


if __name__ == "__main__":
    main()
