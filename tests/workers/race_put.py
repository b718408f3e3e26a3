"""A process that races others for objects: for each REL in turn, waits until its start
(START + its position times GAP, epoch seconds), then tries to create it exclusively
through the table storage and prints 1 if it won, else 0 (a line each).

Usage: python race_put.py URL STORAGE_OPTIONS_JSON WORKER_ID START GAP REL...
"""

import json
import sys
import time

from indexeddf.format.storage import TableStorage


def main() -> None:
    url, options, worker = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    start, gap, rels = float(sys.argv[4]), float(sys.argv[5]), sys.argv[6:]
    storage = TableStorage(url, options)
    storage.check_conditional_put()  # done before the start line, so all race the put itself
    for i, rel in enumerate(rels):
        time.sleep(max(0.0, start + i * gap - time.time()))
        print(int(storage.put_if_absent(rel, worker.encode())), flush=True)


if __name__ == "__main__":
    main()
