"""What the evidence holds for the rule that admits a flow: said beside an answer of why,
trace and verify, so a reviewer sees how much traffic stands behind it."""

from __future__ import annotations

from collections.abc import Callable

from cpg_core._base.documents import ZERO_TIME, PolicyEvidence
from cpg_core._base.flow import Flow
from cpg_core._flows.synthesis import Resolved, Resolver
from cpg_core._review._rule_keys import rule_key

EvidenceReader = Callable[[str, str], "PolicyEvidence | None"]
"""(namespace, workload) → that workload's evidence, or None: how a root lends its store."""


def seen_at(key: str) -> str:
    """A recorded time to the second, in UTC (``never`` for a rule no flow asked for)."""
    if not key or key == ZERO_TIME:
        return "never"
    return key.replace("T", " ").rstrip("Z").split(".")[0] + " UTC"


def evidence_behind(flow: Flow, read: EvidenceReader, resolver: Resolver | None = None) -> str:
    """What cpg's evidence holds for the rule it writes for ``flow``'s traffic, in words
    (``5 flows, first seen …, last seen … (evidence of shop/cpg-cart)``); "" when it holds
    none."""
    resolved = (resolver or Resolver()).resolve(flow)
    if not isinstance(resolved, Resolved):
        return ""
    target = resolved.target
    doc = read(target.namespace, target.workload)
    if doc is None:
        return ""
    key = rule_key(resolved.atom)
    rule = next((r for r in doc.rules if r.key == key), None)
    if rule is None:
        return ""
    where = f"evidence of {target.namespace}/{doc.policy.name}"
    if not rule.flow_count:
        return f"written for the cluster, not seen in a capture ({where})"
    flows = f"{rule.flow_count:,} flow{'s' if rule.flow_count != 1 else ''}"
    return (
        f"{flows}, first seen {seen_at(rule.first_seen)}, last seen {seen_at(rule.last_seen)} "
        f"({where})"
    )
