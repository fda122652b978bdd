"""How the cluster's Cilium agents are configured, as far as a verdict depends on it: one
value the review commands and the MCP session pass down to the one matcher (§D61)."""

from __future__ import annotations

import attrs

POLICY_MAP_MAX = 16_384
"""Cilium's default ``bpf-policy-map-max``: entries of one endpoint's policy map."""


@attrs.frozen(slots=True)
class AgentSettings:
    """The agent settings a verdict depends on; the defaults are Cilium's own."""

    allow_localhost: bool = True
    """``allow-localhost: always`` (True): the node reaches its own pods whatever the policy;
    ``policy`` (False): the node's traffic to its pods is policed like any other."""
    default_local_cluster: bool = True
    """``policy-default-local-cluster`` (on since 1.19): a peer selector that names no cluster
    selects the enforcing endpoint's cluster only."""
    host_firewall: bool = False
    """``enable-host-firewall``: host policies (a clusterwide policy's ``nodeSelector``) police
    the node; without it Cilium ignores them and the node is not policed."""
    dual_stack: bool = False
    """IPv4 and IPv6 both on: a world address carries ``world-ipv4`` or ``world-ipv6``, and a
    world peer without an address is selected by neither ``0.0.0.0/0`` nor ``::/0``."""
    policy_map_max: int = POLICY_MAP_MAX
    """``bpf-policy-map-max``: the plan's policy map pressure is judged against it."""
    version: str = ""
    """The agents' Cilium version (the oldest, ``1.19.2``); "" when unknown (the newest)."""
