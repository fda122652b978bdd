"""The key of an evidence rule, from the allow entry it records: what evidence, drift and the
answers of why, trace and verify match rules by. Apart from the evidence documents, so that
the judges can read keys without loading the document machinery."""

from __future__ import annotations

from cpg_core._base.labels import CLUSTER_LABEL
from cpg_core._base.rules import Atom, CidrPeer, EndpointPeer, EntityPeer, FqdnPeer, Peer


def peer_key(peer: Peer) -> str:
    if isinstance(peer, EntityPeer):
        return f"entity:{peer.entity}"
    if isinstance(peer, CidrPeer):
        return f"cidr:{peer.cidr}"
    if isinstance(peer, FqdnPeer):
        return f"fqdn:{peer.name}"
    labels = ",".join(f"{k}={v}" for k, v in record_labels(peer))
    return f"ep:{peer.namespace}/{labels}"


def record_labels(peer: EndpointPeer) -> list[tuple[str, str]]:
    """The selected labels, and the cluster label for a peer in another cluster."""
    if not peer.cluster:
        return list(peer.labels)
    return sorted([*peer.labels, (CLUSTER_LABEL, peer.cluster)])


def rule_key(atom: Atom) -> str:
    """``<direction>:<peer>:<protocol>:<port>`` plus ``:l7=...`` for L7 entries, e.g.
    ``ingress:ep:shop/app=web:TCP:8080:l7=http:GET:^/api$``."""
    key = f"{atom.direction}:{peer_key(atom.peer)}:{atom.protocol}:{atom.port}"
    return key + (":l7=" + ":".join(atom.l7) if atom.l7 else "")
