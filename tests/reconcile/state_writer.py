"""Writes ConfigMaps into a persisted EmbeddedCluster until killed, saying which writes returned.

    python -m tests.reconcile.state_writer DIR PREFIX THREADS

Each of THREADS threads creates ConfigMaps `PREFIX-<thread>-<n>` in `default`, one after the
other, and prints each name on stdout (flushed) as soon as its create has returned: a name on
stdout is a write the cluster acknowledged. Killed with SIGKILL by tests/reconcile/test_state_directory.py.
"""

from __future__ import annotations

import itertools
import sys
import threading

from reconcile.embedded import EmbeddedCluster


def main(directory: str, prefix: str, threads: int) -> None:
    cluster = EmbeddedCluster(persist_to=directory)
    said = threading.Lock()

    def write(worker: int) -> None:
        for n in itertools.count():
            name = f"{prefix}-{worker}-{n}"
            cluster.create({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": name, "namespace": "default"}, "data": {"n": str(n)}})
            with said:
                sys.stdout.write(name + "\n")
                sys.stdout.flush()

    workers = [threading.Thread(target=write, args=(i,), daemon=True) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
