"""Shared rules: a rule many workloads need, written once (ARCHITECTURE §D43).

A rule is shared when at least ``min_workloads`` workloads need exactly it (same direction,
peer, ports and L7 rules). It leaves their policies and goes into one policy of its own whose
selector selects exactly the pods those workloads' policies select, never more: the union of
their ``matchLabels`` selectors, written as ``In`` expressions on the one label whose value
differs (and on the namespace when several namespaces share one shape). ``endpointSelector:
{}`` would be shorter and wrong: it would also select pods no policy selected, and a pod
selected by a policy with an ingress or egress section becomes default-deny in that
direction, so it would break every such pod.

Per pod the allowed traffic is the same with and without sharing: Cilium computes an
endpoint's policy from every rule that selects it, whichever document holds the rule, and a
member pod stays default-deny in the rule's direction because the shared policy has a section
there. Evidence stays per workload; the shared policy's own evidence is its members' flows for
its rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from cpg_core._base.documents import PolicyDocument, PolicyEvidence
from cpg_core._base.labels import NAMESPACE_LABEL, LabelItems
from cpg_core._base.names import SHARED_FOLDER, policy_name, short_hash
from cpg_core._base.rules import (
    EGRESS,
    INGRESS,
    CidrPeer,
    EndpointPeer,
    EntityPeer,
    FqdnPeer,
    Rule,
    describe_rule,
    rules_from_atoms,
    with_declared,
)
from cpg_core._base.yaml_text import yaml_string
from cpg_core._flows.attribution import RuleStats
from cpg_core._flows.synthesis import PolicyTarget
from cpg_core._policy.matcher import policy_name as matcher_name
from cpg_core._policy.model import SUBJECT_FIELD
from cpg_core._policy.write import in_selection, rule_from_dict, subject_lines
from cpg_core._synthesis._aggregate_base import PolicyPlan
from cpg_core._synthesis.render import (
    API_VERSION,
    KIND,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    SHARED_LABEL,
    SHARED_VALUE,
    is_shared,
    rule_lines,
)

CLUSTERWIDE_KIND = "CiliumClusterwideNetworkPolicy"


@attrs.frozen(slots=True)
class SharedPolicy:
    """One rule and the workloads whose policies it serves."""

    rule: Rule
    members: frozenset[PolicyTarget]

    @property
    def name(self) -> str:
        return shared_name(self.rule)

    @property
    def namespace(self) -> str:
        """The members' namespace when they are all in one ("": a clusterwide policy)."""
        namespaces = {m.namespace for m in self.members}
        return next(iter(namespaces)) if len(namespaces) == 1 else ""

    @property
    def kind(self) -> str:
        return KIND if self.namespace else CLUSTERWIDE_KIND

    def joined(self, more: Iterable[PolicyTarget]) -> SharedPolicy:
        return attrs.evolve(self, members=self.members | frozenset(more))


@attrs.frozen(slots=True)
class Sharing:
    """Per-workload plans without their shared rules (their attribution, the evidence, is
    whole), and the shared policies."""

    plans: tuple[PolicyPlan, ...]
    shared: tuple[SharedPolicy, ...]


def shared_name(rule: Rule, kind: str = "shared") -> str:
    """A stable policy name from the rule (its direction and peer, and a hash of all of it:
    one peer can be shared with different ports)."""
    return policy_name(f"{kind}-{rule.direction}-{_peer_slug(rule)}-{short_hash(repr(rule))}")


def _peer_slug(rule: Rule) -> str:
    peer = rule.peer
    if isinstance(peer, EndpointPeer):
        slug = "-".join([peer.namespace, *(v for _k, v in peer.labels)])
    elif isinstance(peer, EntityPeer):
        slug = peer.entity
    elif isinstance(peer, CidrPeer):
        slug = peer.cidr.replace("/", "-").replace(":", "-").replace(".", "-")
    elif isinstance(peer, FqdnPeer):
        slug = peer.name.replace("*", "any")
    else:  # pragma: no cover - every peer kind is above
        slug = "peer"
    return slug


def share_rules(
    plans: Sequence[PolicyPlan],
    min_workloads: int,
    known: Mapping[Rule, SharedPolicy] | None = None,
    keep: Iterable[Rule] = (),
) -> Sharing:
    """Take every rule at least ``min_workloads`` plans have out of them into a shared
    policy. A rule already in a shared policy (``known``, read from its file) takes any plan
    that needs it; a rule in ``keep`` (a shared file a human changed) is never taken."""
    known = known or {}
    kept = set(keep)
    needing: dict[Rule, list[PolicyTarget]] = {}
    for plan in plans:
        for rule in plan.rules:
            needing.setdefault(rule, []).append(plan.target)
    shared: dict[Rule, SharedPolicy] = {}
    for rule, targets in needing.items():
        if rule in kept:
            continue
        earlier = known.get(rule)
        if earlier is not None:
            shared[rule] = earlier.joined(targets)
        elif min_workloads > 0 and len(set(targets)) >= min_workloads:
            shared[rule] = SharedPolicy(rule, frozenset(targets))
    reduced = tuple(
        plan
        if not any(r in shared for r in plan.rules)
        else attrs.evolve(plan, rules=tuple(r for r in plan.rules if r not in shared))
        for plan in plans
    )
    ordered = tuple(sorted(shared.values(), key=lambda p: p.name))
    return Sharing(plans=reduced, shared=ordered)


def joined_rules(*groups: Iterable[Rule]) -> tuple[Rule, ...]:
    """The rules of ``groups`` as one policy holds them (made again from their entries, the
    words of what declares them kept): what a live session has written for a workload."""
    rules = [rule for group in groups for rule in group]
    atoms = {atom for rule in rules for atom in rule.atoms()}
    return tuple(with_declared(rules_from_atoms(atoms), rules))


def shared_evidence_plan(
    name: str,
    rule: Rule,
    members: frozenset[PolicyTarget],
    plans: Sequence[PolicyPlan],
    max_samples: int,
) -> PolicyPlan:
    """The plan whose evidence is a shared policy's: its members' flows for its rule."""
    atoms = set(rule.atoms())
    attribution: dict[Any, RuleStats] = {}
    for plan in plans:
        if plan.target not in members:
            continue
        for atom, stats in plan.attribution.items():
            if atom not in atoms:
                continue
            held = attribution.get(atom)
            if held is None:
                attribution[atom] = stats.copy()
            else:
                held.absorb(stats, max_samples)
    return PolicyPlan(
        target=PolicyTarget(SHARED_FOLDER, ()),
        workload=name,
        name=name,
        rules=(rule,),
        attribution=attribution,
    )


def evidence_by_policy(
    docs: Iterable[tuple[str, PolicyEvidence]], policies: Iterable[PolicyDocument]
) -> dict[str, PolicyEvidence]:
    """Evidence documents by the name the matcher gives their policy (``namespace/name``, or
    ``name`` for a clusterwide one). A shared policy's evidence is kept in the shared folder
    whatever its kind; the pods it was made for are its members' (their evidence's
    subjects: its own samples show only a few of them)."""
    docs = list(docs)
    found: dict[str, PolicyEvidence] = {}
    by_workload: dict[tuple[str, str], PolicyEvidence] = {}
    for namespace, doc in docs:
        if namespace != SHARED_FOLDER:
            found[f"{namespace}/{doc.policy.name}"] = doc
            by_workload[(namespace, doc.policy.workload)] = doc
    kept = {doc.policy.name: doc for namespace, doc in docs if namespace == SHARED_FOLDER}
    for policy in policies:
        if not isinstance(policy, Mapping) or not is_shared(policy):
            continue
        own = kept.get(str((policy.get("metadata") or {}).get("name")))
        shared = read_shared(policy)
        if own is None or shared is None:
            continue
        subjects = {tuple(sorted(s.items())) for s in own.subjects}
        for member in shared.members:
            member_doc = by_workload.get((member.namespace, member.workload))
            if member_doc is not None:
                subjects |= {tuple(sorted(s.items())) for s in member_doc.subjects}
        found[matcher_name(policy)] = attrs.evolve(
            own, subjects=tuple(dict(items) for items in sorted(subjects))
        )
    return found


# --- selectors ---------------------------------------------------------------------------------


@attrs.frozen(slots=True, order=True)
class _Selection:
    """Pods in ``namespaces`` with the ``fixed`` labels and ``key`` in ``values`` (no key:
    the fixed labels alone): the union of members' ``matchLabels`` selectors, exactly."""

    namespaces: tuple[str, ...]
    fixed: LabelItems
    key: str
    values: tuple[str, ...]


def _selections(members: Iterable[PolicyTarget]) -> list[_Selection]:
    by_shape: dict[tuple[str, frozenset[str]], list[LabelItems]] = {}
    for member in members:
        shape = (member.namespace, frozenset(k for k, _v in member.selector))
        by_shape.setdefault(shape, []).append(member.selector)
    per_namespace: list[tuple[str, LabelItems, str, tuple[str, ...]]] = []
    for (namespace, _keys), selectors in sorted(by_shape.items(), key=lambda i: sorted(i[0][1])):
        values: dict[str, set[str]] = {}
        for selector in selectors:
            for key, value in selector:
                values.setdefault(key, set()).add(value)
        varying = sorted(k for k, v in values.items() if len(v) > 1)
        if len(varying) <= 1:
            key = varying[0] if varying else ""
            fixed = tuple(sorted((k, next(iter(v))) for k, v in values.items() if k != key))
            per_namespace.append((namespace, fixed, key, tuple(sorted(values.get(key, ())))))
        else:  # no one expression is exact: one selection per selector
            per_namespace += [(namespace, s, "", ()) for s in sorted(set(selectors))]
    # Namespaces whose members have one shape become one selection (``In`` on the namespace):
    # still exactly their pods, as every namespace in it has every value.
    merged: dict[tuple[LabelItems, str, tuple[str, ...]], list[str]] = {}
    for namespace, fixed, key, vals in per_namespace:
        merged.setdefault((fixed, key, vals), []).append(namespace)
    return sorted(
        _Selection(tuple(sorted(set(ns))), fixed, key, vals)
        for (fixed, key, vals), ns in merged.items()
    )


def _selector_lines(selection: _Selection, clusterwide: bool, indent: str) -> list[str]:
    labels = dict(selection.fixed)
    expressions: list[tuple[str, tuple[str, ...]]] = []
    if clusterwide:
        if len(selection.namespaces) == 1:
            labels[NAMESPACE_LABEL] = selection.namespaces[0]
        else:
            expressions.append((NAMESPACE_LABEL, selection.namespaces))
    if selection.key:
        if len(selection.values) == 1:
            labels[selection.key] = selection.values[0]
        else:
            expressions.append((selection.key, selection.values))
    return subject_lines(labels, sorted(expressions), indent)


def _members_of(selection: _Selection) -> set[PolicyTarget]:
    values = selection.values if selection.key else ("",)
    return {
        PolicyTarget(
            namespace,
            tuple(sorted(selection.fixed + (((selection.key, v),) if selection.key else ()))),
        )
        for namespace in selection.namespaces
        for v in values
    }


# --- rendering and reading back ----------------------------------------------------------------


def render_shared(policy: SharedPolicy) -> str:
    """The shared policy's YAML: a comment that says what it is, then the policy."""
    rule = policy.rule
    namespaces = sorted({m.namespace for m in policy.members})
    lines = [
        f"# Shared by {len(policy.members)} workloads in {len(namespaces)} "
        f"namespace{'s' if len(namespaces) != 1 else ''}: {describe_rule(rule)}",
        "# Written by cpg once instead of in each workload's policy; it selects exactly the pods",
        "# those policies select.",
        f"apiVersion: {API_VERSION}",
        f"kind: {policy.kind}",
        "metadata:",
        f"  name: {yaml_string(policy.name)}",
    ]
    if policy.namespace:
        lines.append(f"  namespace: {yaml_string(policy.namespace)}")
    lines += [
        "  labels:",
        f"    {MANAGED_BY_LABEL}: {MANAGED_BY_VALUE}",
        f"    {SHARED_LABEL}: {SHARED_VALUE}",
    ]
    clusterwide = not policy.namespace
    selections = _selections(policy.members)
    body = [f"  {rule.direction}:", *rule_lines(rule, policy.namespace)]
    if len(selections) == 1:
        return (
            "\n".join([*lines, "spec:", *_selector_lines(selections[0], clusterwide, "  "), *body])
            + "\n"
        )
    lines.append("specs:")  # several selections: one spec each, the rule repeated
    for selection in selections:
        spec = _selector_lines(selection, clusterwide, "  ")
        lines += ["- " + spec[0][2:], *spec[1:], *body]
    return "\n".join(lines) + "\n"


def read_shared(doc: Mapping[str, Any]) -> SharedPolicy | None:
    """The shared policy a document cpg wrote holds (its rule and members), or None when the
    document is not in cpg's shape (a human changed it)."""
    kind = doc.get("kind")
    metadata = doc.get("metadata")
    if kind not in (KIND, CLUSTERWIDE_KIND) or not isinstance(metadata, Mapping):
        return None
    namespace = str(metadata.get("namespace") or "") if kind == KIND else ""
    specs = [doc["spec"]] if "spec" in doc else doc.get("specs")
    if not isinstance(specs, list) or not specs:
        return None
    rules: set[Rule] = set()
    members: set[PolicyTarget] = set()
    for spec in specs:
        if not isinstance(spec, Mapping):
            return None
        directions = [d for d in (INGRESS, EGRESS) if d in spec]
        if len(directions) != 1 or set(spec) != {SUBJECT_FIELD, directions[0]}:
            return None
        items = spec[directions[0]]
        if not isinstance(items, list) or len(items) != 1:
            return None
        rule = rule_from_dict(items[0], directions[0], namespace)
        selection = _read_selection(spec[SUBJECT_FIELD], namespace)
        if rule is None or selection is None:
            return None
        rules.add(rule)
        members |= _members_of(selection)
    if len(rules) != 1:
        return None
    return SharedPolicy(next(iter(rules)), frozenset(members))


def _read_selection(selector: object, namespace: str) -> _Selection | None:
    read = in_selection(selector)
    if read is None:
        return None
    labels = dict(read[0])
    namespaces: tuple[str, ...] = (namespace,) if namespace else ()
    if not namespace and NAMESPACE_LABEL in labels:
        namespaces = (labels.pop(NAMESPACE_LABEL),)
    key = ""
    values: tuple[str, ...] = ()
    for found in read[1]:
        if found[0] == NAMESPACE_LABEL and not namespace and not namespaces:
            namespaces = found[1]
        elif not key:
            key, values = found
        else:
            return None
    if not namespaces:
        return None
    if not key and len(labels) > 0:
        return _Selection(namespaces, tuple(sorted(labels.items())), "", ())
    return _Selection(namespaces, tuple(sorted(labels.items())), key, values) if key else None
