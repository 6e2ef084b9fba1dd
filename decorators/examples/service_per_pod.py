"""The service-per-pod example: a Service for each replica of a StatefulSet, as a python hook.

    hooks:
      sync: {python: {function: "decorators.examples.service_per_pod:sync_services"}}

A StatefulSet's pods are `<name>-0`, `<name>-1`, ..., and Kubernetes labels each with its own
name (`statefulset.kubernetes.io/pod-name`). When every replica must be reachable on its own (a
Kafka broker, a database member behind a load balancer of its own), each needs a Service that
selects that one label. For the StatefulSet in the request's `object`, `sync_services` answers
the Services `<name>-0` ... `<name>-<replicas - 1>` (`spec.replicas`, 1 when absent), each
selecting its pod and exposing every port the pod template's containers declare. The
DecoratorController (testdata/decorators/service-per-pod/) chooses which StatefulSets get them,
and deletes the Services of replicas scaled away, since the answer no longer lists them.

Each Service port is a container port (`port` and `targetPort` both the container's port, the
protocol kept), named as the container names it or `port-<number>`. A port number and protocol
declared by two containers is exposed once; a name used twice keeps its first port, and the
other gets `port-<number>`. A StatefulSet whose containers declare no port gets an error naming
the field, since a Service needs one.

A manager runs it when started with `--python-hooks decorators.examples` (as
deploy/decorators-deployment.yaml starts it); the local preview runs it as it is.

The decisions (`services_for`, `service_ports`) are pure functions over dicts. An invalid
StatefulSet is a ValueError naming the field, which the hook client reports as the hook's error
(a SyncError Event on the StatefulSet, and `porchkit decorators reconcile` exits 1).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"  # set by the StatefulSet controller on each pod


def sync_services(request: Mapping[str, Any]) -> dict[str, Any]:
    """The sync hook: the Services the StatefulSet in `request["object"]` should have.
    Raises ValueError for a target that is not a StatefulSet or has no ports."""
    return {"attachments": services_for(request.get("object"))}


def services_for(statefulset: Any) -> list[dict[str, Any]]:
    """One Service per replica of `statefulset`, in replica order; see the module docstring.
    Raises ValueError naming the field at fault. Never changes `statefulset`."""
    if not isinstance(statefulset, Mapping) or statefulset.get("kind") != "StatefulSet":
        found = statefulset.get("kind") if isinstance(statefulset, Mapping) else type(statefulset).__name__
        raise ValueError(f"object: expected a StatefulSet, got {json.dumps(found)} "
                         f"(list only apps/v1 statefulsets in spec.resources)")
    name = (statefulset.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("object.metadata.name: required")
    spec = statefulset.get("spec") or {}
    replicas = spec.get("replicas", 1)
    if type(replicas) is not int or replicas < 0:
        raise ValueError(f"spec.replicas: expected a whole number >= 0, got {json.dumps(replicas)}")
    ports = service_ports(((spec.get("template") or {}).get("spec")) or {})
    return [_service(f"{name}-{index}", ports) for index in range(replicas)]


def service_ports(pod_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Service ports for the container ports of `pod_spec` (init containers aside), in the
    order declared; see the module docstring for names and duplicates. Raises ValueError when
    there is none or a port is not a number."""
    ports: list[dict[str, Any]] = []
    seen: set[tuple[int, str]] = set()
    names: set[str] = set()
    for c, container in enumerate(pod_spec.get("containers") or []):
        for p, declared in enumerate((container or {}).get("ports") or []):
            number = declared.get("containerPort")
            if type(number) is not int or not 0 < number < 65536:
                raise ValueError(f"spec.template.spec.containers[{c}].ports[{p}].containerPort: "
                                 f"expected a port number, got {json.dumps(number)}")
            protocol = declared.get("protocol") or "TCP"
            if (number, protocol) in seen:
                continue
            seen.add((number, protocol))
            name = declared.get("name") or f"port-{number}"
            if name in names:
                name = f"port-{number}" if protocol == "TCP" else f"port-{number}-{protocol.lower()}"
            names.add(name)
            ports.append({"name": name, "port": number, "targetPort": number, "protocol": protocol})
    if not ports:
        raise ValueError("spec.template.spec.containers: no container declares a port, "
                         "and a Service needs at least one")
    return ports


def _service(pod: str, ports: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": pod},
        "spec": {"selector": {POD_NAME_LABEL: pod}, "ports": [dict(port) for port in ports]},
    }
