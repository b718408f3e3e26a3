"""A writer process for the crash soak: random operations on one table until killed.

Usage: python random_ops.py TABLE SEED [STORAGE_OPTIONS_JSON]
Operations: append, delete, overwrite, optimize, refresh, create_index, vacuum (with
the default retention: it deletes nothing recent). A lost race is retried by the next
operation. Prints the version of each commit, flushed, so the test knows what landed.
"""

import json
import random
import sys

import pyarrow as pa

from indexeddf import IndexedTable
from indexeddf.errors import ConcurrentModificationError, IndexedDFError


def rows(rng: random.Random, n: int) -> pa.Table:
    return pa.table({"k": pa.array([rng.randrange(200) for _ in range(n)], pa.int64()),
                     "s": pa.array([rng.choice("abcdef") for _ in range(n)]),
                     "v": pa.array([rng.randrange(10**9) for _ in range(n)], pa.int64())})


def step(t: IndexedTable, rng: random.Random) -> int | None:
    op = rng.choices(["append", "delete", "overwrite", "optimize", "refresh", "create_index", "vacuum"],
                     weights=[8, 3, 1, 2, 2, 1, 1])[0]
    if op == "append":
        return t.append(rows(rng, rng.randrange(1, 400)))
    if op == "delete":
        return t.delete(f"k = {rng.randrange(200)}")
    if op == "overwrite":
        return t.overwrite(rows(rng, rng.randrange(1, 400)))
    if op == "optimize":
        return t.optimize(mode=rng.choice(["quick", "full"]))
    if op == "refresh":
        versions = t.refresh()
        return versions[-1] if versions else None
    if op == "create_index":
        return t.create_index(f"by_s_{rng.randrange(10**6)}", ["s"], num_buckets=2)
    t.vacuum()
    return None


def main() -> None:
    path, seed = sys.argv[1], int(sys.argv[2])
    options = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
    rng = random.Random(seed)
    t = IndexedTable.for_path(path, storage_options=options)
    while True:
        try:
            v = step(t, rng)
        except ConcurrentModificationError:
            continue
        except IndexedDFError as e:  # e.g. an index name taken: a user error, not a crash
            print(f"# {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            continue
        if v is not None:
            print(v, flush=True)


if __name__ == "__main__":
    main()
