"""Evidence records: why each allow entry exists, in the Go tool's schema v2 field names.

One JSON document per policy: the policy, the sessions (runs) that contributed, and one rule
record per allow entry (direction, peer, protocol, port) with counts, first/last seen and
sample flows. This project adds ``peer.namespace``, ``rules[].classes``, ``samples[].node`` and
fills ``samples[].src.ip``/``dst.ip``; readers of the Go schema can ignore them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import orjson

from cpg_core.attribution import RuleStats, sample_record
from cpg_core.errors import CpgError
from cpg_core.rules import HTTP, Atom, CidrPeer, EndpointPeer, EntityPeer, FqdnPeer, Peer

SCHEMA_VERSION = 2
ZERO_TIME = "0001-01-01T00:00:00Z"
_PROTOCOL_NAMES = {
    "TCP": "TCP",
    "UDP": "UDP",
    "SCTP": "SCTP",
    "ICMPv4": "ICMPv4",
    "ICMPv6": "ICMPv6",
}


class EvidenceError(CpgError):
    """An evidence file cannot be used; the message names it and says what to do."""


@attrs.frozen(slots=True)
class SessionInfo:
    """One run that contributed evidence. Times are passed in: cpg_core reads no clock."""

    id: str
    started_at: str
    ended_at: str
    cpg_version: str
    source_type: str  # "replay" or "live"
    source_file: str = ""
    source_server: str = ""
    flows_ingested: int = 0
    flows_unhandled: int = 0
    """Flows of the session that produced no rule (not a drop, replies, infra, unresolvable…)."""

    def record(self) -> dict[str, Any]:
        source: dict[str, str] = {"type": self.source_type}
        if self.source_file:
            source["file"] = self.source_file
        if self.source_server:
            source["server"] = self.source_server
        return {
            "id": self.id,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "cpg_version": self.cpg_version,
            "source": source,
            "flows_ingested": self.flows_ingested,
            "flows_unhandled": self.flows_unhandled,
        }


def peer_key(peer: Peer) -> str:
    if isinstance(peer, EntityPeer):
        return f"entity:{peer.entity}"
    if isinstance(peer, CidrPeer):
        return f"cidr:{peer.cidr}"
    if isinstance(peer, FqdnPeer):
        return f"fqdn:{peer.name}"
    labels = ",".join(f"{k}={v}" for k, v in peer.labels)
    return f"ep:{peer.namespace}/{labels}"


def rule_key(atom: Atom) -> str:
    """``<direction>:<peer>:<protocol>:<port>`` plus ``:l7=...`` for L7 entries, e.g.
    ``ingress:ep:shop/app=web:TCP:8080:l7=http:GET:^/api$``."""
    key = f"{atom.direction}:{peer_key(atom.peer)}:{atom.protocol}:{atom.port}"
    return key + (":l7=" + ":".join(atom.l7) if atom.l7 else "")


def l7_record(atom: Atom) -> dict[str, str] | None:
    """The ``l7`` part of an evidence rule (Go schema v2 field names)."""
    if not atom.l7:
        return None
    if atom.l7[0] == HTTP:
        return {"protocol": "http", "http_method": atom.l7[1], "http_path": atom.l7[2]}
    return {"protocol": "dns", "dns_matchname": atom.l7[1]}


def peer_record(peer: Peer) -> dict[str, Any]:
    if isinstance(peer, EntityPeer):
        return {"type": "entity", "entity": peer.entity}
    if isinstance(peer, FqdnPeer):
        return {"type": "fqdn", "fqdn": peer.name}
    if isinstance(peer, CidrPeer):
        return {"type": "cidr", "cidr": peer.cidr}
    assert isinstance(peer, EndpointPeer)
    return {"type": "endpoint", "namespace": peer.namespace, "labels": dict(peer.labels)}


def rule_records(
    attribution: Mapping[Atom, RuleStats], session_id: str, max_samples: int
) -> list[dict[str, Any]]:
    """One evidence rule per allow entry, sorted by direction then key."""
    records = []
    for atom, stats in attribution.items():
        protocol = _PROTOCOL_NAMES.get(atom.protocol, atom.protocol)
        records.append(
            {
                "key": rule_key(atom),
                "direction": atom.direction,
                "peer": peer_record(atom.peer),
                "port": str(atom.port),
                "protocol": protocol,
                **({"l7": l7} if (l7 := l7_record(atom)) else {}),
                "flow_count": stats.count,
                "first_seen": stats.first or ZERO_TIME,
                "last_seen": stats.last or ZERO_TIME,
                "contributing_sessions": [session_id],
                "samples": [
                    sample_record(sample, protocol, atom.port)
                    for sample in stats.newest(max_samples)
                ],
                "classes": dict(sorted(stats.classes.items())),
            }
        )
    records.sort(key=_rule_order)
    return records


def _rule_order(rule: Mapping[str, Any]) -> tuple[str, str]:
    return (str(rule.get("direction", "")), str(rule.get("key", "")))


def _earliest(a: str, b: str) -> str:
    real = [t for t in (a, b) if t and t != ZERO_TIME]
    return min(real) if real else ZERO_TIME


def _latest(a: str, b: str) -> str:
    real = [t for t in (a, b) if t and t != ZERO_TIME]
    return max(real) if real else ZERO_TIME


def _canonical(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def merge_samples(
    old: Iterable[Mapping[str, Any]], new: Iterable[Mapping[str, Any]], limit: int
) -> list[dict[str, Any]]:
    """The ``limit`` newest distinct samples of both lists, oldest first (equal times are
    ordered by content, so the result never depends on which list a sample came from)."""
    unique = {_canonical(s): dict(s) for s in [*old, *new]}
    ordered = sorted(unique.items(), key=lambda item: (str(item[1].get("time", "")), item[0]))
    return [sample for _, sample in ordered[-limit:]] if limit else []


def merge_rule(old: dict[str, Any], new: Mapping[str, Any], max_samples: int) -> dict[str, Any]:
    merged = dict(old)
    merged["flow_count"] = int(old.get("flow_count", 0)) + int(new.get("flow_count", 0))
    merged["first_seen"] = _earliest(old.get("first_seen", ""), new.get("first_seen", ""))
    merged["last_seen"] = _latest(old.get("last_seen", ""), new.get("last_seen", ""))
    sessions = list(old.get("contributing_sessions") or [])
    for session in new.get("contributing_sessions") or []:
        if session not in sessions:
            sessions.append(session)
    merged["contributing_sessions"] = sessions
    merged["samples"] = merge_samples(
        old.get("samples") or [], new.get("samples") or [], max_samples
    )
    classes = dict(old.get("classes") or {})
    for cls, n in (new.get("classes") or {}).items():
        classes[cls] = classes.get(cls, 0) + n
    merged["classes"] = dict(sorted(classes.items()))
    return merged


def new_document(name: str, namespace: str, workload: str) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "policy": {"name": name, "namespace": namespace, "workload": workload},
        "sessions": [],
        "rules": [],
    }


def merge_evidence(
    existing: Mapping[str, Any] | None,
    *,
    name: str,
    namespace: str,
    workload: str,
    session: SessionInfo,
    rules: Iterable[Mapping[str, Any]],
    max_samples: int = 10,
    max_sessions: int = 10,
) -> dict[str, Any]:
    """Fold one session's rules into a policy's evidence. Counts add, first/last seen widen,
    the session is upserted by id (oldest sessions dropped past ``max_sessions``), samples keep
    the newest ``max_samples``, and rules not seen this time are kept."""
    doc = new_document(name, namespace, workload)
    if existing is not None:
        doc["sessions"] = [dict(s) for s in existing.get("sessions") or []]
        doc["rules"] = [dict(r) for r in existing.get("rules") or []]
    record = session.record()
    sessions = [s for s in doc["sessions"] if s.get("id") != session.id]
    position = next((i for i, s in enumerate(doc["sessions"]) if s.get("id") == session.id), None)
    if position is None:
        sessions.append(record)
    else:
        sessions.insert(position, record)
    if max_sessions and len(sessions) > max_sessions:
        sessions = sorted(sessions, key=lambda s: str(s.get("started_at", "")))[-max_sessions:]
    doc["sessions"] = sessions
    by_key = {r.get("key"): r for r in doc["rules"]}
    for rule in rules:
        old = by_key.get(rule["key"])
        if old is None:
            fresh = dict(rule)
            samples = rule.get("samples") or []
            if max_samples and len(samples) > max_samples:
                fresh["samples"] = merge_samples([], samples, max_samples)
            by_key[rule["key"]] = fresh
        else:
            by_key[rule["key"]] = merge_rule(old, rule, max_samples)
    doc["rules"] = sorted(by_key.values(), key=_rule_order)
    return doc


def render_evidence(doc: Mapping[str, Any]) -> str:
    """The evidence file's text: JSON with a 2-space indent and keys in schema order, each
    sample flow on one line (easy to grep, and a third of the size), final newline."""
    shown = dict(doc)
    shown["rules"] = [
        {**rule, "samples": [orjson.Fragment(orjson.dumps(s)) for s in rule.get("samples") or []]}
        for rule in doc.get("rules") or []
    ]
    return orjson.dumps(shown, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE).decode()


def parse_evidence(text: str, where: str) -> dict[str, Any]:
    """Read an evidence document; any other schema version is refused with the fix."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
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
    return doc
