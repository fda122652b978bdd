"""Shared egress rules as Kubernetes ClusterNetworkPolicies in the Baseline tier (§D44).

The Baseline tier decides only for a pod no namespaced policy selects in that direction
(for Cilium: no Cilium policy), so a Baseline ``Accept`` does nothing for a pod whose own
policy has rules in that direction, and a pod no policy selects is open anyway. A shared rule
can therefore move into the Baseline tier only for a pod whose every rule in that direction
moves with it, and the pod must then be kept default-deny by a Baseline ``Deny`` of everything
else, at the lowest priority. That is possible for egress alone: a ClusterNetworkPolicy's
ingress peers are namespaces and pods, so a Baseline ``Deny`` could not refuse traffic from
outside the cluster, and such a pod would be open to it. Shared ingress rules, and egress
rules a ClusterNetworkPolicy cannot say (entities, L7, ICMP, ClusterMesh peers), stay in
Cilium's shared policies; so does every rule of a pod some Cilium policy polices for egress
(its own file, a shared Cilium policy already on disk).

A ClusterNetworkPolicy has one subject, so a rule whose pods are not one product of
namespaces and label values is written as several documents in one file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from cpg_core._base.labels import NAMESPACE_LABEL
from cpg_core._base.rules import EGRESS, CidrPeer, EndpointPeer, Rule, describe_rule, port_entries
from cpg_core._base.yaml_text import yaml_string
from cpg_core._flows.synthesis import PolicyTarget
from cpg_core._policy.tiers import METADATA_NAME
from cpg_core._policy.write import (
    deny_everything,
    in_selection,
    rule_to_dict,
    selector_lines,
    selector_of,
    spec_document,
)
from cpg_core._synthesis._aggregate_base import PolicyPlan
from cpg_core._synthesis.render import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    SHARED_LABEL,
    SHARED_VALUE,
    is_shared,
)
from cpg_core._synthesis.sharing import (
    CLUSTERWIDE_KIND,
    SharedPolicy,
    Sharing,
    _members_of,
    _Selection,
    _selections,
    read_shared,
    shared_name,
)

API_VERSION = "policy.networking.k8s.io/v1alpha2"
KIND = "ClusterNetworkPolicy"
ACCEPT_PRIORITY = 100
DENY_PRIORITY = 1000
"""The lowest priority there is: every Accept of the tier is taken before the Deny."""
DEFAULT_DENY = "cpg-baseline-default-deny-egress"
_PROTOCOLS = {"TCP": "tcp", "UDP": "udp", "SCTP": "sctp"}
_INTERNAL_PREFIXES = ("io.cilium.", "io.kubernetes.")
"""Label keys Cilium adds to an identity that are no pod's label (a ClusterNetworkPolicy
selects pods by their own labels)."""


@attrs.frozen(slots=True)
class BaselinePolicy:
    """Egress ``rule`` accepted for ``members`` in the Baseline tier (no rule: everything else
    their egress does, denied)."""

    rule: Rule | None
    members: frozenset[PolicyTarget]

    @property
    def name(self) -> str:
        if self.rule is None:
            return DEFAULT_DENY
        return shared_name(self.rule, "baseline")

    def joined(self, more: Iterable[PolicyTarget]) -> BaselinePolicy:
        return attrs.evolve(self, members=self.members | frozenset(more))


def expressible(rule: Rule) -> bool:
    """Whether a ClusterNetworkPolicy egress rule says exactly what ``rule`` does."""
    if rule.direction != EGRESS or rule.http or rule.dns or rule.icmps or not rule.ports:
        return False
    if any(proto not in _PROTOCOLS for _port, proto in rule.ports):
        return False
    peer = rule.peer
    if isinstance(peer, CidrPeer):
        return True
    return isinstance(peer, EndpointPeer) and not peer.cluster and _pod_labels_only(peer.labels)


def _pod_labels_only(labels: Iterable[tuple[str, str]]) -> bool:
    return all(not key.startswith(_INTERNAL_PREFIXES) for key, _value in labels)


def with_baseline_rules(
    plans: Sequence[PolicyPlan], known: Iterable[BaselinePolicy]
) -> list[PolicyPlan]:
    """The plans with the Baseline rules their workloads already hold added back as needed:
    a workload that gains an egress rule of its own leaves the Baseline tier's reach, and
    must get those rules from a Cilium policy instead."""
    held: dict[PolicyTarget, set[Rule]] = {}
    for policy in known:
        if policy.rule is not None:
            for member in policy.members:
                held.setdefault(member, set()).add(policy.rule)
    out = []
    for plan in plans:
        extra = held.get(plan.target, set()) - set(plan.rules)
        out.append(
            plan
            if not extra
            else attrs.evolve(plan, rules=tuple(plan.rules) + tuple(sorted(extra, key=repr)))
        )
    return out


def move_to_baseline(
    sharing: Sharing,
    policed: Mapping[PolicyTarget, bool],
    known: Iterable[BaselinePolicy] = (),
) -> tuple[Sharing, tuple[BaselinePolicy, ...]]:
    """Move the shared egress rules of every workload the Baseline tier can hold whole into
    Baseline policies (and those workloads into the default deny). ``policed`` says which
    targets a Cilium policy outside this run polices for egress (their file, a shared Cilium
    policy on disk): they stay where they are."""
    known = list(known)
    egress_left = {p.target: any(r.direction == EGRESS for r in p.rules) for p in sharing.plans}
    shared_egress: dict[PolicyTarget, list[Rule]] = {}
    for policy in sharing.shared:
        if policy.rule.direction == EGRESS:
            for member in policy.members:
                shared_egress.setdefault(member, []).append(policy.rule)
    whole = {
        target
        for target, rules in shared_egress.items()
        if target in egress_left
        and not egress_left[target]
        and not policed.get(target, False)
        and _pod_labels_only(target.selector)
        and all(expressible(rule) for rule in rules)
    }
    by_rule = {p.rule: p for p in known if p.rule is not None}
    baseline: list[BaselinePolicy] = []
    kept: list[SharedPolicy] = []
    for policy in sharing.shared:
        moved = policy.members & whole if policy.rule.direction == EGRESS else frozenset()
        if moved:
            earlier = by_rule.get(policy.rule)
            baseline.append(
                earlier.joined(moved) if earlier is not None else BaselinePolicy(policy.rule, moved)
            )
        if policy.members - moved:
            kept.append(attrs.evolve(policy, members=policy.members - moved))
    if whole:
        deny = next((p for p in known if p.rule is None), BaselinePolicy(None, frozenset()))
        baseline.append(deny.joined(whole))
    return (
        attrs.evolve(sharing, shared=tuple(kept)),
        tuple(sorted(baseline, key=lambda p: p.name)),
    )


# --- rendering and reading back ----------------------------------------------------------------


def _selector_lines(
    labels: Mapping[str, str], key: str, values: Sequence[str], pad: str
) -> list[str]:
    lines = selector_lines(labels, [(key, values)] if key else [], pad)
    assert lines, "a member or a peer always has labels"
    return lines


def _pods_lines(selection: _Selection, first: str, pad: str) -> list[str]:
    """``pods:`` selecting exactly ``selection``'s pods (``first`` begins its line)."""
    namespaces = selection.namespaces
    lines = [f"{first}pods:", f"{pad}  namespaceSelector:"]
    if len(namespaces) == 1:
        lines += _selector_lines({METADATA_NAME: namespaces[0]}, "", (), pad + "    ")
    else:
        lines += _selector_lines({}, METADATA_NAME, namespaces, pad + "    ")
    lines.append(f"{pad}  podSelector:")
    lines += _selector_lines(dict(selection.fixed), selection.key, selection.values, pad + "    ")
    return lines


def _rule_lines(rule: Rule | None) -> list[str]:
    if rule is None:
        return [
            "  egress:",
            "  - name: default-deny",
            "    action: Deny",
            "    to:",
            "    - namespaces: {}",
            "    - networks:",
            "      - 0.0.0.0/0",
            "      - ::/0",
        ]
    lines = [
        "  egress:",
        f"  - name: {yaml_string(_rule_name(rule))}",
        "    action: Accept",
        "    to:",
    ]
    peer = rule.peer
    if isinstance(peer, CidrPeer):
        lines += ["    - networks:", *(f"      - {yaml_string(c)}" for c in rule.cidrs)]
    else:
        assert isinstance(peer, EndpointPeer)
        lines += _pods_lines(_Selection((peer.namespace,), peer.labels, "", ()), "    - ", "      ")
    lines.append("    protocols:")
    for first, last, proto in port_entries(rule.ports):
        lines += [f"    - {_PROTOCOLS[proto]}:", "        destinationPort:"]
        if first == last:
            lines.append(f"          number: {first}")
        else:
            lines += ["          range:", f"            start: {first}", f"            end: {last}"]
    return lines


def _rule_name(rule: Rule) -> str:
    """A rule name (at most 100 characters in the CRD): its traffic, as the comment says it."""
    return describe_rule(rule)[:100]


def render_baseline(policy: BaselinePolicy) -> str:
    """The policy's file: one ClusterNetworkPolicy per product of namespaces and label
    values among its members, with a comment that says what it is."""
    selections = _selections(policy.members)
    what = (
        f"egress {describe_rule(policy.rule)}"
        if policy.rule is not None
        else "every other egress denied (their egress rules are in the Baseline tier alone)"
    )
    out = [
        f"# Baseline tier, {len(policy.members)} workloads: {what}",
        "# It applies only to pods no Cilium policy selects for egress (cpg wrote their egress",
        "# rules here and none in their own policies).",
    ]
    for index, selection in enumerate(selections):
        name = policy.name if len(selections) == 1 else f"{policy.name}-{index + 1}"
        if index:
            out.append("---")
        out += [
            f"apiVersion: {API_VERSION}",
            f"kind: {KIND}",
            "metadata:",
            f"  name: {yaml_string(name)}",
            "  labels:",
            f"    {MANAGED_BY_LABEL}: {MANAGED_BY_VALUE}",
            f"    {SHARED_LABEL}: {SHARED_VALUE}",
            "spec:",
            "  tier: Baseline",
            f"  priority: {ACCEPT_PRIORITY if policy.rule is not None else DENY_PRIORITY}",
            "  subject:",
            *_pods_lines(selection, "    ", "    "),
            *_rule_lines(policy.rule),
        ]
    return "\n".join(out) + "\n"


def read_baseline(docs: Sequence[object]) -> BaselinePolicy | None:
    """The Baseline policy the documents of one file cpg wrote hold, or None when they are
    not in cpg's shape (the caller also compares the text cpg would write)."""
    rules: set[Rule | None] = set()
    members: set[PolicyTarget] = set()
    for doc in docs:
        if not isinstance(doc, Mapping) or doc.get("kind") != KIND:
            return None
        spec = doc.get("spec")
        if not isinstance(spec, Mapping) or spec.get("tier") != "Baseline":
            return None
        selection = _read_pods(spec.get("subject"))
        egress = spec.get("egress")
        if selection is None or not isinstance(egress, list) or len(egress) != 1:
            return None
        action = egress[0].get("action") if isinstance(egress[0], Mapping) else None
        if action == "Deny":
            rules.add(None)
        else:
            rule = _read_rule(egress[0])
            if rule is None:
                return None
            rules.add(rule)
        members |= _members_of(selection)
    if len(rules) != 1:
        return None
    return BaselinePolicy(next(iter(rules)), frozenset(members))


def _read_pods(entry: object) -> _Selection | None:
    if not isinstance(entry, Mapping) or set(entry) != {"pods"}:
        return None
    pods = entry["pods"]
    if not isinstance(pods, Mapping):
        return None
    namespaces = _read_selector(pods.get("namespaceSelector"))
    labels = _read_selector(pods.get("podSelector"))
    if namespaces is None or labels is None:
        return None
    (ns_fixed, ns_key, ns_values), (fixed, key, values) = namespaces, labels
    names = tuple(ns_values) if ns_key == METADATA_NAME else tuple(v for _k, v in ns_fixed)
    if (
        not names
        or (ns_key and ns_key != METADATA_NAME)
        or any(k != METADATA_NAME for k, _ in ns_fixed)
    ):
        return None
    return _Selection(names, fixed, key, values)


def _read_selector(
    selector: object,
) -> tuple[tuple[tuple[str, str], ...], str, tuple[str, ...]] | None:
    read = in_selection(selector, other_fields=True)
    if read is None or len(read[1]) > 1:
        return None
    fixed, expressions = read
    key, values = expressions[0] if expressions else ("", ())
    return fixed, key, values


def _read_rule(entry: Mapping[str, Any]) -> Rule | None:
    peers = entry.get("to")
    if entry.get("action") != "Accept" or not isinstance(peers, list) or len(peers) != 1:
        return None
    peer_entry = peers[0]
    ports: list[tuple[int, str]] = []
    try:
        for item in entry.get("protocols") or []:
            ((name, match),) = item.items()
            proto = {v: k for k, v in _PROTOCOLS.items()}[name]
            port = match["destinationPort"]
            if "number" in port:
                ports.append((int(port["number"]), proto))
            else:
                span = port["range"]
                ports += [(p, proto) for p in range(int(span["start"]), int(span["end"]) + 1)]
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    if isinstance(peer_entry, Mapping) and "networks" in peer_entry:
        cidrs = [str(c) for c in peer_entry["networks"] or []]
        if not cidrs:
            return None
        return Rule(
            EGRESS, CidrPeer(cidrs[0]), ports=tuple(sorted(ports)), more_cidrs=tuple(cidrs[1:])
        )
    selection = _read_pods(peer_entry)
    if selection is None or len(selection.namespaces) != 1 or selection.key:
        return None
    peer = EndpointPeer(selection.namespaces[0], selection.fixed)
    return Rule(EGRESS, peer, ports=tuple(sorted(set(ports))))


def member_view(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """A shared policy cpg wrote (Cilium's or a Baseline one) as a Cilium policy with one spec
    per member workload (``matchLabels`` with the namespace): what views that draw or count
    workloads read. A Baseline default deny becomes an egress deny of everything. Any other
    document as it is."""
    if not is_shared(doc):
        return doc
    found: SharedPolicy | BaselinePolicy | None = (
        read_baseline([doc]) if doc.get("kind") == KIND else read_shared(doc)
    )
    if found is None:
        return doc
    if found.rule is None:
        section, rules = deny_everything()
    else:
        section, rules = found.rule.direction, [rule_to_dict(found.rule, "")]
    specs = [
        spec_document(
            selector_of({**dict(member.selector), NAMESPACE_LABEL: member.namespace}),
            {section: rules},
        )
        for member in sorted(found.members)
    ]
    view = {key: value for key, value in doc.items() if key not in ("spec", "specs")}
    return view | {"kind": CLUSTERWIDE_KIND, "specs": specs}
