"""Policy documents and their YAML text, rendered by hand so the bytes are ours to promise:
readable key order, quoted ports, a comment above every rule, a trailing newline."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cpg_core._base.rules import EGRESS, INGRESS, FqdnPeer, Rule, declared_suffix, describe_rule
from cpg_core._base.yaml_text import emit_sequence, emit_value, escape_char
from cpg_core._policy.model import SUBJECT_FIELD
from cpg_core._policy.write import labels_selector, rule_item_lines, rule_to_dict, spec_document

API_VERSION = "cilium.io/v2"
KIND = "CiliumNetworkPolicy"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "cpg"
SHARED_LABEL = "app.kubernetes.io/component"
SHARED_VALUE = "shared-rules"
"""The label that tells a shared policy from a workload's (plan suggests no fix into one)."""


def is_shared(policy: Mapping[str, Any]) -> bool:
    """A shared policy cpg wrote (§D43)."""
    metadata = policy.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    return isinstance(labels, Mapping) and labels.get(SHARED_LABEL) == SHARED_VALUE


def rule_comment(rule: Rule) -> str:
    """The comment above a rule: printable ASCII only, so no label or path can end the comment
    line (and write YAML of its own) or hide a character from the reviewer."""
    text = describe_rule(rule) + declared_suffix(rule.declared)
    if not (text.isascii() and text.isprintable()):
        text = "".join(c if " " <= c < "\x7f" else escape_char(c) for c in text)
    return f"  # {text}"


def rule_lines(rule: Rule, policy_namespace: str) -> list[str]:
    """A rule as a sequence item under ``  ingress:``/``  egress:``, with its comment.

    Written out directly rather than through :func:`emit` because policies can hold
    thousands of rules; a test pins that both give the same text."""
    peer = rule.peer
    if rule.http or rule.dns or isinstance(peer, FqdnPeer):
        return rule_lines_generic(rule, policy_namespace)  # L7 rules: rare, keep one code path
    return [rule_comment(rule), *rule_item_lines(rule, policy_namespace)]


def rule_lines_generic(rule: Rule, policy_namespace: str) -> list[str]:
    """:func:`rule_lines` through the generic emitter (the reference the fast path must match)."""
    lines = [rule_comment(rule)]
    emit_sequence([rule_to_dict(rule, policy_namespace)], 2, lines)
    return lines


def metadata(name: str, namespace: str) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE}}


def policy_document(
    name: str, namespace: str, selector: Iterable[tuple[str, str]], rules: Iterable[Rule]
) -> dict[str, Any]:
    """The policy as plain data (what ``yaml.safe_load`` of the rendered text gives)."""
    rules = list(rules)
    spec = spec_document(
        labels_selector(selector),
        {
            direction: [rule_to_dict(r, namespace) for r in rules if r.direction == direction]
            for direction in (INGRESS, EGRESS)
        },
    )
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata(name, namespace),
        "spec": spec,
    }


def render_policy(
    name: str, namespace: str, selector: Iterable[tuple[str, str]], rules: Iterable[Rule]
) -> str:
    """One CiliumNetworkPolicy as YAML text, written by cpg's own writer so that the same
    rules give the same bytes."""
    rules = list(rules)
    lines = [f"apiVersion: {API_VERSION}", f"kind: {KIND}"]
    emit_value("metadata:", metadata(name, namespace), 0, lines)
    lines.append("spec:")
    emit_value(f"  {SUBJECT_FIELD}:", labels_selector(selector), 2, lines)
    for direction in (INGRESS, EGRESS):
        section = [r for r in rules if r.direction == direction]
        if section:
            lines.append(f"  {direction}:")
            for rule in section:
                lines.extend(rule_lines(rule, namespace))
    return "\n".join(lines) + "\n"
