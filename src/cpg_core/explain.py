"""Answer "why is this rule here?" from an evidence document: filters, the JSON record shared
by ``cpg explain --json`` and the MCP ``get_evidence`` tool, and a text view for people."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

import attrs
import orjson

from cpg_core.evidence import ZERO_TIME

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """Seconds in ``90s``, ``30m``, ``1h30m``, ``2d``; ValueError naming the expected form."""
    spec = text.strip().lower()
    parts = _DURATION.findall(spec)
    if not spec or "".join(n + u for n, u in parts) != spec:
        raise ValueError(
            f"{text!r} is not a duration; use a number and a unit, e.g. 90s, 30m, 2h, 1h30m, 7d"
        )
    return sum(float(n) * _UNITS[u] for n, u in parts)


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
    samples_limit: int = 10

    @property
    def wants_l7(self) -> bool:
        return bool(self.http_method or self.http_path or self.dns_pattern)


def parse_peer(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(
            f"{text!r} is not KEY=VALUE; e.g. --peer app=frontend or --peer namespace=shop"
        )
    return key.strip(), value.strip()


def parse_cidr(text: str) -> str:
    try:
        return str(ipaddress.ip_network(text.strip(), strict=False))
    except ValueError:
        raise ValueError(
            f"{text!r} is not a CIDR; e.g. --peer-cidr 10.0.0.0/8 or 2001:db8::/32"
        ) from None


def _peer_matches(peer: Mapping[str, Any], wanted: tuple[str, str]) -> bool:
    key, value = wanted
    kind = peer.get("type")
    if key == "entity":
        return kind == "entity" and peer.get("entity") == value
    if kind != "endpoint":
        return False
    if key in ("namespace", "io.kubernetes.pod.namespace") and peer.get("namespace") == value:
        return True
    return (peer.get("labels") or {}).get(key) == value


def _cidr_matches(peer: Mapping[str, Any], wanted: str) -> bool:
    if peer.get("type") != "cidr":
        return False
    try:
        net = ipaddress.ip_network(str(peer.get("cidr")), strict=False)
        within = ipaddress.ip_network(wanted, strict=False)
    except ValueError:
        return False
    return net.version == within.version and net.subnet_of(within)  # type: ignore[arg-type]


def rule_matches(rule: Mapping[str, Any], f: ExplainFilter) -> bool:
    if f.direction and rule.get("direction") != f.direction:
        return False
    if f.port is not None and str(rule.get("port")) != f.port:
        return False
    peer = rule.get("peer") or {}
    if f.peer is not None and not _peer_matches(peer, f.peer):
        return False
    if f.peer_cidr is not None and not _cidr_matches(peer, f.peer_cidr):
        return False
    if f.since:
        last = str(rule.get("last_seen") or "")
        if last and last != ZERO_TIME and last < f.since:
            return False
    if f.wants_l7:
        l7 = rule.get("l7") or {}
        if not l7:
            return False
        if f.http_method and (
            l7.get("protocol") != "http" or l7.get("http_method") != f.http_method
        ):
            return False
        if f.http_path and (l7.get("protocol") != "http" or l7.get("http_path") != f.http_path):
            return False
        if f.dns_pattern and (
            l7.get("protocol") != "dns" or l7.get("dns_matchname") != f.dns_pattern
        ):
            return False
    return True


def matched_rules(doc: Mapping[str, Any], f: ExplainFilter) -> list[dict[str, Any]]:
    """Rules that pass the filter, in file order, each with at most ``samples_limit`` samples
    (the newest)."""
    out = []
    for rule in doc.get("rules") or []:
        if rule_matches(rule, f):
            shown = dict(rule)
            samples = list(rule.get("samples") or [])
            shown["samples"] = samples[-f.samples_limit :] if f.samples_limit > 0 else []
            out.append(shown)
    return out


def explain_record(doc: Mapping[str, Any], f: ExplainFilter) -> dict[str, Any]:
    """``{"policy", "sessions", "matched_rules"}``: the explain JSON and MCP evidence record."""
    return {
        "policy": doc.get("policy") or {},
        "sessions": list(doc.get("sessions") or []),
        "matched_rules": matched_rules(doc, f),
    }


def render_explain_json(doc: Mapping[str, Any], f: ExplainFilter) -> str:
    """The one rendering of an explain record, shared by ``cpg explain --json`` and MCP."""
    return orjson.dumps(
        explain_record(doc, f), option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
    ).decode()


def describe_peer(peer: Mapping[str, Any]) -> str:
    kind = peer.get("type")
    if kind == "entity":
        return f"entity {peer.get('entity')}"
    if kind == "cidr":
        return str(peer.get("cidr"))
    labels = ",".join(f"{k}={v}" for k, v in sorted((peer.get("labels") or {}).items()))
    namespace = peer.get("namespace")
    return f"{namespace}/{labels}" if namespace else labels or "unknown"


def describe_rule(rule: Mapping[str, Any]) -> str:
    way = "from" if rule.get("direction") == "ingress" else "to"
    traffic = f"{rule.get('protocol')}/{rule.get('port')}"
    if str(rule.get("protocol", "")).startswith("ICMP"):
        traffic = f"{rule.get('protocol')} type {rule.get('port')}"
    text = f"{traffic} {way} {describe_peer(rule.get('peer') or {})}"
    l7 = rule.get("l7") or {}
    if l7.get("protocol") == "http":
        text += f"  HTTP {l7.get('http_method', '')} {l7.get('http_path', '')}"
    elif l7.get("protocol") == "dns":
        text += f"  DNS {l7.get('dns_matchname', '')}"
    return text


def _when(key: str) -> str:
    if not key or key == ZERO_TIME:
        return "never"
    return key.replace("T", " ").rstrip("Z").split(".")[0] + " UTC"


def _side(side: Mapping[str, Any]) -> str:
    name = "/".join(x for x in (side.get("namespace"), side.get("workload")) if x)
    bits = [name or side.get("ip") or "<unknown>"]
    if side.get("pod"):
        bits.append(f"({side['pod']})")
    if name and side.get("ip"):
        bits.append(str(side["ip"]))
    return " ".join(bits)


Line = tuple[str, str]
"""(style, text): style is "" (plain), "title", "rule", "dim" or "warn"; the CLI decides how
(or whether) to colour it."""


def explain_lines(doc: Mapping[str, Any], f: ExplainFilter, where: str = "") -> list[Line]:
    policy = doc.get("policy") or {}
    lines: list[Line] = [
        (
            "title",
            f"Policy {policy.get('name')} in namespace {policy.get('namespace')} "
            f"(workload {policy.get('workload')})",
        ),
    ]
    sessions = doc.get("sessions") or []
    if sessions:
        last = sessions[-1]
        source = last.get("source") or {}
        origin = source.get("file") or source.get("server") or source.get("type", "")
        lines.append(
            (
                "dim",
                f"Latest session {last.get('id')}: {source.get('type', '?')} of {origin}, "
                f"{last.get('flows_ingested', 0)} flows; {len(sessions)} session(s) kept",
            )
        )
    if where:
        lines.append(("dim", f"Evidence: {where}"))
    rules = matched_rules(doc, f)
    lines.append(("", ""))
    if not rules:
        lines.append(("warn", "No rule matches these filters. Available rules:"))
        for rule in doc.get("rules") or []:
            lines.append(("", f"  {rule.get('direction')}  {describe_rule(rule)}"))
        return lines
    for rule in rules:
        lines.append(
            ("rule", f"{str(rule.get('direction', '')).capitalize()}  {describe_rule(rule)}")
        )
        classes = rule.get("classes") or {}
        kinds = ", ".join(f"{k} {v}" for k, v in classes.items())
        lines.append(
            ("", f"  flows:      {rule.get('flow_count', 0)}" + (f" ({kinds})" if kinds else ""))
        )
        lines.append(("", f"  first seen: {_when(str(rule.get('first_seen', '')))}"))
        lines.append(("", f"  last seen:  {_when(str(rule.get('last_seen', '')))}"))
        lines.append(("dim", f"  key:        {rule.get('key')}"))
        samples = rule.get("samples") or []
        if samples:
            lines.append(("", f"  newest {len(samples)} sample(s):"))
            for s in samples:
                reason = s.get("drop_reason", "")
                node = f"  on {s['node']}" if s.get("node") else ""
                lines.append(
                    (
                        "",
                        f"    {_when(str(s.get('time', '')))}  {_side(s.get('src') or {})} → "
                        f"{_side(s.get('dst') or {})}  {s.get('protocol')}/{s.get('port')}  "
                        f"{s.get('verdict', '')} {reason}{node}",
                    )
                )
        lines.append(("", ""))
    return lines
