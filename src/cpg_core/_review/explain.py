"""Answer "why is this rule here?" from an evidence document: filters, the JSON record shared
by ``cpg explain --json`` and the MCP ``get_evidence`` tool, and a text view for people."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

import attrs

from cpg_core._base.documents import (
    ZERO_TIME,
    CidrPeerRecord,
    DnsRecord,
    EndpointPeerRecord,
    EntityPeerRecord,
    ExplainResult,
    FqdnPeerRecord,
    HttpRecord,
    PeerRecord,
    PolicyEvidence,
    RuleEvidence,
    SampleFlow,
    SampleSide,
)
from cpg_core._base.flow import Direction, Endpoint, Flow, Verdict
from cpg_core._review.behind import seen_at
from cpg_core._review.readiness import ReadinessRules, workload_profile
from cpg_core._review.wire import to_json
from cpg_core._synthesis.profile import duration_text
from cpg_core._synthesis.scope import CLUSTER_WHY, FOR_CLUSTER

if TYPE_CHECKING:  # _filters reads requests, which read this module
    from cpg_core._flows.filters import FlowFilter


@attrs.frozen(slots=True)
class ExplainFilter:
    """Rule filters; every one that is set must match (AND)."""

    direction: str | None = None
    port: str | None = None
    peer: tuple[str, str] | None = None
    """``(key, value)``: an endpoint label (``namespace`` matches the peer's namespace), or
    ``("entity", name)``."""
    peer_cidr: str | None = None
    http_method: str | None = None
    http_path: str | None = None
    dns_pattern: str | None = None
    since: str | None = None
    """Keep rules last seen at or after this time key (rules never seen are kept)."""
    until: str | None = None
    """Keep rules first seen at or before this time key (rules never seen are kept)."""
    samples_limit: int = 10
    flows: FlowFilter | None = None
    """Hubble-style filters: a rule is kept when one of its sample flows passes them (the
    peer's labels are the rule's; the policed side's are not in the evidence)."""

    @property
    def wants_l7(self) -> bool:
        return bool(self.http_method or self.http_path or self.dns_pattern)


def _peer_matches(peer: PeerRecord, wanted: tuple[str, str]) -> bool:
    key, value = wanted
    if key == "entity":
        return isinstance(peer, EntityPeerRecord) and peer.entity == value
    if not isinstance(peer, EndpointPeerRecord):
        return False
    if key in ("namespace", "io.kubernetes.pod.namespace") and peer.namespace == value:
        return True
    return peer.labels.get(key) == value


def _cidr_matches(peer: PeerRecord, wanted: str) -> bool:
    if not isinstance(peer, CidrPeerRecord):
        return False
    try:
        net = ipaddress.ip_network(peer.cidr, strict=False)
        within = ipaddress.ip_network(wanted, strict=False)
    except ValueError:
        return False
    return net.version == within.version and net.subnet_of(within)  # type: ignore[arg-type]


def rule_matches(rule: RuleEvidence, f: ExplainFilter) -> bool:
    if f.direction and rule.direction != f.direction:
        return False
    if f.port is not None and rule.port != f.port:
        return False
    if f.peer is not None and not _peer_matches(rule.peer, f.peer):
        return False
    if f.peer_cidr is not None and not _cidr_matches(rule.peer, f.peer_cidr):
        return False
    if f.since:
        last = rule.last_seen
        if last and last != ZERO_TIME and last < f.since:
            return False
    if f.until:
        first = rule.first_seen
        if first and first != ZERO_TIME and first > f.until:
            return False
    if f.flows is not None and not any(f.flows.matches(_as_flow(rule, s)) for s in rule.samples):
        return False
    if f.wants_l7:
        l7 = rule.l7
        if l7 is None:
            return False
        if f.http_method and not (isinstance(l7, HttpRecord) and l7.http_method == f.http_method):
            return False
        if f.http_path and not (isinstance(l7, HttpRecord) and l7.http_path == f.http_path):
            return False
        if f.dns_pattern and not (isinstance(l7, DnsRecord) and l7.dns_matchname == f.dns_pattern):
            return False
    return True


def _as_flow(rule: RuleEvidence, sample: SampleFlow) -> Flow:
    """A sample as a flow, for the Hubble-style filters: the peer carries the rule's labels."""
    labels: tuple[str, ...] = ()
    if isinstance(rule.peer, EndpointPeerRecord):
        labels = tuple(f"k8s:{k}={v}" for k, v in rule.peer.labels.items())
    ingress = rule.direction == "ingress"

    def side(record: SampleSide, is_peer: bool) -> Endpoint:
        return Endpoint(
            namespace=record.namespace,
            labels=labels if is_peer else (),
            pod_name=record.pod,
        )

    try:
        verdict = int(Verdict[sample.verdict])
    except KeyError:
        verdict = 0
    return Flow(
        time=sample.time,
        verdict=verdict,
        direction=int(Direction.INGRESS if ingress else Direction.EGRESS),
        source=side(sample.src, ingress),
        destination=side(sample.dst, not ingress),
        source_ip=sample.src.ip,
        destination_ip=sample.dst.ip,
        protocol=sample.protocol,
        port=sample.port,
    )


def matched_rules(doc: PolicyEvidence, f: ExplainFilter) -> list[RuleEvidence]:
    """Rules that pass the filter, in file order, each with at most ``samples_limit`` samples
    (the newest)."""
    return [
        attrs.evolve(rule, samples=rule.samples[-f.samples_limit :] if f.samples_limit > 0 else ())
        for rule in doc.rules
        if rule_matches(rule, f)
    ]


def explain_record(doc: PolicyEvidence, f: ExplainFilter) -> ExplainResult:
    """The explain JSON and MCP evidence record."""
    return ExplainResult(
        policy=doc.policy, sessions=doc.sessions, matched_rules=tuple(matched_rules(doc, f))
    )


def render_explain_json(doc: PolicyEvidence, f: ExplainFilter) -> str:
    """The one rendering of an explain record, shared by ``cpg explain --json`` and MCP."""
    return to_json(explain_record(doc, f))


def describe_peer(peer: PeerRecord) -> str:
    if isinstance(peer, EntityPeerRecord):
        return f"entity {peer.entity}"
    if isinstance(peer, CidrPeerRecord):
        return peer.cidr
    if isinstance(peer, FqdnPeerRecord):
        return peer.fqdn
    labels = ",".join(f"{k}={v}" for k, v in sorted(peer.labels.items()))
    return f"{peer.namespace}/{labels}" if peer.namespace else labels or "unknown"


def rule_in_words(rule: RuleEvidence) -> str:
    """A rule as a reviewer reads it: ``TCP/8080 from shop/app=web`` (its key is for machines)."""
    way = "from" if rule.direction == "ingress" else "to"
    traffic = f"{rule.protocol}/{rule.port}"
    if rule.protocol.startswith("ICMP"):
        traffic = f"{rule.protocol} type {rule.port}"
    text = f"{traffic} {way} {describe_peer(rule.peer)}"
    if isinstance(rule.l7, HttpRecord):
        text += f"  HTTP {rule.l7.http_method} {rule.l7.http_path}"
    elif isinstance(rule.l7, DnsRecord):
        text += f"  DNS {rule.l7.dns_matchname}"
    return text


def _side(side: SampleSide) -> str:
    name = "/".join(x for x in (side.namespace, side.workload) if x)
    bits = [name or side.ip or "<unknown>"]
    if side.pod:
        bits.append(f"({side.pod})")
    if name and side.ip:
        bits.append(side.ip)
    return " ".join(bits)


Line = tuple[str, str]
"""(style, text): style is "" (plain), "title", "rule", "dim" or "warn"; the CLI decides how
(or whether) to colour it."""


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _readiness_lines(doc: PolicyEvidence) -> list[Line]:
    """How long and how much of the workload the evidence holds, and whether its policy is
    ready to enforce (with the default thresholds: §D59)."""
    profile = workload_profile(
        doc.policy.namespace, doc.policy.workload, doc.rules, ReadinessRules()
    )
    if not profile.rules:
        return []
    seen = (
        f"Observed {duration_text(profile.span_seconds)} ({profile.first} → {profile.last}), "
        f"{_count(profile.flows, 'flow')}, {_count(profile.peers, 'peer')}, "
        f"{_count(profile.rules, 'rule')}; " + profile.stable_line().split(" (observed", 1)[0]
    )
    lines: list[Line] = [("", seen)]
    if profile.ready:
        lines.append(("", "Ready to enforce."))
    else:
        lines.append(("warn", f"Keep learning: {'; '.join(profile.reasons)}."))
    return lines


def explain_lines(doc: PolicyEvidence, f: ExplainFilter, where: str = "") -> list[Line]:
    """The lines ``cpg explain`` shows of one policy's evidence, filtered, each with its
    kind (title, rule, sample, …) for the renderer to style."""
    policy = doc.policy
    lines: list[Line] = [
        (
            "title",
            f"Policy {policy.name} in namespace {policy.namespace} (workload {policy.workload})",
        ),
    ]
    if doc.sessions:
        last = doc.sessions[-1]
        source = last.source
        origin = source.file or source.server or source.type
        lines.append(
            (
                "dim",
                f"Latest session {last.id}: {source.type or '?'} of {origin}, "
                f"{last.flows_ingested} flows; {len(doc.sessions)} session(s) kept",
            )
        )
    if where:
        lines.append(("dim", f"Evidence: {where}"))
    lines += _readiness_lines(doc)
    rules = matched_rules(doc, f)
    lines.append(("", ""))
    if not rules:
        lines.append(("warn", "No rule matches these filters. Available rules:"))
        for rule in doc.rules:
            lines.append(("", f"  {rule.direction}  {rule_in_words(rule)}"))
        return lines
    for rule in rules:
        lines.append(("rule", f"{rule.direction.capitalize()}  {rule_in_words(rule)}"))
        kinds = ", ".join(f"{k} {v}" for k, v in rule.classes.items())
        lines.append(("", f"  flows:      {rule.flow_count}" + (f" ({kinds})" if kinds else "")))
        if FOR_CLUSTER in rule.classes:
            lines.append(("dim", f"  why:        {CLUSTER_WHY}"))
        for by in rule.declared_by:
            lines.append(("", f"  declared:   by {by.text()}, not observed"))
        lines.append(("", f"  first seen: {seen_at(rule.first_seen)}"))
        lines.append(("", f"  last seen:  {seen_at(rule.last_seen)}"))
        lines.append(("dim", f"  key:        {rule.key}"))
        if rule.samples:
            lines.append(("", f"  newest {len(rule.samples)} sample(s):"))
            for s in rule.samples:
                node = f"  on {s.node}" if s.node else ""
                lines.append(
                    (
                        "",
                        f"    {seen_at(s.time)}  {_side(s.src)} → {_side(s.dst)}  "
                        f"{s.protocol}/{s.port}  {s.verdict} {s.drop_reason}{node}",
                    )
                )
        lines.append(("", ""))
    return lines
