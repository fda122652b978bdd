"""The default-deny policy that starts a namespace's onboarding: it selects every endpoint and
turns on default deny both ways without allowing anything (Cilium ≥ 1.16)."""

from __future__ import annotations

from cpg_core._base.names import is_dns1123_label
from cpg_core._synthesis.render import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from cpg_core.text import shown


def bootstrap_name(namespace: str) -> str:
    # Not "cpg-…": it must never become a merge or dedup target of generated policies.
    return f"default-deny-{namespace}"


def render_bootstrap(namespace: str) -> str:
    """YAML of a namespaced default-deny CiliumNetworkPolicy. ``ingress: [{}]`` and
    ``egress: [{}]`` (never empty lists) keep both directions enforced."""
    if not is_dns1123_label(namespace):
        raise ValueError(
            f"{shown(namespace)} is not a valid namespace name (lower-case letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63)"
        )
    return (
        "apiVersion: cilium.io/v2\n"
        "kind: CiliumNetworkPolicy\n"
        "metadata:\n"
        f"  name: {bootstrap_name(namespace)}\n"
        f"  namespace: {namespace}\n"
        "  labels:\n"
        f"    {MANAGED_BY_LABEL}: {MANAGED_BY_VALUE}\n"
        "spec:\n"
        "  # every endpoint in the namespace; nothing is allowed until other policies say so\n"
        "  endpointSelector: {}\n"
        "  enableDefaultDeny:\n"
        "    ingress: true\n"
        "    egress: true\n"
        "  ingress:\n"
        "  - {}\n"
        "  egress:\n"
        "  - {}\n"
    )
