"""A synthetic cluster capture: ``python benchmarks/synthetic.py WORKLOADS OUT.jsonl [--days N]``.

N application workloads in about sqrt(N) namespaces (``app-01`` …), each namespace a small
service chain (``web`` → ``api`` → ``db``, the rest called by ``api``, a few calls across
namespaces), and the infrastructure every cluster shares: every workload resolves names
through ``kube-system/kube-dns`` (UDP/53) and is scraped by ``monitoring/prometheus``
(TCP/9090), the ingress controller (``ingress-nginx/controller``) reaches each namespace's
``web`` (TCP/8080), every ``api`` calls the Kubernetes API server and every fourth workload
an address outside (TCP/443).

Every connection is in the capture as a default-deny cluster drops it: once at the source's
egress and once at the destination's ingress. Every seventh workload also runs a canary
(``version: canary``) that no policy selects today; it is scraped, and ``ops/toolbox``
reaches it on TCP/22 (FORWARDED): a proposal made from the drops selects the canary too
(newly enforced), keeps the scraping and breaks the toolbox (``cpg plan`` finds both). Deterministic: the same
N, the same bytes. The report tests and the scale benchmarks read it.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROLES = ("web", "api", "db", "cache", "worker", "queue", "search", "auth", "mail", "billing")
"""Workload names in a namespace, in order: the first three form the chain."""


def _endpoint(namespace: str, app: str, identity: int, pod: int = 0) -> dict[str, Any]:
    return {
        "identity": identity,
        "namespace": namespace,
        "labels": [f"k8s:app={app}", f"k8s:io.kubernetes.pod.namespace={namespace}"],
        "pod_name": f"{app}-{identity:05d}-{pod}",
    }


KUBE_DNS = _endpoint("kube-system", "kube-dns", 300)
PROMETHEUS = _endpoint("monitoring", "prometheus", 301)
INGRESS = _endpoint("ingress-nginx", "controller", 302)
TOOLBOX = _endpoint("ops", "toolbox", 303)
API_SERVER = {"identity": 7, "labels": ["reserved:kube-apiserver"]}
WORLD = {"identity": 2, "labels": ["reserved:world"]}


def layout(workloads: int) -> list[tuple[str, list[str]]]:
    """The namespaces and their workloads: about sqrt(N) namespaces, the workloads dealt out
    so that no two namespaces differ by more than one."""
    count = max(1, round(math.sqrt(workloads)))
    per = [workloads // count + (1 if i < workloads % count else 0) for i in range(count)]
    out = []
    for i, size in enumerate(per):
        names = [ROLES[j] if j < len(ROLES) else f"svc-{j}" for j in range(size)]
        out.append((f"app-{i + 1:02d}", names))
    return out


def _ip(identity: int) -> str:
    return f"10.{identity // 250 % 250}.{identity % 250}.{identity // 62500 + 1}"


def endpoints(workloads: int) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each namespace with its workloads' endpoints (identities from 1000 on)."""
    identity = 1000
    out = []
    for namespace, names in layout(workloads):
        members = []
        for name in names:
            members.append(_endpoint(namespace, name, identity))
            identity += 1
        out.append((namespace, members))
    return out


def connections(workloads: int) -> Iterator[tuple[dict[str, Any], dict[str, Any], str, int]]:
    """(source, destination, protocol, port) of every connection the drops show."""
    spaces = endpoints(workloads)
    for index, (namespace, me) in enumerate(spaces):
        for position, workload in enumerate(me):
            yield workload, KUBE_DNS, "UDP", 53
            yield PROMETHEUS, workload, "TCP", 9090
            if position == 0:
                yield INGRESS, workload, "TCP", 8080
            elif position == 1:
                yield me[0], workload, "TCP", 8080
                yield workload, API_SERVER, "TCP", 443
            elif position == 2:
                yield me[1], workload, "TCP", 5432
            else:
                yield me[1], workload, "TCP", 6379 if position % 2 else 8080
            if (workload["identity"] + index) % 4 == 0:
                yield workload, WORLD, "TCP", 443
        other_ns, others = spaces[(index + 1) % len(spaces)]
        if len(me) > 1 and len(others) > 1 and other_ns != namespace:
            yield me[1], others[1], "TCP", 8443  # each api calls the next namespace's api


def _record(
    src: dict[str, Any],
    dst: dict[str, Any],
    protocol: str,
    port: int,
    *,
    direction: str,
    verdict: str,
    second: int,
    world_ip: str = "",
) -> dict[str, Any]:
    l4 = (
        {"UDP": {"source_port": 40000, "destination_port": port}}
        if protocol == "UDP"
        else {"TCP": {"source_port": 40000, "destination_port": port, "flags": {"SYN": True}}}
    )
    body: dict[str, Any] = {
        "time": (START + timedelta(seconds=second)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "verdict": verdict,
        "IP": {
            "source": _ip(src["identity"]),
            "destination": world_ip or _ip(dst["identity"]),
            "ipVersion": "IPv4",
        },
        "l4": l4,
        "source": src,
        "destination": dst,
        "traffic_direction": direction,
        "is_reply": False,
    }
    if verdict == "DROPPED":
        body["drop_reason_desc"] = "POLICY_DENIED"
    return {"flow": body}


def records(workloads: int) -> Iterator[dict[str, Any]]:
    second = 0
    for src, dst, protocol, port in connections(workloads):
        world_ip = f"203.0.113.{src['identity'] % 250 + 1}" if dst is WORLD else ""
        second += 1
        for direction, policed in (("EGRESS", src), ("INGRESS", dst)):
            if "namespace" in policed:  # Cilium's own identities have no policy of cpg's
                yield _record(
                    src,
                    dst,
                    protocol,
                    port,
                    direction=direction,
                    verdict="DROPPED",
                    second=second,
                    world_ip=world_ip,
                )
    for _namespace, members in endpoints(workloads):
        for workload in members:
            if workload["identity"] % 7 == 0:  # a canary no drop shows: not policed today
                canary = {
                    **workload,
                    "identity": workload["identity"] + 50_000,
                    "labels": [*workload["labels"], "k8s:version=canary"],
                    "pod_name": workload["pod_name"].rsplit("-", 1)[0] + "-canary",
                }
                for src, port in ((TOOLBOX, 22), (PROMETHEUS, 9090)):
                    second += 1
                    yield _record(
                        src,
                        canary,
                        "TCP",
                        port,
                        direction="INGRESS",
                        verdict="FORWARDED",
                        second=second,
                    )


START = datetime(2026, 11, 2, 10, 0, 0)
"""The first flow's time."""
NIGHTLY = _endpoint("ops", "nightly-backup", 304)
"""A job that runs once in the night of a long capture: its one flow is in the policy."""
EVERY = 1800
"""Seconds between two rounds of a long capture's traffic."""


def late(workload: dict[str, Any]) -> bool:
    """Whether a workload gains a new rule late in a long capture (one in five)."""
    return int(workload["identity"]) % 5 == 0


def long_records(workloads: int, days: float) -> Iterator[dict[str, Any]]:
    """A capture over ``days`` days: every connection once per half hour, drops at both
    ends; a fifth of the workloads (:func:`late`) gain a new peer on TCP/7000 in the last
    tenth of the window (their rules are still growing); and a nightly job reaches app-01's
    db once, at 02:00 of the first night."""
    span = int(days * 86_400)
    links = list(connections(workloads))
    for round_start in range(0, span, EVERY):
        for offset, (src, dst, protocol, port) in enumerate(links):
            second = round_start + offset % EVERY
            yield from _dropped(src, dst, protocol, port, second)
    newcomer = span - span // 10
    for _namespace, members in endpoints(workloads):
        for workload in members:
            if late(workload):
                peer = members[0] if members[0] is not workload else members[-1]
                for second in range(newcomer, span, EVERY):
                    yield from _dropped(peer, workload, "TCP", 7000, second)
    db = next(
        (w for ns, members in endpoints(workloads) if ns == "app-01" for w in members[2:3]),
        None,
    )
    if db is not None:
        night = int((START.replace(hour=2) + timedelta(days=1) - START).total_seconds())
        if night < span:
            yield from _dropped(NIGHTLY, db, "TCP", 5432, night)


def _dropped(
    src: dict[str, Any], dst: dict[str, Any], protocol: str, port: int, second: int
) -> Iterator[dict[str, Any]]:
    world_ip = f"203.0.113.{src['identity'] % 250 + 1}" if dst is WORLD else ""
    for direction, policed in (("EGRESS", src), ("INGRESS", dst)):
        if "namespace" in policed:
            yield _record(
                src,
                dst,
                protocol,
                port,
                direction=direction,
                verdict="DROPPED",
                second=second,
                world_ip=world_ip,
            )


OUTSIDE = "outside the cluster"
CLUSTER_OWN = "nodes and API server"


def _group(endpoint: dict[str, Any]) -> str:
    """The report's group of an endpoint: its namespace, the cluster's own entities, or
    outside."""
    if "namespace" in endpoint:
        return str(endpoint["namespace"])
    return CLUSTER_OWN if endpoint is API_SERVER else OUTSIDE


def canaries(workloads: int) -> dict[str, list[str]]:
    """Namespace → the workloads whose canary the toolbox reaches (what would break)."""
    out: dict[str, list[str]] = {}
    for namespace, members in endpoints(workloads):
        for workload in members:
            if workload["identity"] % 7 == 0:
                out.setdefault(namespace, []).append(workload["labels"][0].split("=", 1)[1])
    return out


def namespace_pairs(workloads: int) -> set[tuple[str, str]]:
    """(source, destination) namespaces with traffic between them (the peers outside the
    cluster as one, the API server as the cluster's): what the capture holds, for a test to
    hold a report to."""
    pairs = {(_group(src), _group(dst)) for src, dst, _protocol, _port in connections(workloads)}
    pairs |= {(TOOLBOX["namespace"], namespace) for namespace in canaries(workloads)}
    return pairs


def synthetic_capture(path: Path, workloads: int, days: float = 0) -> Path:
    """Write the capture of ``workloads`` application workloads to ``path`` (over ``days``
    days when given: :func:`long_records`)."""
    made = long_records(workloads, days) if days else records(workloads)
    with path.open("w") as out:
        for record in made:
            out.write(json.dumps(record, separators=(",", ":")) + "\n")
    return path


def main(argv: list[str]) -> int:
    days = 0.0
    if len(argv) == 4 and argv[2] == "--days":
        days = float(argv[3])
        argv = argv[:2]
    if len(argv) != 2 or not argv[0].isdigit():
        print(
            "usage: python benchmarks/synthetic.py WORKLOADS OUT.jsonl [--days N]",
            file=sys.stderr,
        )
        return 2
    path = synthetic_capture(Path(argv[1]), int(argv[0]), days)
    lines = sum(1 for _ in path.open())
    spaces = layout(int(argv[0]))
    print(f"{path}: {lines} flows, {argv[0]} workloads in {len(spaces)} namespaces")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
