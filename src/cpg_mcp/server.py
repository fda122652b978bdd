"""The ``cpg-mcp`` tools. Query tools only read the session's files; nothing writes to a
cluster; every string returned is stripped of control characters."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import anyio
import yaml
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from cpg_core.aggregate import AggregateOptions
from cpg_core.bootstrap import render_bootstrap
from cpg_core.cilium_version import below_floor, format_version, minimum_version, versions_seen
from cpg_core.decide import DecideOptions
from cpg_core.dropped_view import (
    DroppedFlowFilter,
    aggregate_rows,
    compose,
    flow_samples,
)
from cpg_core.dropreasons import parse_reason_name
from cpg_core.evidence import EvidenceError, parse_evidence
from cpg_core.explain import ExplainFilter, explain_record, parse_cidr, parse_peer
from cpg_core.names import is_dns1123_label, path_component_problem
from cpg_core.triage import capped_breakdowns
from cpg_io.evidence_store import EvidenceStore
from cpg_io.hubble import TLSSettings
from cpg_io.version import cpg_version
from cpg_mcp import paging
from cpg_mcp.audit import AuditLog
from cpg_mcp.guard import GuardedServer
from cpg_mcp.sanitize import clean
from cpg_mcp.sessions import Session, SessionError, SessionManager

log = logging.getLogger("cpg.mcp")

QUERY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
SESSION_ID = Annotated[str, Field(description="the opaque session_id returned by start_session")]
PROTOCOLS = ("icmpv4", "icmpv6", "sctp", "tcp", "udp")
CURSOR = Annotated[
    str | None, Field(description="opaque pagination token from a previous call's next_cursor")
]
DROPPED_FLOWS_CAPTURING = (
    "aggregates are finalized only after stop_session; call stop_session first "
    "(samples above are already live)"
)
_threads = anyio.CapacityLimiter(4)
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built with it


T = TypeVar("T")


async def offload(fn: Callable[[], T]) -> T:
    """Run file-reading work in a thread the call's deadline can abandon."""
    return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True, limiter=_threads)


class StartResult(BaseModel):
    session_id: str
    discarded_session: str | None = None
    server: str


class StatusResult(BaseModel):
    session_id: str
    state: Literal["capturing", "stopped"]
    elapsed: str
    policy_file_count: int
    evidence_file_count: int
    tmp_dir: str
    error: str | None = None


class StopResult(BaseModel):
    session_id: str
    state: Literal["stopped"] = "stopped"
    error: str | None = None
    already_stopped: bool
    duration: str
    flows_seen: int
    policies_written: int
    policies_skipped: int
    policies_failed: int
    lost_events: int
    l7_record_count: int
    audit_verdict_count: int
    infra_drop_total: int
    infra_drops_by_reason: dict[str, int]
    cluster_health_path: str
    tmp_dir: str


class PolicyRow(BaseModel):
    namespace: str
    workload: str
    name: str
    directions: list[str]
    ingress_rule_count: int
    egress_rule_count: int
    path: str


class PolicyList(BaseModel):
    policies: list[PolicyRow]
    total_count: int
    has_more: bool
    next_cursor: str | None = None


class Endpoint(BaseModel):
    namespace: str | None = None
    workload: str | None = None
    pod: str | None = None
    ip: str | None = None


class DroppedFlowSample(BaseModel):
    namespace: str
    workload: str
    direction: str
    peer: dict[str, Any]
    port: str
    protocol: str
    time: str
    src: Endpoint
    dst: Endpoint
    verdict: str
    drop_reason: str | None = None


class Aggregates(BaseModel):
    available_after_stop: bool | None = None
    message: str | None = None
    rows: list[dict[str, Any]] | None = Field(
        default=None,
        description="per-(namespace, workload, reason) infra/transient counts; absent while "
        "capturing or when no row on this page matches",
    )


class DroppedFlows(BaseModel):
    samples: list[DroppedFlowSample]
    aggregates: Aggregates
    total_count: int = Field(
        description="items (samples + aggregate rows) in this filtered view across all pages; "
        "not a flow total (see stop_session flows_seen)"
    )
    has_more: bool
    next_cursor: str | None = None


class PolicyResult(BaseModel):
    namespace: str
    workload: str
    name: str
    yaml: str
    path: str
    ingress_rule_count: int
    egress_rule_count: int


class EvidenceResult(BaseModel):
    policy: dict[str, Any]
    sessions: list[dict[str, Any]]
    matched_rules: list[dict[str, Any]]
    total_count: int
    has_more: bool
    next_cursor: str | None = None


class HealthResult(BaseModel):
    available_after_stop: bool | None = None
    message: str | None = None
    no_drops: bool | None = None
    report: dict[str, Any] | None = None
    truncated: bool | None = Field(
        default=None,
        description="true when a by_node/by_workload breakdown was capped at 100 entries "
        "(highest counts kept; each count stays the true total)",
    )


class BootstrapResult(BaseModel):
    namespace: str
    yaml: str = Field(description="the full CiliumNetworkPolicy YAML document")
    cluster_version: str | None = Field(
        default=None, description="the oldest Cilium agent version in the cluster"
    )
    version_source: Literal["pod-images", "undetermined"] = "undetermined"
    cilium_versions_seen: dict[str, int] | None = None
    version_warning: str | None = None


async def _agent_images() -> list[str]:
    """Cilium agent images from the environment's kubeconfig; [] when that fails in any way
    (no kubeconfig, no access, too slow): the version is then undetermined."""
    from cpg_io.kube import api_client, cilium_agent_images

    def detect() -> list[str]:
        return cilium_agent_images(api_client(None, None, timeout=3.0), 3.0)

    try:
        with anyio.fail_after(3.5):
            return await offload(detect)
    except Exception as exc:
        log.info("Cilium version undetermined: %s", exc)
        return []


def _duration(seconds: float) -> str:
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "") + f"{secs}s"


def _component(value: str, what: str) -> str:
    problem = path_component_problem(value)
    if problem is not None or (what == "namespace" and not is_dns1123_label(value)):
        raise ToolError(f"{what} {value!r} is not valid: {problem or 'not a DNS-1123 label'}")
    return value


def _seconds(value: str | None, default: float, what: str) -> float:
    from cpg_core.explain import parse_duration

    if not value:
        return default
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise ToolError(f"{what}: {exc}") from None
    if seconds <= 0 or seconds > 86400:
        raise ToolError(f"{what} must be more than 0 and at most 24h, got {value!r}")
    return seconds


def build_server(
    allow_replay_dir: Path | None = None,
    *,
    tool_timeout: float = 30.0,
    audit: AuditLog | None = None,
) -> MCPServer:
    manager = SessionManager(allow_replay_dir)

    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[SessionManager]:
        try:
            yield manager
        finally:
            with anyio.CancelScope(shield=True):  # shutting down must not cancel the cleanup
                await manager.close()

    mcp = GuardedServer(
        "cpg-mcp",
        tool_timeout=tool_timeout,
        audit=audit,
        version=cpg_version(),
        instructions=(
            "cpg turns Hubble flow denials into least-privilege CiliumNetworkPolicies. Start one "
            "session (a live capture, or a replay of an allowed capture file), poll get_status, "
            "read list_policies/get_policy/get_evidence, stop_session, then get_cluster_health. "
            "Nothing here writes to a cluster; applying policies is a human's job."
        ),
        lifespan=lifespan,
    )

    def session_of(session_id: str) -> Session:
        try:
            return manager.get(session_id)
        except SessionError as exc:
            raise ToolError(str(exc)) from None

    @mcp.tool(
        title="Start a capture session",
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=True,
        ),
    )
    async def start_session(
        namespace: Annotated[
            list[str] | None, Field(description="only flows from or to pods in these namespaces")
        ] = None,
        all_namespaces: Annotated[
            bool, Field(description="observe all namespaces (the default)")
        ] = False,
        l7: Annotated[bool, Field(description="HTTP and DNS rules from L7 records")] = False,
        include_audit: Annotated[
            bool, Field(description="also turn AUDIT-verdict flows into rules")
        ] = False,
        ignore_drop_reasons: Annotated[
            list[str] | None, Field(description="skip drops with these DropReason names")
        ] = None,
        ignore_protocols: Annotated[
            list[str] | None,
            Field(description="skip flows of these protocols: tcp, udp, sctp, icmpv4, icmpv6"),
        ] = None,
        server: Annotated[
            str | None,
            Field(
                description="explicit Hubble Relay host:port; without it cpg port-forwards to "
                "the hubble-relay pod in kube-system through the kubeconfig of its environment"
            ),
        ] = None,
        tls: Annotated[bool, Field(description="connect with TLS")] = False,
        timeout: Annotated[str | None, Field(description="connect timeout, e.g. 10s")] = None,
        flush_interval: Annotated[
            str | None, Field(description="how often files are written, e.g. 5s")
        ] = None,
        cluster_dedup: Annotated[
            bool,
            Field(
                description="skip policies already applied in the cluster (lists "
                "CiliumNetworkPolicies with the environment's kubeconfig)"
            ),
        ] = False,
        replay_file: Annotated[
            str | None,
            Field(
                description="a capture file inside the folder the operator allowed with --allow-replay-dir (instead of a live capture)"
            ),
        ] = None,
    ) -> StartResult:
        """Start a capture session and return at once with its opaque session_id; the capture runs
        in the background. One session at a time: stop_session before starting another (a stopped
        session is discarded). Poll get_status."""
        namespaces = list(namespace or [])
        if namespaces and all_namespaces:
            raise ToolError("namespace and all_namespaces are mutually exclusive")
        for ns in namespaces:
            _component(ns, "namespace")
        protocols = [p.lower() for p in ignore_protocols or []]
        for proto in protocols:
            if proto not in PROTOCOLS:
                raise ToolError(
                    f"unknown protocol {proto!r}: valid values are {', '.join(PROTOCOLS)}"
                )
        reasons = []
        for name in ignore_drop_reasons or []:
            try:
                reasons.append(parse_reason_name(name))
            except ValueError as exc:
                raise ToolError(str(exc)) from None
        connect = _seconds(timeout, 10.0, "timeout")
        interval = _seconds(flush_interval, 5.0, "flush_interval")
        if replay_file is not None and (server or tls or cluster_dedup):
            raise ToolError(
                "replay_file reads a capture file: leave server, tls and cluster_dedup out"
            )
        options = AggregateOptions(
            decide=DecideOptions(
                include_audit=include_audit,
                ignore_protocols=frozenset(protocols),
                ignore_reasons=frozenset(reasons),
            ),
            namespaces=frozenset(namespaces),
            l7=l7,
        )
        live = {
            "server": server or "",
            "namespaces": tuple(namespaces),
            "tls": TLSSettings(enabled=tls),
            "timeout": connect,
            "flush_interval": interval,
        }
        try:
            session, discarded = await manager.start(
                options, replay_file=replay_file, live=live, cluster_dedup=cluster_dedup
            )
        except SessionError as exc:
            raise ToolError(str(exc)) from None
        return StartResult(
            session_id=session.id, discarded_session=discarded, server=clean(session.source)
        )

    @mcp.tool(
        title="Session status",
        annotations=ToolAnnotations(
            read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    async def get_status(session_id: SESSION_ID) -> StatusResult:
        """Coarse session state (capturing/stopped), elapsed time and file counts. Works for a
        stopped session too."""
        s = session_of(session_id)
        return StatusResult(
            session_id=s.id,
            state=s.state,
            elapsed=_duration(s.elapsed()),
            policy_file_count=await offload(lambda: len(list(s.policies.glob("*/*.yaml")))),
            evidence_file_count=await offload(
                lambda: len(list(s.evidence_root.glob("*/*/*.json")))
            ),
            tmp_dir=str(s.tmp),
            error=clean(s.error) or None,
        )

    @mcp.tool(
        title="Stop the session",
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )
    async def stop_session(session_id: SESSION_ID) -> StopResult:
        """Stop the capture (final flush, cluster-health.json) and return the summary. Idempotent:
        a second stop returns the same summary with already_stopped. Files stay queryable until
        the next start_session."""
        s = session_of(session_id)
        already = s.stop_calls > 0
        await manager.stop(session_id)
        result = s.result
        agg = result.aggregator if result else None
        written = result.count("created") + result.count("updated") if result else 0
        by_reason = {
            str(d.get("reason")): int(d.get("count", 0))
            for d in ((result.health or {}).get("drops") or [] if result else [])
        }
        health = (
            result.health_path
            if result and result.health_path
            else next(
                iter(s.evidence_root.glob("*/cluster-health.json")),
                s.evidence_root / "cluster-health.json",
            )
        )
        return StopResult(
            session_id=s.id,
            error=clean(s.error) or None,
            already_stopped=already,
            duration=_duration(s.elapsed()),
            flows_seen=agg.total_flows if agg else 0,
            policies_written=written,
            policies_skipped=result.count("unchanged") if result else 0,
            policies_failed=len(result.failed) if result else 0,
            lost_events=result.stats.lost_events if result else 0,
            l7_record_count=agg.l7_records if agg else 0,
            audit_verdict_count=agg.audit_flows if agg else 0,
            infra_drop_total=agg.infra_drops if agg else 0,
            infra_drops_by_reason=by_reason,
            cluster_health_path=str(health),
            tmp_dir=str(s.tmp),
        )

    def _health_of(s: Session) -> dict[str, Any] | None:
        if s.result is not None and s.result.health is not None:
            return s.result.health
        for path in sorted(s.evidence_root.glob("*/cluster-health.json")):
            try:
                doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ToolError(f"parsing cluster health {path}: {exc}") from None
            return doc
        return None

    def _all_samples(s: Session) -> list[dict[str, Any]]:
        samples: list[dict[str, Any]] = []
        for base in sorted(p for p in s.evidence_root.glob("*") if p.is_dir()):
            for ns_dir in sorted(p for p in base.iterdir() if p.is_dir()):
                for path in sorted(ns_dir.glob("*.json")):
                    try:
                        doc = parse_evidence(path.read_text(encoding="utf-8"), str(path))
                    except (OSError, EvidenceError) as exc:
                        log.warning("skipping %s: %s", path, exc)
                        continue
                    samples += flow_samples(ns_dir.name, path.stem, doc)
        return samples

    @mcp.tool(title="Dropped flows: samples and counts", annotations=QUERY)
    async def list_dropped_flows(
        session_id: SESSION_ID,
        namespace: Annotated[
            str | None,
            Field(description="filter: namespace (applies to both samples and aggregates)"),
        ] = None,
        workload: Annotated[
            str | None,
            Field(description="filter: workload (applies to both samples and aggregates)"),
        ] = None,
        dropclass: Annotated[
            Literal["policy", "infra", "transient", "noise", "unknown"] | None,
            Field(
                description="filter: policy-actionable vs infra/transient/noise/unknown; "
                "policy and unknown only match samples, infra and transient only aggregates"
            ),
        ] = None,
        direction: Annotated[
            Literal["ingress", "egress"] | None,
            Field(description="filter: ingress or egress (samples only; aggregates have none)"),
        ] = None,
        limit: Annotated[
            int, Field(ge=1, le=200, description="max rows per page, samples and aggregates")
        ] = 50,
        cursor: CURSOR = None,
    ) -> DroppedFlows:
        """Dropped flows as a sampled/aggregated view, not a raw flow log. `samples` are the
        stored flows behind each rule (the drops a policy fixes; at most 10 newest per rule,
        served live). `aggregates.rows` count infrastructure and transient drops per namespace,
        workload and reason (drops no policy fixes; available after stop_session). Noise is
        never listed. Filters AND-combine; pagination covers both sections; total_count counts
        view items, not flows."""
        s = session_of(session_id)
        if namespace is not None:
            _component(namespace, "namespace")
        if workload is not None:
            _component(workload, "workload")
        stopped = s.state == "stopped"
        paging.decode(cursor)

        def read() -> DroppedFlows:
            rows = aggregate_rows(_health_of(s) or {}) if stopped else []
            flt = DroppedFlowFilter(namespace, workload, dropclass, direction)
            items = compose(_all_samples(s), rows, flt)
            chunk, meta = paging.page(items, cursor, limit)
            page_rows = [row for kind, row in chunk if kind == "aggregate"]
            aggregates: dict[str, Any] = (
                ({"rows": page_rows} if page_rows else {})
                if stopped
                else {"available_after_stop": True, "message": DROPPED_FLOWS_CAPTURING}
            )
            return DroppedFlows.model_validate(
                clean(
                    {
                        "samples": [row for kind, row in chunk if kind == "sample"],
                        "aggregates": aggregates,
                        **meta,
                    }
                )
            )

        return await offload(read)

    def _policy_row(path: Path) -> PolicyRow:
        doc = yaml.load(path.read_text(), Loader=_YAML_LOADER)
        spec = doc.get("spec") or {}
        return PolicyRow(
            namespace=path.parent.name,
            workload=path.stem,
            name=str((doc.get("metadata") or {}).get("name", "")),
            directions=[d for d in ("ingress", "egress") if spec.get(d)],
            ingress_rule_count=len(spec.get("ingress") or []),
            egress_rule_count=len(spec.get("egress") or []),
            path=str(path),
        )

    @mcp.tool(title="List generated policies", annotations=QUERY)
    async def list_policies(
        session_id: SESSION_ID,
        limit: Annotated[int, Field(ge=1, le=200, description="max policies per page")] = 50,
        cursor: CURSOR = None,
    ) -> PolicyList:
        """The policies this session generated: namespace, workload, name, directions, rule
        counts and path. Paginated."""
        s = session_of(session_id)
        paging.decode(cursor)  # a garbage cursor is an error even with no policy yet

        def read() -> PolicyList:
            paths = sorted(s.policies.glob("*/*.yaml"))
            chunk, meta = paging.page(paths, cursor, limit)
            rows = []
            for path in chunk:
                try:
                    rows.append(_policy_row(path))
                except (OSError, yaml.YAMLError) as exc:
                    log.warning("skipping %s: %s", path, exc)
            return PolicyList.model_validate(
                clean({"policies": [r.model_dump() for r in rows], **meta})
            )

        return await offload(read)

    @mcp.tool(title="Get one policy", annotations=QUERY)
    async def get_policy(
        session_id: SESSION_ID,
        namespace: Annotated[
            str, Field(description="the policy's namespace, as returned by list_policies")
        ],
        workload: Annotated[
            str, Field(description="the policy's workload, as returned by list_policies")
        ],
    ) -> PolicyResult:
        """The full YAML of one generated policy and its rule counts."""
        s = session_of(session_id)
        path = (
            s.policies
            / _component(namespace, "namespace")
            / (_component(workload, "workload") + ".yaml")
        )
        try:
            text = await offload(path.read_text)
        except FileNotFoundError:
            raise ToolError(
                f"no policy for {namespace}/{workload}; call list_policies to see what exists"
            ) from None
        row = await offload(functools.partial(_policy_row, path))
        return PolicyResult(
            namespace=namespace,
            workload=workload,
            name=clean(row.name),
            yaml=clean(text, keep_newlines=True),
            path=str(path),
            ingress_rule_count=row.ingress_rule_count,
            egress_rule_count=row.egress_rule_count,
        )

    @mcp.tool(title="Evidence behind a policy's rules", annotations=QUERY)
    async def get_evidence(
        session_id: SESSION_ID,
        namespace: Annotated[
            str, Field(description="the policy's namespace, as returned by list_policies")
        ],
        workload: Annotated[
            str, Field(description="the policy's workload, as returned by list_policies")
        ],
        direction: Annotated[
            Literal["ingress", "egress"] | None, Field(description="filter: ingress or egress")
        ] = None,
        port: Annotated[str | None, Field(description="filter: rules for this port")] = None,
        peer: Annotated[
            str | None, Field(description="filter: endpoint peer label KEY=VALUE")
        ] = None,
        peer_cidr: Annotated[
            str | None, Field(description="filter: CIDR peers inside this CIDR")
        ] = None,
        http_method: Annotated[str | None, Field(description="filter: HTTP method")] = None,
        http_path: Annotated[
            str | None, Field(description="filter: HTTP path regex, exactly")
        ] = None,
        dns_pattern: Annotated[str | None, Field(description="filter: DNS name")] = None,
        limit: Annotated[int, Field(ge=1, le=100, description="max rules per page")] = 20,
        cursor: CURSOR = None,
    ) -> EvidenceResult:
        """Per-rule flow evidence for one policy, records exactly as `cpg explain --json` gives
        them. Filters AND-narrow the rules; pagination applies to matched rules."""
        s = session_of(session_id)
        ns, wl = _component(namespace, "namespace"), _component(workload, "workload")
        try:
            doc = await offload(
                functools.partial(EvidenceStore(s.evidence_root, s.policies).read, ns, wl)
            )
        except EvidenceError as exc:
            raise ToolError(str(exc)) from None
        if doc is None:
            raise ToolError(
                f"no evidence for {ns}/{wl}; call list_policies to see available targets"
            )
        try:
            flt = ExplainFilter(
                direction=direction,
                port=port,
                peer=parse_peer(peer) if peer else None,
                peer_cidr=parse_cidr(peer_cidr) if peer_cidr else None,
                http_method=http_method.strip().upper() if http_method else None,
                http_path=http_path,
                dns_pattern=dns_pattern.strip().rstrip(".") if dns_pattern else None,
            )
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        record = explain_record(doc, flt)
        rules, meta = paging.page(record["matched_rules"], cursor, limit)
        return EvidenceResult.model_validate(clean({**record, "matched_rules": rules, **meta}))

    @mcp.tool(title="Cluster health of the session", annotations=QUERY)
    async def get_cluster_health(session_id: SESSION_ID) -> HealthResult:
        """Infrastructure and transient drops (by reason, node and workload, with fix links) and
        findings, once the session has stopped. No report after stop means no such drops."""
        s = session_of(session_id)
        if s.state == "capturing":
            return HealthResult(
                available_after_stop=True,
                message="cluster health is finalized only after stop_session; call stop_session "
                "first",
            )
        report = await offload(functools.partial(_health_of, s))
        if report is None and s.error:
            raise ToolError(
                clean(
                    "cluster health unavailable: session ended with error before any drop was "
                    f"recorded: {s.error}"
                )
            )
        if not report or not (report.get("drops") or report.get("findings")):
            return HealthResult(
                no_drops=True, message="no infra/transient drops observed this session"
            )
        capped, truncated = capped_breakdowns(report)
        return HealthResult(report=clean(capped), truncated=truncated or None)

    @mcp.tool(title="Default-deny policy for a namespace", annotations=QUERY)
    async def get_bootstrap_policy(
        namespace: Annotated[str, Field(description="target namespace (required)")],
    ) -> BootstrapResult:
        """A namespaced default-deny CiliumNetworkPolicy as YAML (enableDefaultDeny both ways,
        ingress and egress as [{}]), the first step of onboarding a namespace. Detects the
        cluster's Cilium version from the environment's kubeconfig (3 s at most); refuses below
        1.16, where the field would be pruned, and proceeds with a warning when undetermined."""
        if not namespace:
            raise ToolError("namespace is required")
        try:
            text = render_bootstrap(namespace)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        images = await _agent_images()
        version = minimum_version(images)
        if version is None:
            return BootstrapResult(
                namespace=namespace,
                yaml=text,
                version_warning="Cilium version undetermined; enableDefaultDeny requires "
                ">= 1.16 — proceeding",
            )
        below = below_floor(version, ["enableDefaultDeny"])
        if below:
            raise ToolError(
                f"cluster Cilium version {format_version(version)} is below the "
                "enableDefaultDeny floor (>= 1.16.0 required); refusing to generate a bootstrap "
                "artifact that would be silently pruned by the CRD schema on this cluster"
            )
        return BootstrapResult(
            namespace=namespace,
            yaml=text,
            cluster_version=format_version(version),
            version_source="pod-images",
            cilium_versions_seen=versions_seen(images),
        )

    return mcp
