"""``cpg verify``: check a set of policies against the flows of a capture."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml

from cpg_core.decide import DecideOptions, Decision, decide
from cpg_core.flow import Endpoint, Flow
from cpg_core.matcher import MatchResult, dns_names, match_flow
from cpg_core.parse import FlowParser
from cpg_core.synthesis import Resolved, Resolver, endpoint_kind, endpoint_name
from cpg_io.sources import ReadStats, open_flow_stream, read_records


class PolicyLoadError(Exception):
    """A policy file could not be read; the message names it."""


def load_policies(folder: Path) -> list[dict[str, Any]]:
    """Every CiliumNetworkPolicy document in the YAML files under ``folder``."""
    if not folder.is_dir():
        raise PolicyLoadError(
            f"{folder}: not a folder of policies; pass the --output-dir of cpg replay"
        )
    policies = []
    for path in sorted([*folder.rglob("*.yaml"), *folder.rglob("*.yml")]):
        try:
            docs = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise PolicyLoadError(f"{path}: cannot read it as YAML ({exc})") from None
        policies += [
            d for d in docs if isinstance(d, dict) and d.get("kind") == "CiliumNetworkPolicy"
        ]
    return policies


@attrs.define
class Check:
    """One distinct kind of flow, how often it occurred, and the verdict on it."""

    kind: str  # "candidate" or "explicit_deny"
    subject: str
    count: int
    result: MatchResult


@attrs.define
class VerifyResult:
    stats: ReadStats
    checks: list[Check] = attrs.Factory(list)
    unexpressible: int = 0
    """Candidates no rule can express (unselectable…): reported by replay, not checked."""

    def total(self, kind: str) -> int:
        return sum(c.count for c in self.checks if c.kind == kind)

    def allowed(self, kind: str) -> int:
        return sum(c.count for c in self.checks if c.kind == kind and c.result.allowed)

    @property
    def passed(self) -> bool:
        return (
            self.allowed("candidate") == self.total("candidate")
            and self.allowed("explicit_deny") == 0
        )


def _key(flow: Flow) -> tuple[object, ...]:
    l7 = flow.l7
    return (
        flow.direction,
        flow.source,
        flow.destination,
        flow.protocol,
        flow.port,
        flow.source_ip if flow.direction == 1 else flow.destination_ip,
        flow.source_names,
        flow.destination_names,
        (l7.http.method, l7.http.url) if l7 is not None and l7.http is not None else None,
        l7.dns.query if l7 is not None and l7.dns is not None else None,
    )


def _subject(flow: Flow) -> str:
    """``ingress src → dst PROTO/port``, naming a world peer by its IP."""

    def name(endpoint: Endpoint, ip: str) -> str:
        return ip if ip and endpoint_kind(endpoint).world else endpoint_name(endpoint)

    way = {1: "ingress", 2: "egress"}.get(flow.direction, "?")
    traffic = f"{flow.protocol}/{flow.port}" if flow.protocol else "no-L4"
    return (
        f"{way:<7} {name(flow.source, flow.source_ip)} → "
        f"{name(flow.destination, flow.destination_ip)} {traffic}"
    )


def verify_flows(
    flows: Iterable[Flow], policies: Sequence[Mapping[str, Any]], options: DecideOptions
) -> tuple[list[Check], int]:
    """Checks for every candidate that cpg can express and every explicit-deny flow."""
    resolver = Resolver()
    seen: dict[tuple[object, ...], tuple[str, Flow, list[int]]] = {}
    kept: list[Flow] = []
    unexpressible = 0
    for flow in flows:
        if flow.l7 is not None and flow.l7.dns is not None:
            kept.append(flow)  # for IP -> name, whatever its verdict
        decision = decide(flow, options)
        if decision is Decision.CANDIDATE:
            if not isinstance(resolver.resolve(flow), Resolved):
                unexpressible += 1
                continue
            kind = "candidate"
        elif decision is Decision.EXPLICIT_DENY:
            kind = "explicit_deny"
        else:
            continue
        entry = seen.setdefault((kind, *_key(flow)), (kind, flow, [0]))
        entry[2][0] += 1
    names = dns_names(kept)
    checks = [
        Check(kind, _subject(flow), counter[0], match_flow(policies, flow, names))
        for kind, flow, counter in seen.values()
    ]
    checks.sort(key=lambda c: (c.kind, c.result.allowed, c.subject))
    return checks, unexpressible


def verify_capture(
    source: str, policies: Sequence[Mapping[str, Any]], options: DecideOptions
) -> VerifyResult:
    stats = ReadStats()
    with open_flow_stream(source) as stream:
        checks, unexpressible = verify_flows(
            read_records(stream, stats, FlowParser()), policies, options
        )
    return VerifyResult(stats=stats, checks=checks, unexpressible=unexpressible)


def summary_line(result: VerifyResult) -> str:
    line = (
        f"{result.allowed('candidate')}/{result.total('candidate')} candidate flows admitted, "
        f"{result.allowed('explicit_deny')}/{result.total('explicit_deny')} explicit-deny flows admitted"
    )
    if result.unexpressible:
        line += f" ({result.unexpressible} candidates no rule can express were not checked)"
    return line


def verify_json(result: VerifyResult) -> dict[str, Any]:
    return {
        "candidates": {"total": result.total("candidate"), "admitted": result.allowed("candidate")},
        "explicit_deny": {
            "total": result.total("explicit_deny"),
            "admitted": result.allowed("explicit_deny"),
        },
        "unexpressible": result.unexpressible,
        "passed": result.passed,
        "checks": [
            {
                "kind": c.kind,
                "traffic": c.subject,
                "flows": c.count,
                "allowed": c.result.allowed,
                "reason": c.result.reason,
            }
            for c in result.checks
        ],
    }
