"""Evidence records: why each allow entry exists, in the Go tool's schema v2 field names.

One JSON document per policy: the policy, the sessions (runs) that contributed, and one rule
record per allow entry (direction, peer, protocol, port) with counts, first/last seen and
sample flows. This project adds ``peer.namespace``, ``rules[].classes``, ``samples[].node`` and
fills ``samples[].src.ip``/``dst.ip``; readers of the Go schema can ignore them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any, TypeVar

import attrs
import orjson

from cpg_core._base.documents import (
    EVIDENCE_SCHEMA_VERSION,
    ZERO_TIME,
    CidrPeerRecord,
    DnsRecord,
    EndpointPeerRecord,
    EntityPeerRecord,
    FqdnPeerRecord,
    HttpRecord,
    L7Record,
    PeerRecord,
    PolicyEvidence,
    PolicyIdentity,
    RuleEvidence,
    SampleFlow,
    SampleSide,
    SessionInfo,
)
from cpg_core._base.errors import CpgError
from cpg_core._base.labels import stable_labels
from cpg_core._base.rules import (
    HTTP,
    INGRESS,
    Atom,
    CidrPeer,
    EndpointPeer,
    EntityPeer,
    FqdnPeer,
    Peer,
)
from cpg_core._flows.attribution import RuleStats, sample_record
from cpg_core._review._rule_keys import record_labels, rule_key
from cpg_core._review.wire import DocumentError, from_data, to_data
from cpg_core._synthesis.aggregate import PolicyPlan

SCHEMA_VERSION = EVIDENCE_SCHEMA_VERSION
_PROTOCOL_NAMES = {
    "TCP": "TCP",
    "UDP": "UDP",
    "SCTP": "SCTP",
    "ICMPv4": "ICMPv4",
    "ICMPv6": "ICMPv6",
}


class EvidenceError(CpgError):
    """An evidence file cannot be used; the message names it and says what to do."""


def l7_record(atom: Atom) -> L7Record | None:
    """The ``l7`` part of an evidence rule (Go schema v2 field names)."""
    if not atom.l7:
        return None
    if atom.l7[0] == HTTP:
        return HttpRecord(http_method=atom.l7[1], http_path=atom.l7[2])
    return DnsRecord(dns_matchname=atom.l7[1])


def peer_record(peer: Peer) -> PeerRecord:
    if isinstance(peer, EntityPeer):
        return EntityPeerRecord(peer.entity)
    if isinstance(peer, FqdnPeer):
        return FqdnPeerRecord(peer.name)
    if isinstance(peer, CidrPeer):
        return CidrPeerRecord(peer.cidr)
    assert isinstance(peer, EndpointPeer)
    return EndpointPeerRecord(peer.namespace, dict(record_labels(peer)))


def rule_records(
    attribution: Mapping[Atom, RuleStats],
    session_id: str,
    max_samples: int,
    *,
    identified: bool = False,
) -> list[RuleEvidence]:
    """One evidence rule per allow entry, sorted by direction then key. An ``identified``
    session (a replay of known inputs) also records its share, so a rerun can replace it."""
    records = []
    for atom, stats in attribution.items():
        protocol = _PROTOCOL_NAMES.get(atom.protocol, atom.protocol)
        classes = dict(sorted(stats.classes.items()))
        records.append(
            RuleEvidence(
                key=rule_key(atom),
                direction=atom.direction,
                peer=peer_record(atom.peer),
                port=str(atom.port),
                protocol=protocol,
                l7=l7_record(atom),
                flow_count=stats.count,
                first_seen=stats.first or ZERO_TIME,
                last_seen=stats.last or ZERO_TIME,
                contributing_sessions=(session_id,),
                samples=tuple(
                    sample_record(sample, protocol, atom.port)
                    for sample in stats.newest(max_samples)
                ),
                classes=classes,
                by_session={session_id: dict(classes)} if identified else {},
                declared_by=stats.declared,
            )
        )
    records.sort(key=_rule_order)
    return records


def _rule_order(rule: RuleEvidence) -> tuple[str, str]:
    return (rule.direction, rule.key)


def _earliest(a: str, b: str) -> str:
    real = [t for t in (a, b) if t and t != ZERO_TIME]
    return min(real) if real else ZERO_TIME


def _latest(a: str, b: str) -> str:
    real = [t for t in (a, b) if t and t != ZERO_TIME]
    return max(real) if real else ZERO_TIME


def _canonical(sample: SampleFlow) -> bytes:
    return orjson.dumps(to_data(sample), option=orjson.OPT_SORT_KEYS)


def merge_samples(
    old: Iterable[SampleFlow], new: Iterable[SampleFlow], limit: int
) -> tuple[SampleFlow, ...]:
    """The ``limit`` newest distinct samples of both lists, oldest first (equal times are
    ordered by content, so the result never depends on which list a sample came from)."""
    if not limit:
        return ()
    # Equal samples are equal records (the record is made of the fields alone), so the
    # samples themselves find the duplicates; the canonical text, which costs a conversion
    # per sample, is made only to order samples of the same time.
    unique = sorted(dict.fromkeys([*old, *new]), key=_time_of)
    ordered: list[SampleFlow] = []
    start, end = 0, len(unique)
    while start < end:
        stop = start + 1
        while stop < end and unique[stop].time == unique[start].time:
            stop += 1
        ordered.extend(
            sorted(unique[start:stop], key=_canonical) if stop - start > 1 else unique[start:stop]
        )
        start = stop
    return tuple(ordered[-limit:])


def _time_of(sample: SampleFlow) -> str:
    return sample.time


def merge_rule(old: RuleEvidence, new: RuleEvidence, max_samples: int) -> RuleEvidence:
    sessions = list(old.contributing_sessions)
    sessions += [s for s in new.contributing_sessions if s not in sessions]
    classes = dict(old.classes)
    for cls, n in new.classes.items():
        classes[cls] = classes.get(cls, 0) + n
    return attrs.evolve(
        old,
        flow_count=old.flow_count + new.flow_count,
        first_seen=_earliest(old.first_seen, new.first_seen),
        last_seen=_latest(old.last_seen, new.last_seen),
        contributing_sessions=tuple(sessions),
        samples=merge_samples(old.samples, new.samples, max_samples),
        classes=dict(sorted(classes.items())),
        by_session=dict(sorted({**old.by_session, **new.by_session}.items())),
        declared_by=tuple(sorted({*old.declared_by, *new.declared_by})),
    )


def _without(rule: RuleEvidence, gone: Collection[str], keep: str) -> RuleEvidence:
    """``rule`` without what the sessions in ``gone`` added to it (their share is known only
    for identified sessions: anything else stays). ``keep`` stays listed, in its place, for
    the session being merged to fill again."""
    dropped = [s for s in rule.by_session if s in gone]
    if not dropped:
        return rule
    classes = dict(rule.classes)
    count = rule.flow_count
    for session in dropped:
        for cls, n in rule.by_session[session].items():
            classes[cls] = classes.get(cls, 0) - n
            count -= n
    return attrs.evolve(
        rule,
        flow_count=max(count, 0),
        classes={cls: n for cls, n in sorted(classes.items()) if n > 0},
        contributing_sessions=tuple(
            s for s in rule.contributing_sessions if s == keep or s not in dropped
        ),
        by_session={s: c for s, c in rule.by_session.items() if s not in dropped},
    )


MAX_SUBJECTS = 100
"""Label sets kept per policy: past it, the newest ones (in label order) are left out."""


def subject_labels(labels: Iterable[str]) -> dict[str, str]:
    """The labels of a pod a policy was made for, as its evidence keeps them: the stable
    ``k8s:`` labels without the ones Kubernetes and Cilium set (namespace, service account)."""
    return {
        key: value
        for key, value in stable_labels(labels).items()
        if not key.startswith(("io.kubernetes.", "io.cilium."))
    }


def plan_subjects(attribution: Mapping[Atom, RuleStats]) -> tuple[dict[str, str], ...]:
    """The distinct label sets of the pods the samples of ``attribution`` were made for."""
    found: dict[tuple[tuple[str, str], ...], None] = {}
    for atom, stats in attribution.items():
        for flow in stats.sample_flows():
            subject = flow.destination if atom.direction == INGRESS else flow.source
            found[tuple(sorted(subject_labels(subject.labels).items()))] = None
    return _subjects(found)


def _subjects(found: Iterable[tuple[tuple[str, str], ...]]) -> tuple[dict[str, str], ...]:
    return tuple(dict(items) for items in sorted(set(found))[:MAX_SUBJECTS] if items)


def merge_evidence(
    existing: PolicyEvidence | None,
    *,
    name: str,
    namespace: str,
    workload: str,
    session: SessionInfo,
    rules: Iterable[RuleEvidence],
    max_samples: int = 10,
    max_sessions: int = 10,
    replaces: Collection[str] = (),
    subjects: Iterable[Mapping[str, str]] = (),
) -> PolicyEvidence:
    """Fold one session's rules into a policy's evidence. Counts add, first/last seen widen,
    the session is upserted by id (oldest sessions dropped past ``max_sessions``), samples keep
    the newest ``max_samples``, and rules not seen this time are kept. What the sessions in
    ``replaces`` added, and what an identified session (``session.inputs``) added on an earlier
    run, is taken out first: replaying the same inputs replaces, never adds (§D24)."""
    old_sessions = list(existing.sessions) if existing is not None else []
    old_rules = list(existing.rules) if existing is not None else []
    gone = {*replaces, session.id} if session.inputs else set(replaces)
    if gone:
        old_sessions = [s for s in old_sessions if s.id == session.id or s.id not in gone]
        old_rules = [_without(rule, gone, session.id) for rule in old_rules]
    sessions = [s for s in old_sessions if s.id != session.id]
    position = next((i for i, s in enumerate(old_sessions) if s.id == session.id), None)
    if position is None:
        sessions.append(session)
    else:
        sessions.insert(position, session)
    if max_sessions and len(sessions) > max_sessions:
        sessions = sorted(sessions, key=lambda s: s.started_at)[-max_sessions:]
    by_key = {r.key: r for r in old_rules}
    for rule in rules:
        old = by_key.get(rule.key)
        if old is None:
            if max_samples and len(rule.samples) > max_samples:
                rule = attrs.evolve(rule, samples=merge_samples((), rule.samples, max_samples))
            by_key[rule.key] = rule
        else:
            by_key[rule.key] = merge_rule(old, rule, max_samples)
    if gone:
        kept = (_unlisted(rule, session) for rule in by_key.values())
        by_key = {rule.key: rule for rule in kept if rule.flow_count or rule.contributing_sessions}
    known = list(existing.subjects) if existing is not None else []
    return PolicyEvidence(
        policy=PolicyIdentity(name, namespace, workload),
        sessions=tuple(sessions),
        rules=tuple(sorted(by_key.values(), key=_rule_order)),
        subjects=_subjects(tuple(sorted(s.items())) for s in [*known, *subjects]),
    )


def _unlisted(rule: RuleEvidence, session: SessionInfo) -> RuleEvidence:
    """An identified session stays listed on a rule only while it still adds to it."""
    stale = session.id in rule.contributing_sessions and session.id not in rule.by_session
    if session.inputs and stale:
        listed = tuple(s for s in rule.contributing_sessions if s != session.id)
        return attrs.evolve(rule, contributing_sessions=listed)
    return rule


def plan_evidence(
    plan: PolicyPlan,
    session: SessionInfo,
    existing: PolicyEvidence | None = None,
    *,
    max_samples: int = 10,
    max_sessions: int = 10,
    replaces: Collection[str] = (),
) -> PolicyEvidence:
    """One policy's evidence after ``session``: what this run attributed to each allow entry,
    folded into what ``existing`` evidence already held (``replaces``: see merge_evidence)."""
    return merge_evidence(
        existing,
        name=plan.name,
        namespace=plan.namespace,
        workload=plan.workload,
        session=session,
        rules=rule_records(
            plan.attribution, session.id, max_samples, identified=bool(session.inputs)
        ),
        max_samples=max_samples,
        max_sessions=max_sessions,
        replaces=replaces,
        subjects=plan_subjects(plan.attribution),
    )


def render_evidence(doc: PolicyEvidence) -> str:
    """The evidence file's text: JSON with a 2-space indent and keys in schema order, each
    sample flow on one line (easy to grep, and a third of the size), final newline."""
    shown = to_data(doc)
    for rule in shown["rules"]:
        rule["samples"] = [orjson.Fragment(orjson.dumps(s)) for s in rule["samples"]]
    return orjson.dumps(shown, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE).decode()


def parse_evidence(text: str, where: str) -> PolicyEvidence:
    """Read an evidence document; any other schema version, or a field of the wrong type, is
    refused with the fix."""
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise EvidenceError(
            f"{where}: not valid JSON ({exc}); delete it and run 'cpg replay' again to rebuild it"
        ) from None
    if not isinstance(doc, dict):
        raise EvidenceError(
            f"{where}: not an evidence document; delete it and run 'cpg replay' again"
        )
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise EvidenceError(
            f"{where}: evidence schema_version {version!r}, but this cpg reads version "
            f"{SCHEMA_VERSION}; move the file aside (or delete the evidence folder) and run "
            "'cpg replay' or 'cpg generate' again to rebuild it"
        )
    try:
        return from_data(doc, PolicyEvidence, where)
    except DocumentError as exc:
        raise EvidenceError(
            f"{exc}; move the file aside (or delete the evidence folder) and run 'cpg replay' "
            "again to rebuild it"
        ) from None


T = TypeVar("T")


def redact_ips(doc: T) -> tuple[T, int]:
    """A document (evidence, cluster health) without the IP addresses of its sample flows
    (for a public repository), and how many were removed. CIDR peers stay: the policies
    themselves name them."""
    removed = 0

    def walk(value: Any) -> Any:
        nonlocal removed
        if isinstance(value, SampleSide):
            if value.ip:
                removed += 1
                return attrs.evolve(value, ip="")
            return value
        if isinstance(value, tuple):
            return tuple(walk(item) for item in value)
        if attrs.has(type(value)):
            changes = {}
            for field in attrs.fields(type(value)):
                item = getattr(value, field.name)
                new = walk(item)
                if new is not item:
                    changes[field.name] = new
            return attrs.evolve(value, **changes) if changes else value
        return value

    return walk(doc), removed
