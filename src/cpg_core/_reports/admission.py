"""The admission guard as Kubernetes objects: one
ValidatingAdmissionPolicy holding a validation per enforced lint rule, and per action (Deny,
Warn, Audit) a ConfigMap naming the rules it takes and a binding that applies them. A user
moves a rule between actions by moving its key between ConfigMaps; a namespace or a policy
labelled ``cpg.io/guard: exempt`` is left alone. Plain dicts out, rendered by the caller."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cpg_core._base.cilium_version import Version
from cpg_core._policy.admission_cel import (
    ADMISSION_CHECKS,
    ADMISSION_VARIABLES,
    CILIUM_KINDS,
    NOT_AT_ADMISSION,
    SIZE_CHECK,
    SIZE_MESSAGE,
    AdmissionCheck,
    cluster_network_policy_checks,
    exempt_namespaces,
    network_policy_checks,
    pod_cidr_checks,
    version_checks,
    within_bounds,
)
from cpg_core._policy.matcher import policy_name
from cpg_core._review.lint import RULES, LintRule, lint_text
from cpg_core._review.lint_versions import NEWEST, milestones

POLICY_NAME = "cpg-lint"
EXEMPT_LABEL = "cpg.io/guard"
ACTIONS = ("Deny", "Warn", "Audit")
_MANAGED = {"app.kubernetes.io/managed-by": "cpg", "app.kubernetes.io/part-of": "cpg-guard"}
MESSAGE_LIMIT = 1024
"""The longest message a validation carries (the API server's own limit is far larger)."""


def params_name(action: str) -> str:
    return f"{POLICY_NAME}-{action.lower()}"


def _message(rule: LintRule) -> str:
    text = f"{rule.code} {rule.name}: {rule.summary} Fix: {rule.fix}"
    return " ".join(text.split())[:MESSAGE_LIMIT]


def admission_checks(
    version: Version = NEWEST, pod_cidrs: Sequence[str] = ()
) -> tuple[AdmissionCheck, ...]:
    """Every check the guard makes for Cilium ``version`` (and the cluster's ``pod_cidrs``),
    by rule code, each for the kinds it is about (Cilium's policies, NetworkPolicies)."""
    parts: dict[str, list[str]] = {}
    cilium = (
        *ADMISSION_CHECKS,
        *version_checks(version, milestones()),
        *pod_cidr_checks(pod_cidrs),
    )
    for check in cilium:
        parts.setdefault(check.code, []).append(
            f"!(object.kind in {CILIUM_KINDS}) || !variables.checkable || ({check.expression})"
        )
    for check in network_policy_checks(version):
        parts.setdefault(check.code, []).append(
            f"object.kind != 'NetworkPolicy' || ({check.expression})"
        )
    since = milestones()["cluster-network-policy"]
    for check in cluster_network_policy_checks(version, since):
        parts.setdefault(check.code, []).append(
            f"object.kind != 'ClusterNetworkPolicy' || ({check.expression})"
        )
    return tuple(
        AdmissionCheck(code, " && ".join(f"({part})" for part in parts[code]))
        for code in sorted(parts)
    )


def _gated(check: AdmissionCheck, title: str) -> str:
    """The validation of ``check``: taken when the binding's ConfigMap names its code. Its
    first line, a comment, names the rule: the API server quotes the expression when it fails
    (a regular expression Go refuses, CPG022), so the rule is in the message."""
    return (
        f"// {title}\n!has(params.data) || !('{check.code}' in params.data) || ({check.expression})"
    )


def admission_policy(version: Version = NEWEST, pod_cidrs: Sequence[str] = ()) -> dict[str, Any]:
    """The ValidatingAdmissionPolicy: each enforced rule's check (for Cilium ``version``),
    taken when the binding's ConfigMap names the rule."""
    validations = []
    for check in admission_checks(version, pod_cidrs):
        rule = RULES[check.code]
        validations.append(
            {
                "expression": _gated(check, f"{rule.code} {rule.name}"),
                "message": _message(rule),
                "reason": "Invalid",
            }
        )
    validations.append(
        {
            "expression": _gated(SIZE_CHECK, f"{SIZE_CHECK.code}: the policy is checked"),
            "messageExpression": SIZE_MESSAGE,
            "reason": "Invalid",
        }
    )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME, "labels": dict(_MANAGED)},
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["cilium.io"],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": [
                            "ciliumnetworkpolicies",
                            "ciliumclusterwidenetworkpolicies",
                        ],
                    },
                    {
                        "apiGroups": ["networking.k8s.io"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["networkpolicies"],
                    },
                    {
                        "apiGroups": ["policy.networking.k8s.io"],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["clusternetworkpolicies"],
                    },
                ]
            },
            "variables": [
                {"name": v.name, "expression": v.expression} for v in ADMISSION_VARIABLES
            ],
            "validations": validations,
        },
    }


def admission_params(action: str, codes: Iterable[str], namespace: str) -> dict[str, Any]:
    """The ConfigMap of one action: a key per rule it takes (the value says the rule)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": params_name(action),
            "namespace": namespace,
            "labels": dict(_MANAGED),
        },
        "data": {
            code: RULES[code].name if code in RULES else "policy-too-large-to-check"
            for code in codes
        },
    }


def admission_binding(action: str, namespace: str, validation_action: str = "") -> dict[str, Any]:
    """The binding of one action's ConfigMap (``validation_action`` instead of the action's
    own: Warn for Deny's binding while a cluster is rolled out)."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": params_name(action), "labels": dict(_MANAGED)},
        "spec": {
            "policyName": POLICY_NAME,
            "validationActions": [validation_action or action],
            "paramRef": {
                "name": params_name(action),
                "namespace": namespace,
                "parameterNotFoundAction": "Allow",
            },
            "matchResources": {
                "namespaceSelector": exempt_namespaces(EXEMPT_LABEL),
                "objectSelector": exempt_namespaces(EXEMPT_LABEL),
            },
        },
    }


def admission_objects(
    namespace: str = "cpg",
    *,
    rollout: bool = True,
    version: Version = NEWEST,
    pod_cidrs: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Every object of the guard: the policy; the Deny ConfigMap with the enforced error
    rules, the Warn one with the enforced warnings, an empty Audit one; and their bindings.
    With ``rollout``, the Deny binding warns until a user flips it to Deny."""
    enforced = [c.code for c in admission_checks(version, pod_cidrs)]
    errors = [c for c in enforced if RULES[c].level == "error"]
    warnings = [c for c in enforced if RULES[c].level == "warning"]
    chosen = {"Deny": errors, "Warn": [*warnings, SIZE_CHECK.code], "Audit": []}
    objects = [admission_policy(version, pod_cidrs)]
    for action in ACTIONS:
        objects.append(admission_params(action, chosen[action], namespace))
    for action in ACTIONS:
        flipped = "Warn" if rollout and action == "Deny" else ""
        objects.append(admission_binding(action, namespace, flipped))
    return objects


def not_enforced() -> list[tuple[str, str]]:
    """Each lint rule the guard leaves to lint, with why."""
    return [(item.code, item.why) for item in NOT_AT_ADMISSION]


__all__ = [
    "ACTIONS",
    "EXEMPT_LABEL",
    "POLICY_NAME",
    "admission_binding",
    "admission_checks",
    "admission_objects",
    "admission_params",
    "admission_policy",
    "admission_yaml",
    "guard_notes",
    "not_enforced",
    "params_name",
]


def admission_yaml(
    namespace: str = "cpg",
    *,
    rollout: bool = True,
    version: Version = NEWEST,
    pod_cidrs: Sequence[str] = (),
) -> str:
    """The guard's objects as one YAML stream (for Cilium ``version``), headed by what it
    enforces and what it leaves to lint (with why)."""
    import yaml

    enforced = ", ".join(c.code for c in admission_checks(version, pod_cidrs))
    release = ".".join(map(str, version[:2]))
    lines = [
        f"# cpg's lint rules as a ValidatingAdmissionPolicy (Kubernetes 1.30+), for Cilium {release}.",
        f"# Enforced on one document: {enforced}.",
        "# A rule is taken by the action whose ConfigMap names it; the Deny binding warns",
        "# until you set its validationActions to [Deny]. A namespace or a policy labelled",
        f"# {EXEMPT_LABEL}=exempt is left alone. A policy past the bounds the API server's",
        "# CEL budget affords is not checked: the validation too-large (warn) says so.",
        "# Left to lint (cpg lint in CI):",
        *(f"#   {code}: {why}" for code, why in not_enforced()),
    ]
    body = yaml.safe_dump_all(
        admission_objects(namespace, rollout=rollout, version=version, pod_cidrs=pod_cidrs),
        sort_keys=False,
        width=100,
    )
    return "\n".join(lines) + "\n" + body


def guard_notes(
    policies: Sequence[Mapping[str, Any]],
    limit: int = 20,
    version: Version = NEWEST,
    pod_cidrs: Sequence[str] = (),
) -> tuple[str, ...]:
    """What the guard, as shipped, would do with the stored ``policies`` on their next
    create or update: those it would refuse once its Deny binding denies, and those it would
    warn about. Read off lint's findings of the guard's rules: the guard's expressions give
    lint's verdict on every rule they enforce (proven in cpg's tests), so no CEL runs here."""
    import yaml

    enforced = {c.code for c in admission_checks(version, pod_cidrs)}
    refused: list[str] = []
    warned: list[str] = []
    for policy in policies:
        checkable, pairable = within_bounds(dict(policy))
        if not (checkable and pairable):
            warned.append(f"{policy_name(policy) or '?'} ({SIZE_CHECK.code})")
        skipped = set() if checkable and pairable else {"CPG008", "CPG011"}
        text = yaml.safe_dump(dict(policy), sort_keys=False)
        found = [
            f
            for f in lint_text(text, "cluster", cilium_version=version, pod_cidrs=pod_cidrs)
            if f.code in enforced and checkable and f.code not in skipped
        ]
        if not found:
            continue
        name = found[0].policy or "?"
        errors = sorted({f.code for f in found if f.level == "error"})
        warnings = sorted({f.code for f in found if f.level == "warning"})
        if errors:
            refused.append(f"{name} ({', '.join(errors)})")
        if warnings:
            warned.append(f"{name} ({', '.join(warnings)})")
    notes = []
    for verb, names in (("refuse", refused), ("warn about", warned)):
        if names:
            shown = ", ".join(names[:limit]) + (
                f" and {len(names) - limit} more" if len(names) > limit else ""
            )
            notes.append(
                f"the admission guard, as shipped, would {verb} "
                f"{len(names)} of the {len(policies)} Cilium policies stored in the cluster "
                f"on their next update: {shown}"
            )
    if not notes and policies:
        notes.append(
            f"the admission guard would refuse none of the {len(policies)} Cilium policies "
            "stored in the cluster: its Deny binding can be turned on"
        )
    return tuple(notes)
