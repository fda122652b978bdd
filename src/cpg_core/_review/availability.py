"""Availability: what a set of policies would take from the traffic a capture does not hold
(ARCHITECTURE §D47). Each finding has a code, the policy it is about and its fix; ``lint``
reports them for the files it reads together, ``plan`` for the policies after the proposal
(only those the proposal brings), with what a new workload in a new namespace would lose.

- CPG040 egress without DNS: pods put into egress default-deny that cannot resolve names
  (UDP and TCP 53 to the cluster's DNS service), TCP/53 included: resolvers fall back to TCP
  for large answers.
- CPG041 a cluster service policed per caller: the DNS service, or a port pods of many
  namespaces reach, that a pod of a new namespace could not reach.
- CPG042 a DNS forwarder with a name allowlist: a DNS service whose upstream DNS rules name
  names, so every other name any pod asks for stops resolving.
- CPG043 Baseline ClusterNetworkPolicies for a release that does not enforce them (before
  1.20): the workloads whose egress only they hold are not policed at all. From 1.20 they
  are enforced only with ``--enable-k8s-cluster-network-policy`` and the CRD installed by
  hand, which every output that holds them says once (``BASELINE_NOTE``).
- CPG044 a Baseline deny's gaps: it holds pods and addresses only; the host, remote nodes,
  the API server, health checks and Cilium's ingress stay open to the pods it keeps.
- CPG045 a declared dependency denied: the policies police an end of a connection the
  cluster's own objects declare (a webhook the API server calls, a target a Prometheus
  scrapes, the node-local DNS cache) and no rule admits it (§D58).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from cpg_core._base.documents import PolicyDocument
from cpg_core._base.flow import Direction, Endpoint, Flow
from cpg_core._base.labels import NAMESPACE_LABEL
from cpg_core._base.rules import EGRESS, INGRESS, EntityPeer
from cpg_core._policy.matcher import judge_flow, policy_name, selecting_specs
from cpg_core._policy.model import NAMESPACED_KIND, Policy, Rule, Selector, Spec, policy_model
from cpg_core._policy.policy_set import PolicySet
from cpg_core._policy.tiers import BASELINE, DENY, is_cluster_network_policy, tier_policy
from cpg_core._synthesis.declarations import Declarations, Pods
from cpg_core._synthesis.scope import DEFAULT_SERVICE_NAMESPACES, SYSTEM_NAMESPACES

NEW_NAMESPACE = "a-new-namespace"
NEW_POD = Endpoint(
    namespace=NEW_NAMESPACE,
    labels=("k8s:app=a-new-workload", f"k8s:{NAMESPACE_LABEL}={NEW_NAMESPACE}"),
)
"""A pod of a namespace no policy or capture knows: what the next Deployment is."""
_DNS_APPS = ("kube-dns", "coredns", "node-local-dns")
DNS_PODS = tuple(
    Endpoint(
        namespace="kube-system",
        labels=(f"k8s:k8s-app={app}", f"k8s:{NAMESPACE_LABEL}=kube-system"),
    )
    for app in _DNS_APPS
)
"""The cluster's DNS service as the usual installations label it."""


@attrs.frozen(slots=True, kw_only=True)
class Availability:
    code: str
    policy: str
    """``namespace/name`` of the policy it is about ("" for the whole set)."""
    message: str
    fix: str


FIXES = {
    "CPG040": "admit DNS in the policy's egress: UDP and TCP 53 to kube-system k8s-app=kube-dns "
    "(cpg replay writes it into every egress policy)",
    "CPG041": "admit the port from (or, for a client, to) every pod of the cluster "
    "(fromEntities/toEntities: [cluster], or endpoints with io.kubernetes.pod.namespace "
    "Exists), as cpg replay writes a port pods of many namespaces use",
    "CPG042": 'let a DNS forwarder resolve every name upstream: rules.dns matchPattern "*" '
    "(or an L4 rule on UDP and TCP 53)",
    "CPG043": "on Cilium 1.20, start the agents with --enable-k8s-cluster-network-policy and "
    "install the ClusterNetworkPolicy CRD; before 1.20, write the rules as Cilium policies "
    "(the ccnp baseline format)",
    "CPG044": "police those peers in a Cilium policy of the pods (toEntities/fromEntities), or "
    "accept that the Baseline tier leaves them open",
    "CPG045": "admit exactly what the object declares (its peer and port) in the policy of "
    "that end (cpg replay given the cluster's declarations writes it), or fix the object if "
    "it is stale",
}


def _found(code: str, policy: str, message: str) -> Availability:
    return Availability(code=code, policy=policy, message=message, fix=FIXES[code])


def _flow(
    direction: Direction, source: Endpoint, destination: Endpoint, proto: str, port: int
) -> Flow:
    return Flow(
        direction=int(direction), source=source, destination=destination, protocol=proto, port=port
    )


class Policies(PolicySet):
    """A set of policies, each end's judged against the ones that can select it (those of
    its namespace and the clusterwide ones), not the whole set."""

    def __init__(self, policies: Iterable[PolicyDocument]) -> None:
        super().__init__(p for p in policies if isinstance(p, Mapping))

    @property
    def all(self) -> Sequence[PolicyDocument]:
        return self

    def judge(self, flow: Flow, pod: Endpoint) -> Any:
        return judge_flow(self, flow)

    def admits(
        self, source: Endpoint, destination: Endpoint, proto: str, port: int, *, ends: int = 2
    ) -> bool:
        """Whether the connection gets through at both ends (``ends=1``: at the source's
        egress only), in Cilium's default mode: an end no policy puts into default-deny lets
        it through."""
        sides = ((Direction.EGRESS, source), (Direction.INGRESS, destination))[:ends]
        for direction, pod in sides:
            flow = _flow(direction, source, destination, proto, port)
            if not self.judge(flow, pod).allowed:
                return False
        return True


def workload_subjects(policy: PolicyDocument | Policy) -> list[Endpoint]:
    """The pods a namespaced policy's plain selector is written for (none for a selector of
    expressions, such as a shared policy's: its members have policies of their own)."""
    model = policy if isinstance(policy, Policy) else policy_model(policy)
    if model.kind != NAMESPACED_KIND or not model.written_namespace:
        return []
    spec = model.specs[0] if model.specs and not model.specs[0].in_specs else None
    subject = spec.subject if spec is not None else None
    if subject is None or not subject.labels_only:
        return []
    namespace = model.written_namespace
    return [
        Endpoint(
            namespace=namespace,
            labels=(
                *(f"k8s:{k}={v}" for k, v in subject.labels_written),
                f"k8s:{NAMESPACE_LABEL}={namespace}",
            ),
        )
    ]


def _resolves(
    policies: Policies, pod: Endpoint, proto: str, dns: Sequence[Endpoint], ends: int = 2
) -> bool:
    return any(policies.admits(pod, server, proto, 53, ends=ends) for server in dns)


def dns_servers(policies: Policies) -> list[Endpoint]:
    """The cluster's DNS service as these policies name it (the pods they let others reach
    on port 53 in a system namespace or with a DNS app's label, the pods they police that
    serve it), else as the usual installations label it."""
    found: dict[Endpoint, None] = {}
    for document in policies.all:
        policy = policy_model(document)
        for spec in policy.specs:
            for rule in spec.rules(EGRESS):
                if not _has_port(rule, 53):
                    continue
                for selector in rule.endpoints:
                    pod = _selected_pod(selector, policy.written_namespace)
                    if pod is not None and _dns_like(pod):
                        found[pod] = None
        for pod in workload_subjects(policy):
            if _is_dns_service(pod, _single_spec(policy)) and _dns_like(pod):
                found[pod] = None
    return list(found) or list(DNS_PODS)


def _single_spec(policy: Policy) -> Spec | None:
    """The policy's ``spec`` (None when it has only ``specs``)."""
    return policy.specs[0] if policy.specs and not policy.specs[0].in_specs else None


def _has_port(rule: Rule, number: int) -> bool:
    return any(
        str(port.port_written) == str(number)
        for port_rule in rule.port_rules
        for port in port_rule.ports
    )


def _selected_pod(selector: Selector, namespace: str) -> Endpoint | None:
    if not selector.labels_only:
        return None
    plain = selector.label_map
    ns = plain.pop(NAMESPACE_LABEL, namespace)
    if not ns or not plain:
        return None
    return Endpoint(
        namespace=ns,
        labels=(*(f"k8s:{k}={v}" for k, v in sorted(plain.items())), f"k8s:{NAMESPACE_LABEL}={ns}"),
    )


def _dns_like(pod: Endpoint) -> bool:
    values = {label.split("=", 1)[1] for label in pod.labels if "=" in label}
    return pod.namespace in SYSTEM_NAMESPACES or bool(values & set(_DNS_APPS))


def _is_dns_service(pod: Endpoint, spec: Spec | None) -> bool:
    """A DNS app's pod, or a system namespace's pod its policy lets others reach on 53 (an
    application pod with a rule on port 53 is no resolver of the cluster's: a learned reply,
    its own sidecar)."""
    values = {label.split("=", 1)[1] for label in pod.labels if "=" in label}
    if values & set(_DNS_APPS):
        return True
    return (
        pod.namespace in SYSTEM_NAMESPACES
        and spec is not None
        and any(_has_port(rule, 53) for rule in spec.rules(INGRESS))
    )


def availability(
    policies: Iterable[PolicyDocument] | Policies,
    *,
    service_namespaces: int = DEFAULT_SERVICE_NAMESPACES,
    baseline_enforced: bool = True,
    only: Iterable[str] | None = None,
    baseline: bool = True,
) -> list[Availability]:
    """The availability findings of ``policies`` taken together (a folder: a workload's DNS
    may be in a shared policy); with ``only``, those about these policies (``namespace/name``:
    a proposal's). ``baseline_enforced``: whether the release enforces Baseline
    ClusterNetworkPolicies (CPG043 when not); ``baseline``: judge them at all (CPG043,
    CPG044; a plan leaves them to its note: they open, they do not break)."""
    index = policies if isinstance(policies, Policies) else Policies(policies)
    chosen = None if only is None else set(only)
    servers = dns_servers(index)
    found: list[Availability] = []
    for document in index.all:
        name = policy_name(document)
        if chosen is not None and name not in chosen:
            continue
        if is_cluster_network_policy(document):
            found += _baseline(document, name, baseline_enforced) if baseline else []
            continue
        policy = policy_model(document)
        spec = _single_spec(policy)
        if spec is None:
            continue
        for pod in workload_subjects(policy):
            found += _egress_dns(index, pod, spec, name, servers)
            if _is_dns_service(pod, spec):
                found += _dns_service(index, pod, spec, name)
            elif spec.rules(INGRESS):
                found += _cluster_service(index, pod, spec, name, service_namespaces)
            if spec.rules(EGRESS):
                found += _cluster_service(index, pod, spec, name, service_namespaces, EGRESS)
    return found


def dependency_ends(party: Pods | EntityPeer) -> list[Endpoint]:
    """The endpoints one end of a declared dependency is: an entity's identity, or a pod of
    each label set the objects declare (the selector's labels when they declare none)."""
    if isinstance(party, EntityPeer):
        number = ENTITY_IDENTITIES.get(party.entity, 0)
        return [Endpoint(labels=(f"reserved:{party.entity}",), identity=number)]
    if party.host_network:
        return [Endpoint(labels=("reserved:host",), identity=1)]
    sets = [dict(labels) for labels in party.known] or [dict(party.selector.labels)]
    return [
        Endpoint(
            namespace=party.namespace,
            labels=(
                *(f"k8s:{k}={v}" for k, v in sorted(labels.items())),
                f"k8s:{NAMESPACE_LABEL}={party.namespace}",
            ),
        )
        for labels in sets
        if party.selector.matches(labels)
    ]


ENTITY_IDENTITIES = {
    "host": 1,
    "world": 2,
    "health": 4,
    "init": 5,
    "remote-node": 6,
    "kube-apiserver": 7,
    "ingress": 8,
}
"""Cilium's reserved identity numbers of the entities a declared dependency names."""


def declared_denials(
    policies: Iterable[PolicyDocument] | Policies,
    declarations: Declarations,
    *,
    only: Iterable[str] | None = None,
) -> list[Availability]:
    """CPG045: each dependency the cluster's objects declare that the policies deny, at each
    end they police (``only``: findings about these policies)."""
    index = policies if isinstance(policies, Policies) else Policies(policies)
    chosen = None if only is None else set(only)
    found: dict[tuple[str, str], Availability] = {}
    for dependency in declarations.dependencies:
        by = dependency.declared_by
        for source in dependency_ends(dependency.source):
            for destination in dependency_ends(dependency.destination):
                for direction, pod in (
                    (Direction.EGRESS, source),
                    (Direction.INGRESS, destination),
                ):
                    if not pod.namespace:
                        continue  # an entity: no Cilium policy of the linted set polices it
                    flow = _flow(
                        direction, source, destination, dependency.protocol, dependency.port
                    )
                    judged = index.judge(flow, pod)
                    if judged.allowed or not judged.policed_by:
                        continue
                    name = judged.policed_by[0]
                    if chosen is not None and name not in chosen:
                        continue
                    way = "ingress" if direction == Direction.INGRESS else "egress"
                    message = (
                        f"{', '.join(judged.policed_by)} "
                        f"{'polices' if len(judged.policed_by) == 1 else 'police'} "
                        f"{pod.namespace}/{_workload(pod)} "
                        f"for {way} and deny {_end_name(source)} → {_end_name(destination)} "
                        f"{dependency.protocol}/{dependency.port}, which {by.text()} declares"
                    )
                    found.setdefault((name, message), _found("CPG045", name, message))
    return list(found.values())


def _end_name(endpoint: Endpoint) -> str:
    if not endpoint.namespace:
        return endpoint.labels[0].split(":", 1)[-1] if endpoint.labels else "?"
    return f"{endpoint.namespace}/{_workload(endpoint)}"


def _egress_dns(
    policies: Policies,
    pod: Endpoint,
    spec: Spec,
    name: str,
    servers: Sequence[Endpoint],
) -> list[Availability]:
    if not spec.written_rules(EGRESS) or pod in servers or not _egress_default_deny(policies, pod):
        return []
    # its own egress (the DNS service's ingress is that service's finding, CPG041)
    udp = _resolves(policies, pod, "UDP", servers, ends=1)
    tcp = _resolves(policies, pod, "TCP", servers, ends=1)
    if udp and tcp:
        return []
    missing = "UDP and TCP 53" if not udp and not tcp else ("TCP/53" if udp else "UDP/53")
    return [
        _found(
            "CPG040",
            name,
            f"{pod.namespace}/{_workload(pod)} is in egress default-deny without DNS "
            f"({missing} to the cluster's DNS service): it could not resolve names",
        )
    ]


def _egress_default_deny(policies: Policies, pod: Endpoint) -> bool:
    probe = _flow(Direction.EGRESS, pod, NEW_POD, "TCP", 1)
    return bool(policies.judge(probe, pod).default_deny)


def _dns_service(policies: Policies, pod: Endpoint, spec: Spec, name: str) -> list[Availability]:
    found = []
    if spec.written_rules(INGRESS):
        closed = [p for p in ("UDP", "TCP") if not policies.admits(NEW_POD, pod, p, 53)]
        if closed:
            found.append(
                _found(
                    "CPG041",
                    name,
                    f"{pod.namespace}/{_workload(pod)} serves DNS, but a pod of a new namespace "
                    f"could not reach it on {' and '.join(f'{p}/53' for p in closed)}: only "
                    "today's callers resolve names",
                )
            )
    for rule in spec.rules(EGRESS):
        index = rule.index
        for port_rule in rule.port_rules:
            names = port_rule.dns
            if port_rule.has_dns and not any(entry.pattern == "*" for entry in names):
                found.append(
                    _found(
                        "CPG042",
                        name,
                        f"{pod.namespace}/{_workload(pod)} serves DNS and egress[{index}] lets "
                        f"it resolve {len(names)} name(s) upstream: every other name any pod "
                        "asks it for would stop resolving",
                    )
                )
                break
    return found


def _cluster_service(
    policies: Policies,
    pod: Endpoint,
    spec: Spec,
    name: str,
    threshold: int,
    section: str = INGRESS,
) -> list[Availability]:
    """A port pods of ``threshold`` namespaces or more are admitted to one by one (ingress:
    a service the cluster uses; egress: a client of the whole cluster, a scraper)."""
    if threshold <= 0:
        return []
    namespace = pod.namespace
    by_port: dict[tuple[str, int], set[str]] = {}
    for rule in spec.rules(section):
        spaces = {s.label_map.get(NAMESPACE_LABEL, namespace) for s in rule.endpoints}
        for port_rule in rule.port_rules:
            for entry in port_rule.ports:
                try:
                    number = int(str(entry.port_written))
                except (TypeError, ValueError):
                    continue
                key = (str(entry.protocol_written or "TCP"), number)
                by_port.setdefault(key, set()).update(spaces)
    found = []
    for (proto, port), spaces in sorted(by_port.items()):
        if len(spaces) < threshold:
            continue
        if section == INGRESS and not policies.admits(NEW_POD, pod, proto, port):
            found.append(
                _found(
                    "CPG041",
                    name,
                    f"{namespace}/{_workload(pod)} {proto}/{port} admits pods of "
                    f"{len(spaces)} namespaces one by one: a pod of a new namespace could not "
                    "reach it",
                )
            )
        elif section == EGRESS and not policies.admits(pod, NEW_POD, proto, port):
            found.append(
                _found(
                    "CPG041",
                    name,
                    f"{namespace}/{_workload(pod)} reaches pods of {len(spaces)} namespaces on "
                    f"{proto}/{port} one by one: it could not reach a pod of a new namespace "
                    "(a scraper, an ingress controller)",
                )
            )
    return found


BASELINE_NOTE = (
    "Cilium enforces ClusterNetworkPolicies from 1.20 only, and only with the agents' "
    "--enable-k8s-cluster-network-policy and the ClusterNetworkPolicy CRD installed by hand; "
    "without them a workload whose egress only the Baseline tier holds is not policed at all"
)
"""Said once wherever Baseline ClusterNetworkPolicies are written, planned or linted."""
BASELINE_GAPS = (
    "a Baseline Deny holds pods and addresses only: host, remote-node, kube-apiserver, health "
    "and ingress stay open to the pods the Baseline tier keeps default-deny (lint: CPG044)"
)


def has_baseline(policies: Iterable[Mapping[str, Any]]) -> bool:
    return any(is_cluster_network_policy(p) and tier_policy(p).tier == BASELINE for p in policies)


def _baseline(policy: Mapping[str, Any], name: str, enforced: bool) -> list[Availability]:
    model = tier_policy(policy)
    if model.tier != BASELINE:
        return []
    found = []
    if not enforced:
        found.append(
            _found(
                "CPG043",
                name,
                "a Baseline ClusterNetworkPolicy for a Cilium release that does not enforce it: "
                "the workloads whose egress only it holds are not policed at all",
            )
        )
    denies = [
        section
        for section in ("ingress", "egress")
        for rule in model.rules(section)
        if rule.action == DENY
    ]
    if denies:
        found.append(
            _found(
                "CPG044",
                name,
                f"its Baseline Deny ({', '.join(sorted(set(denies)))}) holds pods and addresses "
                "only: host, remote-node, kube-apiserver, health and ingress stay open to the "
                "pods it keeps default-deny",
            )
        )
    return found


def _workload(pod: Endpoint) -> str:
    for label in pod.labels:
        for key in ("k8s:app=", "k8s:k8s-app=", "k8s:app.kubernetes.io/name="):
            if label.startswith(key):
                return label[len(key) :]
    return pod.labels[0].split("=", 1)[-1] if pod.labels else "?"


def new_workload_losses(
    policies: Iterable[PolicyDocument] | Policies,
    services: Iterable[tuple[Endpoint, str, int, int]],
    clients: Iterable[tuple[Endpoint, str, int, int]],
) -> list[Availability]:
    """What a new workload in a new namespace would lose under ``policies``: DNS, each
    ``(server, protocol, port, namespaces)`` the capture shows pods of many namespaces
    reaching, and each ``(client, protocol, port, namespaces)`` the capture shows reaching
    pods of many namespaces (a scraper, an ingress controller)."""
    index = policies if isinstance(policies, Policies) else Policies(policies)
    servers = dns_servers(index)
    found = []
    if not _resolves(index, NEW_POD, "UDP", servers) or not _resolves(
        index, NEW_POD, "TCP", servers
    ):
        found.append(
            _found("CPG041", "", "a new workload in a new namespace could not resolve DNS")
        )
    for server, proto, port, spaces in services:
        if not index.admits(NEW_POD, server, proto, port):
            found.append(
                _found(
                    "CPG041",
                    _selecting_name(index, server),
                    f"a new workload in a new namespace could not reach "
                    f"{server.namespace}/{_workload(server)} on {proto}/{port} (pods of {spaces} "
                    "namespaces do today)",
                )
            )
    for client, proto, port, spaces in clients:
        if not index.admits(client, NEW_POD, proto, port):
            found.append(
                _found(
                    "CPG041",
                    _selecting_name(index, client),
                    f"a new workload in a new namespace could not be reached by "
                    f"{client.namespace}/{_workload(client)} on {proto}/{port} (it reaches pods "
                    f"of {spaces} namespaces today: a scraper or an ingress controller)",
                )
            )
    return found


def _selecting_name(policies: Policies, pod: Endpoint) -> str:
    names = sorted({policy_name(p) for p, _spec, _ns in selecting_specs(policies, pod)})
    return names[0] if names else ""
