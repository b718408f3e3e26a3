"""A process that races others for one object: waits until START (epoch seconds), then
tries to create REL exclusively through the table storage and prints 1 if it won.

Usage: python race_put.py URL STORAGE_OPTIONS_JSON REL WORKER_ID START
"""

import json
import sys
import time

from indexeddf.format.storage import TableStorage


def main() -> None:
    url, options, rel, worker, start = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5])
    storage = TableStorage(url, options)
    storage.check_conditional_put()  # done before the start line, so all race the put itself
    time.sleep(max(0.0, start - time.time()))
    print(int(storage.put_if_absent(rel, worker.encode())), flush=True)


if __name__ == "__main__":
    main()
