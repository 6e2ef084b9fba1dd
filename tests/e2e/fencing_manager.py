"""A manager with one controller that has side effects, on a real API server, for the attacks of
tests/e2e/test_security_runtime_e2e.py.

    python -m tests.e2e.fencing_manager --kubeconfig PATH --namespace NS --identity ID --hook-url URL
                                        [--lease NAME] [--log-level debug]

The `stamper` controller reconciles the ConfigMaps of NS, reading them from the manager's cache
(as controllers do; a paused process's cache is stale when it resumes). One whose `data.want`
differs from its `data.done` gets a call to the hook at URL (a POST of {"caller": ID, "key",
"want"}: a webhook with a side effect outside the cluster), then an update setting `done` to
`want` and `by` to ID. The hook call is guarded with `reconcile.fencing.check()`, as every hook
and side effect should be.
With --lease, the manager elects a leader through Lease NS/NAME (lease 6 s, renew deadline 4 s,
retry 1 s: short, so that the tests need not wait long). The port of /metrics is printed on
stdout once served; logs go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request

from reconcile import Kind, ObjectKey, fencing, logs
from reconcile.controller import Controller
from reconcile.events import EventRecorder
from reconcile.health import for_manager
from reconcile.kube import KubeCluster
from reconcile.manager import LeaderElection, Manager
from reconcile.outcome import Done

CONFIGMAP = Kind("v1", "ConfigMap")
LEASE_TIMING = {"lease_duration": 6.0, "renew_deadline": 4.0, "retry_period": 1.0}


def stamper(manager: Manager, namespace: str, identity: str, hook_url: str) -> Controller:
    cluster, cache = manager.cluster, manager.cache

    def reconcile(key: ObjectKey) -> Done:
        current = cache.get(CONFIGMAP, key) if key.namespace == namespace else None
        data = (current or {}).get("data") or {}
        if current is None or data.get("want") == data.get("done"):
            return Done()
        fencing.check()  # the hook has a side effect: only while provably leading
        body = json.dumps({"caller": identity, "key": str(key), "want": data.get("want")}).encode()
        request = urllib.request.Request(hook_url, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            answer.read()
        cluster.update({**current, "data": {**data, "done": data.get("want"), "by": identity}})
        return Done()

    return Controller("stamper", CONFIGMAP, reconcile, clock=manager.clock, workers=2)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="fencing_manager")
    for flag in ("--kubeconfig", "--namespace", "--identity", "--hook-url"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--lease")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    logs.configure("text", args.log_level)
    cluster = KubeCluster.from_kubeconfig(args.kubeconfig)
    election = (LeaderElection(args.namespace, args.lease, identity=args.identity, **LEASE_TIMING)
                if args.lease else None)
    manager = Manager(cluster, leader_election=election, events=EventRecorder(cluster, "fencing-e2e"),
                      grace_period=5)
    manager.add(stamper(manager, args.namespace, args.identity, args.hook_url))
    with for_manager(manager, ("127.0.0.1", 0)) as server:
        print(server.port, flush=True)
        code = manager.run()
    cluster.close()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
