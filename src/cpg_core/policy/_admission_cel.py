"""Lint's rules as CEL for a ValidatingAdmissionPolicy: each rule
that can be judged on one document becomes a validation the API server evaluates on every
create and update of a Cilium policy, so a tenant's ``kubectl apply`` meets the checks a pull
request meets. An expression is true when the document passes the rule.

The expressions keep to what the API server's CEL offers every supported release (1.30 on):
the standard macros (``all``, ``exists``, ``filter``, ``map``), ``has``, ``size``, string
``matches`` (RE2) and ``startsWith``; they read ``object`` and the policy's ``variables``
(declared once, below); every iteration is over a list or map of the document, each guarded
by ``has`` so that an absent field is a pass, never an error. Rules that need more than one
document, or what the API server has already removed or refused before admission, are listed
in :data:`NOT_AT_ADMISSION` with why."""

from __future__ import annotations

import attrs

_SECTIONS = ("ingress", "ingressDeny", "egress", "egressDeny")
_INGRESS_PEERS = (
    "fromEndpoints",
    "fromCIDR",
    "fromCIDRSet",
    "fromEntities",
    "fromNodes",
    "fromGroups",
)
_EGRESS_PEERS = (
    "toEndpoints",
    "toCIDR",
    "toCIDRSet",
    "toEntities",
    "toServices",
    "toGroups",
    "toNodes",
)
_SELECTORS_OF_RULES = ("fromEndpoints", "toEndpoints", "fromRequires", "toRequires")


@attrs.frozen(slots=True)
class Variable:
    """A value the policy computes once per request (``variables.NAME``)."""

    name: str
    expression: str


@attrs.frozen(slots=True)
class AdmissionCheck:
    """One lint rule as a CEL expression: true when the document passes it."""

    code: str
    expression: str


@attrs.frozen(slots=True)
class NotAtAdmission:
    """A lint rule the admission guard does not enforce, and why."""

    code: str
    why: str


ADMISSION_VARIABLES = (Variable("namespaced", "object.kind == 'CiliumNetworkPolicy'"),)
"""What several checks read: whether the policy is namespaced."""


def _every_spec(condition: str) -> str:
    """Every spec ``s`` of the policy (``spec``, and each of ``specs``) holds ``condition``
    (each read on its own: the two have types of their own to the API server's checker)."""
    return (
        f"(!has(object.spec) || [object.spec].all(s, {condition})) && "
        f"(!has(object.specs) || object.specs.all(s, {condition}))"
    )


def _each_rule(condition: str, sections: tuple[str, ...] = _SECTIONS) -> str:
    """Every rule ``r`` of every spec ``s`` holds ``condition``."""
    parts = [f"(!has(s.{section}) || s.{section}.all(r, {condition}))" for section in sections]
    return _every_spec(" && ".join(parts))


def _at_most_one_peer(peers: tuple[str, ...]) -> str:
    present = " + ".join(f"(has(r.{p}) && size(r.{p}) > 0 ? 1 : 0)" for p in peers)
    return f"{present} <= 1"


def _selector_terms_valid(selector: str) -> str:
    """Kubernetes' rule for matchExpressions: In/NotIn need values, Exists/DoesNotExist
    take none."""
    return (
        f"(!has({selector}.matchExpressions) || {selector}.matchExpressions.all(e, "
        "((e.operator != 'In' && e.operator != 'NotIn') || (has(e.values) && size(e.values) > 0))"
        " && ((e.operator != 'Exists' && e.operator != 'DoesNotExist') || !has(e.values) || "
        "size(e.values) == 0)))"
    )


def _rule_selectors_valid() -> str:
    parts = [
        f"(!has(r.{key}) || r.{key}.all(sel, {_selector_terms_valid('sel')}))"
        for key in _SELECTORS_OF_RULES
    ]
    return " && ".join(parts)


ADMISSION_CHECKS = (
    AdmissionCheck(
        "CPG015",
        "(has(object.spec) || has(object.specs)) && "
        + _every_spec(
            " || ".join(f"(has(s.{section}) && size(s.{section}) > 0)" for section in _SECTIONS)
        ),
    ),
    AdmissionCheck(
        "CPG016",
        _every_spec(
            "(!has(s.endpointSelector) || " + _selector_terms_valid("s.endpointSelector") + ") && "
            "(!has(s.nodeSelector) || " + _selector_terms_valid("s.nodeSelector") + ")"
        )
        + " && "
        + _each_rule(_rule_selectors_valid()),
    ),
    AdmissionCheck(
        "CPG017",
        _each_rule(_at_most_one_peer(_INGRESS_PEERS), ("ingress", "ingressDeny"))
        + " && "
        + _each_rule(_at_most_one_peer((*_EGRESS_PEERS, "toFQDNs")), ("egress",))
        + " && "
        + _each_rule(_at_most_one_peer(_EGRESS_PEERS), ("egressDeny",)),
    ),
    AdmissionCheck(
        "CPG018",
        _each_rule("!(has(r.icmps) && size(r.icmps) > 0 && has(r.toPorts) && size(r.toPorts) > 0)"),
    ),
    AdmissionCheck(
        "CPG026",
        _each_rule(
            "!(has(r.fromNodes) && size(r.fromNodes) > 0) && "
            "!(has(r.toNodes) && size(r.toNodes) > 0)"
        ),
    ),
    AdmissionCheck(
        "CPG029",
        "!variables.namespaced || (" + _every_spec("!has(s.nodeSelector)") + ")",
    ),
    AdmissionCheck(
        "CPG046",
        "!(has(object.specs) && size(object.specs) == 0 && !has(object.spec))",
    ),
)
"""The rules the guard enforces so far, each as lint judges it on one document."""

NOT_AT_ADMISSION = (
    NotAtAdmission(
        "CPG001",
        "YAML that cannot be read never reaches the API server: kubectl refuses to send it",
    ),
    NotAtAdmission(
        "CPG002",
        "the API server validates the document against the CRD's schema itself, before admission",
    ),
    NotAtAdmission(
        "CPG013",
        "the API server prunes a field the CRD does not know before admission sees the "
        "document (kubectl's strict field check refuses it on the way)",
    ),
    NotAtAdmission(
        "CPG014",
        "a top-level description is a field the CRD does not know: pruned before admission",
    ),
    NotAtAdmission(
        "CPG047",
        "the API server refuses an invalid NetworkPolicy itself, before admission",
    ),
    NotAtAdmission("CPG048", "the API server receives JSON: the YAML text is gone"),
    NotAtAdmission("CPG049", "the API server receives JSON: the YAML text is gone"),
    NotAtAdmission("CPG050", "the API server receives JSON: the YAML text is gone"),
    NotAtAdmission("CPG051", "the API server's decoder refuses the number before admission"),
    NotAtAdmission(
        "CPG012",
        "which pods a selector selects is the cluster's state, not the document's",
    ),
    NotAtAdmission(
        "CPG034",
        "Valid=False is what Cilium's operator writes after the policy is stored",
    ),
    NotAtAdmission(
        "CPG040",
        "needs every policy selecting the workload (its DNS may be allowed by another)",
    ),
    NotAtAdmission(
        "CPG041",
        "needs every policy of the callers, across namespaces",
    ),
    NotAtAdmission("CPG042", "needs every policy that admits DNS, across namespaces"),
    NotAtAdmission("CPG043", "needs the cluster's ClusterNetworkPolicies together"),
    NotAtAdmission("CPG044", "needs the cluster's ClusterNetworkPolicies together"),
    NotAtAdmission("CPG045", "needs the cluster's own objects (webhooks, scrapers, caches)"),
)
"""The rules the guard does not enforce, and why."""


def exempt_namespaces(label: str) -> dict[str, object]:
    """The namespace selector of a binding that leaves the namespaces labelled
    ``label=exempt`` alone."""
    return {"matchExpressions": [{"key": label, "operator": "NotIn", "values": ["exempt"]}]}


__all__ = [
    "ADMISSION_CHECKS",
    "ADMISSION_VARIABLES",
    "NOT_AT_ADMISSION",
    "AdmissionCheck",
    "NotAtAdmission",
    "Variable",
    "exempt_namespaces",
]
