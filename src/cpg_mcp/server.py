"""Registers the cpg-mcp tools (``cpg_mcp.tools``) with their argument schemas, titles and
annotations. Each registration only declares the interface and hands the call to a plain
function, in a thread the call's deadline can abandon."""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from cpg_core.options import OPTIONS, Option, Request, option
from cpg_io.version import cpg_version
from cpg_mcp import handshake, models, tools, workers
from cpg_mcp.audit import AuditLog
from cpg_mcp.guard import GuardedServer
from cpg_mcp.sessions import SessionManager

log = logging.getLogger("cpg.mcp")

QUERY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
SESSION_ID = Annotated[str, Field(description="the opaque session_id returned by start_session")]
POLICY_NAMESPACE = Annotated[
    str, Field(description="the policy's namespace, as returned by list_policies")
]
POLICY_WORKLOAD = Annotated[
    str, Field(description="the policy's workload, as returned by list_policies")
]
CURSOR = Annotated[
    str | None, Field(description="opaque pagination token from a previous call's next_cursor")
]
_LIGHT = anyio.CapacityLimiter(4)
"""Threads for the tools that answer from memory or a few files."""
_HEAVY = anyio.CapacityLimiter(2)
"""Threads for the tools that read a whole capture or folder (each waits on a worker process,
``cpg_mcp.workers``, or reads file by file): they never hold up the cheap ones."""

T = TypeVar("T")

ANSWER_SHARE = 0.5
"""Of a call's deadline, the share explain_flow spends answering (reading the capture
included) before it returns the answers it has, the most frequent kinds of flow first."""


async def offload(fn: Callable[..., T], *args: Any, heavy: bool = False, **kwargs: Any) -> T:
    """Run file-reading work in a thread of its lane (``heavy``: a whole capture or folder).
    When the call's deadline expires the call answers at once and the thread is told to stop
    (``tools.checkpoint``; a worker process is killed), so it frees its slot within one file
    read or 20 ms instead of running on."""
    cancel = threading.Event()
    token = tools.CANCEL.set(cancel)  # the worker thread runs in a copy of this context
    try:
        return await anyio.to_thread.run_sync(
            functools.partial(_counted, fn, *args, **kwargs),
            abandon_on_cancel=True,
            limiter=_HEAVY if heavy else _LIGHT,
        )
    except anyio.get_cancelled_exc_class():
        cancel.set()
        raise
    finally:
        tools.CANCEL.reset(token)


class _Running:
    """How many offloaded functions are still executing (abandoned ones included)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def add(self, delta: int) -> None:
        with self._lock:
            self.count += delta


RUNNING = _Running()


def _counted(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    RUNNING.add(1)
    try:
        return fn(*args, **kwargs)
    finally:
        RUNNING.add(-1)


def _arguments(values: dict[str, Any], tool: Callable[..., Any]) -> dict[str, Any]:
    """A tool's arguments, taken from its ``locals()`` at entry (closure names left out)."""
    names = inspect.signature(tool).parameters
    return {name: value for name, value in values.items() if name in names}


_TOOL_KINDS: dict[str, Any] = {
    "flag": bool,
    "int": int,
    "int?": int | None,
    "float": float,
    "text": str,
    "text?": str | None,
    "texts": list[str] | None,
    "path?": str | None,
}
"""The argument type of each kind of option value (a file is a path on the server's host)."""


def _table_field(request: Request, name: str) -> Any:
    """The words and bounds of one option of the table (cpg_core's OPTIONS), for a tool
    argument (the tool spells its type)."""
    return _field(option(request, name))


def _field(entry: Option) -> Any:
    bounds: dict[str, Any] = {}
    if entry.minimum is not None:
        bounds["ge"] = entry.minimum
    if entry.maximum is not None:
        bounds["le"] = entry.maximum
    return Field(description=entry.tool_help, **bounds)


def _argument_type(entry: Option) -> Any:
    kind = entry.tool_value if entry.tool_value is not None else _TOOL_KINDS[entry.value]
    return Annotated[kind, _field(entry)]


def _tool_argument(entry: Option) -> inspect.Parameter:
    """The tool argument of one option of the table (cpg_core's OPTIONS)."""
    default = entry.tool_default if entry.tool_default is not None else entry.default
    if entry.value == "texts":
        default = None
    return inspect.Parameter(
        entry.tool,
        inspect.Parameter.KEYWORD_ONLY,
        default=default,
        annotation=_argument_type(entry),
    )


def _with_run_arguments(tool: Callable[..., Any]) -> Callable[..., Any]:
    """Give a tool the run and relay options cpg-mcp offers, from the one table. The tool
    declares ``arguments: dict[str, Any]`` instead and gets them by the request builders'
    names, to be checked exactly as the CLI's flags are."""
    entries = [o for o in OPTIONS if o.tool and o.request in ("run", "relay")]
    signature = inspect.signature(tool, eval_str=True)
    own = [
        p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
        for p in signature.parameters.values()
        if p.name != "arguments"
    ]
    params = [*(_tool_argument(entry) for entry in entries), *own]

    @functools.wraps(tool)
    async def run(**given: Any) -> Any:
        arguments = {entry.name: given.pop(entry.tool) for entry in entries}
        return await tool(**given, arguments=arguments)

    run.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params}
    run.__annotations__["return"] = signature.return_annotation
    return run


async def _agent_images(kube_dir: Path, timeout: float) -> list[str]:
    """Cilium agent images from the environment's kubeconfig; [] when that fails in any way
    (no kubeconfig, no access, slower than ``timeout`` seconds): the version is then
    undetermined."""
    from cpg_io.kube import api_client, cilium_agent_images

    def detect() -> list[str]:
        api = api_client(None, None, timeout=timeout, temp_dir=kube_dir)
        return cilium_agent_images(api, timeout)

    try:
        with anyio.fail_after(timeout + 0.5):
            return await offload(detect)
    except Exception as exc:
        log.info("Cilium version undetermined: %s", exc)
        return []


_ReplayFile = Annotated[
    str | None,
    Field(
        description="a capture file inside the folder the operator allowed with --allow-replay-dir (instead of a live capture)"
    ),
]


_ShadowPolicies = Annotated[
    str | None,
    Field(
        description="a folder of proposed policies inside the folder the operator allowed with "
        "--allow-replay-dir: the live session judges them on every flow (cpg shadow) instead "
        "of generating policies; get_plan returns what would break so far"
    ),
]


_HostFirewall = Annotated[
    bool | None,
    Field(
        description="the agents run Cilium's host firewall (enable-host-firewall): host policies "
        "(a clusterwide policy's nodeSelector) police the node in the session's checks "
        "(explain_flow, trace_flow, get_plan); null: as the cluster's cilium-config says when a "
        "check reads the cluster, else off (Cilium's default)"
    ),
]


_DualStack = Annotated[
    bool | None,
    Field(
        description="the agents run IPv4 and IPv6 both: world addresses are world-ipv4 or "
        "world-ipv6 in the session's checks; null: as the cluster's cilium-config says when a "
        "check reads the cluster, else off"
    ),
]


_NodeLabels = Annotated[
    list[str] | None,
    Field(
        description="the node's labels, KEY=VALUE each, when an end is host: a host policy's "
        "nodeSelector is matched against them"
    ),
]


_ListDroppedFlowsNamespace = Annotated[
    str | None,
    Field(description="filter: namespace (applies to both samples and aggregates)"),
]


_Workload = Annotated[
    str | None,
    Field(description="filter: workload (applies to both samples and aggregates)"),
]


_Dropclass = Annotated[
    Literal["policy", "infra", "transient", "noise", "unknown"] | None,
    Field(
        description="filter: policy-actionable vs infra/transient/noise/unknown; "
        "policy and unknown only match samples, infra and transient only aggregates"
    ),
]


_Direction = Annotated[
    Literal["ingress", "egress"] | None,
    Field(description="filter: ingress or egress (samples only; aggregates have none)"),
]


_Limit = Annotated[
    int, Field(ge=1, le=200, description="max rows per page, samples and aggregates")
]


_ListPoliciesLimit = Annotated[int, Field(ge=1, le=200, description="max policies per page")]


_FromCluster = Annotated[bool, _table_field("check", "cluster")]
_PlanAllowLocalhost = Annotated[
    Literal["always", "policy"], _table_field("check", "allow_localhost")
]
_PlanPolicyMapMax = Annotated[int, _table_field("check", "policy_map_max")]


_PlanCapture = Annotated[
    str | None,
    Field(
        description="judge on this capture file (inside the folder the operator allowed with "
        "--allow-replay-dir; every verdict, not only drops) instead of the session's own"
    ),
]


_Uuid = Annotated[str | None, Field(description="filter: the flow with this uuid")]
_FlowPod = Annotated[
    str | None,
    Field(description="filter: [namespace/]pod-name prefix (namespace default: default)"),
]
_FlowLabel = Annotated[
    str | None, Field(description="filter: key=value[,key=value], all must match")
]
_FlowNamespace = Annotated[str | None, Field(description="filter: a namespace")]
_FlowPort = Annotated[int | None, Field(ge=0, le=65535, description="filter: destination port")]
_FlowProtocol = Annotated[
    Literal["TCP", "UDP", "SCTP", "ICMPv4", "ICMPv6"] | None,
    Field(description="filter: L4 protocol"),
]
_FlowVerdict = Annotated[
    Literal["FORWARDED", "DROPPED", "ERROR", "AUDIT", "REDIRECTED", "TRACED", "TRANSLATED"] | None,
    Field(description="filter: verdict (default: DROPPED and AUDIT flows)"),
]
_WhyLimit = Annotated[int, Field(ge=1, le=100, description="max answers per page")]
_TraceEnd = Annotated[
    str,
    Field(
        description="NS/WORKLOAD (app=WORKLOAD), NS:key=value[,key=value], an entity (world, "
        "host, remote-node, kube-apiserver…) or an IP; @CLUSTER for ClusterMesh"
    ),
]
_TracePort = Annotated[str, Field(description="PORT/PROTOCOL, e.g. 8080/TCP or 53/UDP")]
_TraceMethod = Annotated[str, Field(description="an HTTP method, for L7 rules")]
_TracePath = Annotated[str, Field(description="an HTTP path, for L7 rules")]
_TraceDns = Annotated[str, Field(description="a DNS query name, for DNS rules")]


_GetPlanLimit = Annotated[
    int,
    Field(
        ge=1,
        le=200,
        description="max items of the section per page (a page also stops "
        "before ~60,000 characters)",
    ),
]
_PlanSection = Annotated[
    models.PlanSection,
    Field(description="the list to page; totals says how many each holds"),
]


_HealthLimit = Annotated[int, Field(ge=1, le=200, description="max findings per page")]
_ReportSection = Annotated[
    Literal[
        "would_break",
        "newly_enforced",
        "readiness",
        "rollout",
        "declared_dependencies_denied",
        "findings",
        "infrastructure_drops",
        "policy_map_pressure",
        "coverage",
        "policies",
        "graphs",
    ]
    | None,
    Field(description="one part of the report to page (none: all of it, in order)"),
]
_ReportMaxSize = Annotated[
    int, Field(ge=2_000, le=90_000, description="characters of Markdown per page at most")
]


_GetEvidenceDirection = Annotated[
    Literal["ingress", "egress"] | None, Field(description="filter: ingress or egress")
]


_Port = Annotated[
    int | str | None,
    Field(description="filter: rules for this port (as evidence samples give it)"),
]


_Peer = Annotated[str | None, Field(description="filter: endpoint peer label KEY=VALUE")]


_PeerCidr = Annotated[str | None, Field(description="filter: CIDR peers inside this CIDR")]


_HttpMethod = Annotated[str | None, Field(description="filter: HTTP method")]


_HttpPath = Annotated[str | None, Field(description="filter: HTTP path regex, exactly")]


_DnsPattern = Annotated[str | None, Field(description="filter: DNS name")]


_GetEvidenceLimit = Annotated[int, Field(ge=1, le=100, description="max rules per page")]


_GetBootstrapPolicyNamespace = Annotated[str, Field(description="target namespace (required)")]


def build_server(
    allow_replay_dir: Path | None = None,
    *,
    allow_tls_dir: Path | None = None,
    tool_timeout: float = 30.0,
    audit: AuditLog | None = None,
    version_check_timeout: float = 3.0,
) -> GuardedServer:
    """The cpg-mcp server. ``version_check_timeout`` bounds how long get_bootstrap_policy asks
    the cluster for its Cilium agents' images before it calls the version undetermined."""
    manager = SessionManager(allow_replay_dir, on_stopped=tools.warm, allow_tls_dir=allow_tls_dir)

    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[SessionManager]:
        workers.socket_folder()  # before any other thread makes a temp folder
        threading.Thread(target=workers.start, name="cpg-mcp forkserver", daemon=True).start()
        try:
            yield manager
        finally:
            workers.kill_all()  # no answer is awaited any more: the heavy work ends now
            with anyio.CancelScope(shield=True):  # shutting down must not cancel the cleanup
                await manager.close()

    mcp = GuardedServer(
        handshake.SERVER_NAME,
        tool_timeout=tool_timeout,
        audit=audit,
        version=cpg_version(),
        instructions=handshake.INSTRUCTIONS,
        lifespan=lifespan,
    )
    mcp.sessions = manager

    _session_tools(mcp, manager)
    _query_tools(mcp, manager)
    _review_tools(mcp, manager)
    _detail_tools(mcp, manager, version_check_timeout)

    return mcp


def _session_tools(mcp: GuardedServer, manager: SessionManager) -> None:
    """start_session, get_status and stop_session: the tools that change a session."""

    def session_of(session_id: str) -> Any:
        return tools.session_of(manager, session_id)

    @mcp.tool(
        title="Start a capture session",
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=True,
        ),
    )
    @_with_run_arguments
    async def start_session(
        arguments: dict[str, Any],
        replay_file: _ReplayFile = None,
        shadow_policies: _ShadowPolicies = None,
        host_firewall: _HostFirewall = None,
        dual_stack: _DualStack = None,
    ) -> models.StartResult:
        """Start a capture session and return at once with its opaque session_id; the capture runs
        in the background. One session at a time: stop_session before starting another (a stopped
        session is discarded). Poll get_status."""
        return await tools.start_session(
            manager,
            **arguments,
            replay_file=replay_file,
            shadow_policies=shadow_policies,
            host_firewall=host_firewall,
            dual_stack=dual_stack,
        )

    @mcp.tool(
        title="Session status",
        annotations=ToolAnnotations(
            read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    async def get_status(session_id: SESSION_ID) -> models.StatusResult:
        """Coarse session state (capturing/stopped), elapsed time and file counts. Works for a
        stopped session too."""
        return await offload(tools.get_status, session_of(session_id))

    @mcp.tool(
        title="Stop the session",
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )
    async def stop_session(session_id: SESSION_ID) -> models.StopResult:
        """Stop the capture (final flush, cluster-health.json) and return the summary. Idempotent:
        a second stop returns the same summary with already_stopped. Files stay queryable until
        the next start_session."""
        session = session_of(session_id)
        already = session.stop_calls > 0
        await manager.stop(session_id)
        return await offload(tools.stop_summary, session, already)


def _query_tools(mcp: GuardedServer, manager: SessionManager) -> None:
    """The read-only tools over a session's files and the cluster."""

    def session_of(session_id: str) -> Any:
        return tools.session_of(manager, session_id)

    @mcp.tool(title="Dropped flows: samples and counts", annotations=QUERY)
    async def list_dropped_flows(
        session_id: SESSION_ID,
        namespace: _ListDroppedFlowsNamespace = None,
        workload: _Workload = None,
        dropclass: _Dropclass = None,
        direction: _Direction = None,
        limit: _Limit = 50,
        cursor: CURSOR = None,
    ) -> models.DroppedFlows:
        """Dropped flows as a sampled/aggregated view, not a raw flow log. `samples` are the
        stored flows behind each rule (the drops a policy fixes; at most 10 newest per rule,
        served live). `aggregates.rows` count infrastructure and transient drops per namespace,
        workload and reason (drops no policy fixes): while a live capture runs they count the
        flows so far (`so_far` is true), final after stop_session. Noise is
        never listed. Filters AND-combine; pagination covers both sections; total_count counts
        view items, not flows."""
        arguments = _arguments(locals(), list_dropped_flows)
        session = session_of(arguments.pop("session_id"))
        return await offload(tools.list_dropped_flows, session, heavy=True, **arguments)

    @mcp.tool(title="List generated policies", annotations=QUERY)
    async def list_policies(
        session_id: SESSION_ID,
        limit: _ListPoliciesLimit = 50,
        cursor: CURSOR = None,
    ) -> models.PolicyList:
        """The policies this session generated: namespace, workload, name, directions, rule
        counts and path. Paginated."""
        return await offload(
            tools.list_policies, session_of(session_id), limit=limit, cursor=cursor
        )

    @mcp.tool(title="What applying the policies would change", annotations=QUERY)
    async def get_plan(
        session_id: SESSION_ID,
        capture: _PlanCapture = None,
        from_cluster: _FromCluster = False,
        allow_localhost: _PlanAllowLocalhost = "always",
        policy_map_max: _PlanPolicyMapMax = 16_384,
        section: _PlanSection = "would_break",
        limit: _GetPlanLimit = 50,
        cursor: CURSOR = None,
    ) -> models.PlanResult:
        """The plan of a stopped session's policies (cpg plan), or of a shadow session's
        proposed policies on its live stream so far (so_far): denied flows they fix,
        forwarded flows that work today and would break (a selector that newly puts pods in
        default-deny), with a fix each, endpoints policed for the first time, and each
        policy's changes in Cilium terms, and the pods whose estimated policy map entries
        reach 80 % of policy_map_max (policy_map). Judged on capture, else on the session's
        own replay; verdict cannot_judge when that capture has no forwarded traffic.
        Every result has the verdict and totals (how many items each list holds); section
        picks the list this call pages (would_break first), the cursor pages on within it."""
        return await offload(
            tools.get_plan,
            session_of(session_id),
            heavy=True,
            capture=tools.allowed_capture(manager, capture),
            from_cluster=from_cluster,
            allow_localhost=allow_localhost,
            policy_map_max=policy_map_max,
            kube_dir=manager.kube_dir(),
            section=section,
            limit=limit,
            cursor=cursor,
        )


def _review_tools(mcp: GuardedServer, manager: SessionManager) -> None:
    """The read-only tools that answer a reviewer: why a flow was denied, would a flow be
    admitted, the review report."""

    def session_of(session_id: str) -> Any:
        return tools.session_of(manager, session_id)

    @mcp.tool(title="Why a captured flow was denied", annotations=QUERY)
    async def explain_flow(
        session_id: SESSION_ID,
        uuid: _Uuid = None,
        from_pod: _FlowPod = None,
        to_pod: _FlowPod = None,
        from_label: _FlowLabel = None,
        to_label: _FlowLabel = None,
        from_namespace: _FlowNamespace = None,
        to_namespace: _FlowNamespace = None,
        port: _FlowPort = None,
        protocol: _FlowProtocol = None,
        verdict: _FlowVerdict = None,
        capture: _PlanCapture = None,
        from_cluster: _FromCluster = False,
        limit: _WhyLimit = 20,
        cursor: CURSOR = None,
    ) -> models.WhyResult:
        """cpg why for a stopped session: for each kind of flow the filters select (denied
        ones unless verdict is given) in the session's capture (or capture), the drop as
        Hubble recorded it (infra and transient drops named, with their fix), the policies
        that police the endpoint in that direction, each rule that could have admitted it
        and what it misses (peer label, namespace, cluster, port, L7; nearest first), deny
        rules that match, and admit_yaml. Judged against the session's policies, or the
        cluster's with from_cluster. Filters are hubble observe's and AND-combine."""
        arguments = _arguments(locals(), explain_flow)
        session = session_of(arguments.pop("session_id"))
        capture_path = tools.allowed_capture(manager, arguments.pop("capture"))
        return await offload(
            tools.explain_flow,
            session,
            heavy=True,
            capture=capture_path,
            kube_dir=manager.kube_dir(),
            answer_seconds=mcp.tool_timeout * ANSWER_SHARE,
            **arguments,
        )

    @mcp.tool(title="Would a flow be admitted (trace)", annotations=QUERY)
    async def trace_flow(
        session_id: SESSION_ID,
        source: _TraceEnd,
        destination: _TraceEnd,
        port: _TracePort,
        method: _TraceMethod = "",
        path: _TracePath = "",
        dns: _TraceDns = "",
        from_cluster: _FromCluster = False,
        node_labels: _NodeLabels = None,
    ) -> models.WhyResult:
        """cpg trace: whether the session's policies (or the cluster's, with from_cluster)
        would admit a flow nobody captured, with the same answer as explain_flow, for the
        source's egress and the destination's ingress, each where a pod is policed."""
        arguments = _arguments(locals(), trace_flow)
        session = session_of(arguments.pop("session_id"))
        return await offload(
            tools.trace_flow, session, heavy=True, kube_dir=manager.kube_dir(), **arguments
        )

    @mcp.tool(title="Review report (Markdown)", annotations=QUERY)
    async def get_report(
        session_id: SESSION_ID,
        section: _ReportSection = None,
        max_size: _ReportMaxSize = 60_000,
        cursor: CURSOR = None,
    ) -> models.ReportResult:
        """The Markdown review report of a stopped session, as cpg report prints it, a page
        of whole rows and graphs at a time (at most max_size characters): the summary,
        findings and infra drops with their fixes, coverage, each policy's rules with flows,
        first/last seen and confidence, and Mermaid graphs of the allowed traffic. sections
        names each part and its size; section pages one of them."""
        return await offload(
            tools.get_report,
            session_of(session_id),
            heavy=True,
            section=section,
            max_size=max_size,
            cursor=cursor,
        )


def _detail_tools(
    mcp: GuardedServer, manager: SessionManager, version_check_timeout: float
) -> None:
    """One policy, its evidence, the cluster health and the bootstrap policy."""

    def session_of(session_id: str) -> Any:
        return tools.session_of(manager, session_id)

    @mcp.tool(title="Get one policy", annotations=QUERY)
    async def get_policy(
        session_id: SESSION_ID,
        namespace: POLICY_NAMESPACE,
        workload: POLICY_WORKLOAD,
    ) -> models.PolicyResult:
        """The full YAML of one generated policy and its rule counts."""
        return await offload(
            tools.get_policy, session_of(session_id), namespace=namespace, workload=workload
        )

    @mcp.tool(title="Evidence behind a policy's rules", annotations=QUERY)
    async def get_evidence(
        session_id: SESSION_ID,
        namespace: POLICY_NAMESPACE,
        workload: POLICY_WORKLOAD,
        direction: _GetEvidenceDirection = None,
        port: _Port = None,
        peer: _Peer = None,
        peer_cidr: _PeerCidr = None,
        http_method: _HttpMethod = None,
        http_path: _HttpPath = None,
        dns_pattern: _DnsPattern = None,
        limit: _GetEvidenceLimit = 20,
        cursor: CURSOR = None,
    ) -> models.EvidenceResult:
        """Per-rule flow evidence for one policy, records exactly as `cpg explain --json` gives
        them. Filters AND-narrow the rules; pagination applies to matched rules."""
        arguments = _arguments(locals(), get_evidence)
        session = session_of(arguments.pop("session_id"))
        return await offload(tools.get_evidence, session, **arguments)

    @mcp.tool(title="Cluster health of the session", annotations=QUERY)
    async def get_cluster_health(
        session_id: SESSION_ID, limit: _HealthLimit = 50, cursor: CURSOR = None
    ) -> models.HealthResult:
        """Infrastructure and transient drops (by reason, node and workload, with fix links) and
        findings (paged: total_count counts them). While a live capture runs, the report covers
        the flows so far (`so_far` is true); after stop_session it is final. No report after
        stop means no such drops."""
        return await offload(
            tools.get_cluster_health, session_of(session_id), limit=limit, cursor=cursor
        )

    @mcp.tool(title="Default-deny policy for a namespace", annotations=QUERY)
    async def get_bootstrap_policy(
        namespace: _GetBootstrapPolicyNamespace,
    ) -> models.BootstrapResult:
        """A namespaced default-deny CiliumNetworkPolicy as YAML (enableDefaultDeny both ways,
        ingress and egress as [{}]), the first step of onboarding a namespace. Detects the
        cluster's Cilium version from the environment's kubeconfig (3 s at most); refuses below
        1.16, where the field would be pruned, and proceeds with a warning when undetermined."""
        text = tools.bootstrap_text(namespace)
        return tools.bootstrap_policy(
            namespace, text, await _agent_images(manager.kube_dir(), version_check_timeout)
        )
