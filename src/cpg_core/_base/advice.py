"""Findings in words a reviewer acts on: what happened to the traffic, and what fixes it.
The finding kinds stay the stable keys of cluster-health.json; these are for people."""

from __future__ import annotations

import attrs


@attrs.frozen(slots=True)
class Advice:
    label: str
    """A short name for the kind of finding, in plain words."""
    what: str
    """What happened to the traffic (``{subject}`` and ``{policies}`` are filled in)."""
    fix: str
    """What to do about it."""


_LABEL_FIX = "add app.kubernetes.io/name (or app) to its pod template so a policy can select it"

ADVICE: dict[str, Advice] = {
    "explicit_deny": Advice(
        "explicit deny",
        "{subject} is denied by a deny rule ({policies}); cpg never allows it",
        "if it should pass, change that deny policy: no allow rule overrides a deny",
    ),
    "auth_required": Advice(
        "needs mutual auth",
        "{subject} needs mutual authentication, which failed or is not set up",
        "enable Cilium's mutual authentication (SPIRE) on both ends, or drop the policy's "
        "authentication.mode",
    ),
    "lb_source_range": Advice(
        "outside LB source range",
        "{subject} comes from outside the Service's loadBalancerSourceRanges",
        "add the client's CIDR to the Service's spec.loadBalancerSourceRanges",
    ),
    "system_namespace": Advice(
        "system namespace",
        "{subject} of a workload in a system namespace left out: cpg writes at most the rules "
        "of the services the whole cluster uses there",
        "review that traffic and write its rules by hand, or have cpg write them (the "
        "include-system-namespaces option)",
    ),
    "platform_workload": Advice(
        "platform workload",
        "{subject} of a platform workload left out: cpg's catalogue recognised it (a mesh "
        "control plane, a scraper, a collector, an ingress controller or a webhook), which "
        "breaks when policed peer by peer",
        "review that traffic and write its rules by hand, keeping what the cluster declares "
        "open (the declarations option), or have cpg write them (the catalogue option: none)",
    ),
    "unselectable": Advice(
        "no stable label",
        "{subject} has no stable label to select it by",
        _LABEL_FIX,
    ),
    "invalid_label": Advice(
        "label not valid in a selector",
        "{subject}: Kubernetes would refuse a selector with it, so cpg writes no rule",
        "fix the label on the workload, or allow it by hand with a label that is valid",
    ),
    "no_namespace": Advice(
        "no namespace",
        "{subject} has no namespace, so no namespaced policy can select it",
        "write a CiliumClusterwideNetworkPolicy for it by hand",
    ),
    "reserved_target": Advice(
        "Cilium identity as target",
        "{subject} is one of Cilium's own identities (host, remote-node, ingress…), which "
        "namespaced policies do not select",
        "for a node, a CiliumClusterwideNetworkPolicy with a nodeSelector; for the Ingress or "
        "Gateway proxy's own traffic, a CiliumClusterwideNetworkPolicy whose endpointSelector "
        "is reserved:ingress (what the proxy sends to a backend needs fromEntities: [ingress] "
        "on the backend, which cpg writes); by hand",
    ),
    "no_l4": Advice(
        "no L4 header",
        "{subject} has no layer-4 header, so there is no port to allow",
        "check the capture: hubble observe -o jsonpb records TCP, UDP, SCTP and ICMP ports",
    ),
    "no_port": Advice(
        "port 0",
        "{subject} went to port 0; a rule for it would allow every port, so cpg writes none",
        "find out why the sender uses port 0 (often a health probe or a scan); allow it by "
        "hand only with the real port",
    ),
    "unsupported_protocol": Advice(
        "protocol without ports",
        "{subject} uses a protocol a CiliumNetworkPolicy port rule cannot name",
        "allow the peer without toPorts by hand, if it must pass at all",
    ),
    "unknown_direction": Advice(
        "direction unknown",
        "{subject}: Hubble did not say whether this was ingress or egress",
        "capture again with a Cilium that sets traffic_direction, or allow it by hand",
    ),
    "masked_direction": Advice(
        "direction and labels masked",
        "{subject}: the flow has neither a direction nor the pods' labels, as a field mask "
        "(a Hubble exporter's --hubble-export-fieldmask) leaves them out",
        "add traffic_direction, source.labels and destination.labels to the exporter's field "
        "mask (hubble-export-fieldmask) and capture again, or allow it by hand",
    ),
    "world_is_pod": Advice(
        "pod reported as world",
        "{subject}: Hubble reported this peer as world, but the capture shows its IP is a "
        "pod's; a toCIDR rule never selects a pod Cilium manages, so cpg writes none",
        "give cpg what Cilium knows of that IP as identities (kubectl get ciliumendpoints,"
        "ciliumidentities,pods -A -o json > identities.json; or the cluster) and replay: the "
        "rule then names the pod's labels (Hubble leaves them out of L7 proxy records and "
        "for pods that just started)",
    ),
    "cidr_for_dns_name": Advice(
        "toCIDR for a DNS name",
        "{subject}: the rule is a toCIDR of the address the name resolved to, which can "
        "change (a CDN, a cloud endpoint)",
        "replay with L7 rules (l7): cpg then writes toFQDNs for the name, and the DNS rule that lets "
        "Cilium see the lookups",
    ),
    "world_no_ip": Advice(
        "world peer without IP",
        "{subject} talks to the world but the flow has no IP address, so no CIDR rule can be "
        "written",
        "capture with the IP fields kept (hubble observe -o jsonpb), or write a toFQDNs or "
        "toCIDR rule by hand",
    ),
}


def advice_for(kind: str, subject: str, policies: tuple[str, ...] = ()) -> tuple[str, str, str]:
    """(label, what happened, fix) for a finding; an unknown kind is shown as it is."""
    known = ADVICE.get(kind)
    if known is None:
        return kind, subject, ""
    named = ", ".join(policies) if policies else "a policy Hubble did not name"
    return known.label, known.what.format(subject=subject, policies=named), known.fix
