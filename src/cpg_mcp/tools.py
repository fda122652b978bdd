"""The cpg-mcp tools as plain functions over a session and its stores, so each one can be
called and tested without an MCP client. ``server.py`` registers them with their argument
schemas. Query tools only read, through the same stores the CLI uses; every string they
return is stripped of control characters."""

from __future__ import annotations

import contextvars
import difflib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, get_args

import yaml
from mcp.server.mcpserver.exceptions import ToolError

from cpg_core import (
    CANNOT_JUDGE,
    ClusterHealth,
    CpgError,
    DroppedFlowCount,
    DroppedFlowSample,
    EvidenceError,
    ExplainRequest,
    Plan,
    PolicyEvidence,
    RequestError,
    RunRequest,
    check_target,
    explain_record,
    render_bootstrap,
    to_data,
)
from cpg_core.cilium import (
    DEFAULT_DENY_FIELD,
    below_floor,
    format_version,
    load_all,
    minimum_version,
    versions_seen,
)
from cpg_core.declarations import NO_CATALOGUE
from cpg_core.identities import CLUSTER
from cpg_core.readiness import readiness_summary
from cpg_core.reports import (
    DroppedFlowFilter,
    aggregate_rows,
    capped_breakdowns,
    compose,
    flow_samples,
)
from cpg_core.text import clean
from cpg_io.clock import now_rfc3339
from cpg_io.errors import StoreError
from cpg_io.hubble import TLSSettings
from cpg_mcp import paging, workers
from cpg_mcp.models import (
    BootstrapResult,
    DroppedFlows,
    EvidenceResult,
    HealthResult,
    PlanResult,
    PlanSection,
    PolicyList,
    PolicyResult,
    PolicyRow,
    ReportResult,
    ReportSection,
    StartResult,
    StatusResult,
    StopResult,
    WhyResult,
)
from cpg_mcp.sessions import Session, SessionError, SessionManager
from cpg_mcp.words import argument, in_tool_words

log = logging.getLogger("cpg.mcp")
T = TypeVar("T")

DROPPED_FLOWS_CAPTURING = (
    "the replay is still running: aggregates come when it ends (or after stop_session); "
    "samples above are already live"
)
DROPPED_FLOWS_SO_FAR = (
    "the capture is still running: these counts cover the flows received so far and grow "
    "until stop_session"
)


CANCEL: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "cpg_mcp_cancel", default=None
)
"""Set by the server for each offloaded call: the call's deadline expired."""


class CallCancelled(Exception):
    """The call's deadline expired while it was still reading."""


def checkpoint() -> None:
    """Stop here if the call this work belongs to has been given up."""
    cancel = CANCEL.get()
    if cancel is not None and cancel.is_set():
        raise CallCancelled("the call's deadline expired")


def validated(build: Callable[[], T]) -> T:
    """Run a request builder; a RequestError becomes a tool error naming the argument."""
    try:
        return build()
    except RequestError as exc:
        field = argument(exc.field)
        text = exc.render(argument)
        message = text if text.startswith(field) else f"{field}: {text}"
        raise ToolError(message) from None


def session_of(manager: SessionManager, session_id: str) -> Session:
    try:
        return manager.get(session_id)
    except SessionError as exc:
        raise ToolError(in_tool_words(exc)) from None


def allowed_capture(manager: SessionManager, capture: str | None) -> Path | None:
    """The capture file an argument names, inside the folder the operator allowed."""
    if capture is None:
        return None
    try:
        return manager.replay_path(capture, "capture")
    except SessionError as exc:
        raise ToolError(in_tool_words(exc)) from None


def duration_text(seconds: float) -> str:
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "") + f"{secs}s"


async def start_session(
    manager: SessionManager,
    *,
    tls: bool = False,
    tls_ca_cert: str | None = None,
    tls_client_cert: str | None = None,
    tls_client_key: str | None = None,
    tls_server_name: str | None = None,
    replay_file: str | None = None,
    shadow_policies: str | None = None,
    host_firewall: bool | None = None,
    dual_stack: bool | None = None,
    **arguments: Any,
) -> StartResult:
    """``arguments`` are the tool's run arguments, named as :meth:`RunRequest.build` names
    them and checked by it exactly as the CLI's flags are."""
    try:  # files only from the folder the operator allowed, as replay_file
        for argument, word in (
            ("identities", CLUSTER),
            ("declarations", CLUSTER),
            ("catalogue", NO_CATALOGUE),
        ):
            arguments[argument] = [
                s if s.strip() == word else str(manager.replay_path(s, argument))
                for s in arguments.get(argument) or []
            ]
    except CpgError as exc:
        raise ToolError(in_tool_words(exc)) from None
    request = validated(lambda: RunRequest.build(**arguments))
    files = {"tls_ca_cert": tls_ca_cert, "tls_client_cert": tls_client_cert}
    files["tls_client_key"] = tls_client_key
    wants_tls = tls or any(files.values()) or bool(tls_server_name)
    live_only = request.live.server or wants_tls or request.live.cluster_dedup
    if replay_file is not None and live_only:
        raise ToolError(
            "replay_file reads a capture file: leave server, the tls arguments and "
            "cluster_dedup out"
        )
    if replay_file is not None and shadow_policies is not None:
        raise ToolError(
            "shadow_policies judges proposed policies on live traffic: leave replay_file out "
            "(for a capture file, start a replay session and call get_plan with capture)"
        )
    if replay_file is None:
        validated(lambda: request.live_window(now_rfc3339()))
    if (tls_client_cert is None) != (tls_client_key is None):
        raise ToolError("tls_client_cert and tls_client_key go together")
    confined: dict[str, Path | None] = {}
    for name, value in files.items():
        try:
            confined[name] = manager.tls_path(value, name) if value else None
        except SessionError as exc:
            raise ToolError(in_tool_words(exc)) from None
    settings = TLSSettings(
        enabled=wants_tls,
        ca_cert=confined["tls_ca_cert"],
        client_cert=confined["tls_client_cert"],
        client_key=confined["tls_client_key"],
        server_name=tls_server_name or None,
    )
    try:
        session, discarded = await manager.start(
            request,
            replay_file=replay_file,
            tls=settings,
            shadow_policies=shadow_policies,
            agent=(host_firewall, dual_stack),
        )
    except CpgError as exc:
        raise ToolError(in_tool_words(exc)) from None
    source = clean(session.source)
    if replay_file is not None:
        return StartResult(session_id=session.id, discarded_session=discarded, replay_file=source)
    return StartResult(session_id=session.id, discarded_session=discarded, server=source)


def get_status(session: Session) -> StatusResult:
    if session.shadow is not None:
        flows: int | None = session.shadow.progress.flows
    elif session.capture is not None and session.state == "capturing":
        flows = session.capture.progress.flows
    else:
        flows = session.result.aggregator.total_flows if session.result is not None else None
    words = _capture_words(session)
    return StatusResult(
        session_id=session.id,
        state=session.state,
        elapsed=duration_text(session.elapsed()),
        flows_seen=flows,
        policy_file_count=sum(1 for _ in session.policy_store.targets()),
        evidence_file_count=sum(1 for _ in session.evidence_store.targets()),
        tmp_dir=str(session.tmp),
        error=clean(session.error) or None,
        capture=words[0],
        readiness=words[1],
    )


def _capture_words(session: Session) -> tuple[str | None, str | None]:
    """The session's capture profile and readiness in words (a live capture's so far)."""
    live = session.capture is not None and session.state == "capturing"
    result = session.capture.result if live and session.capture is not None else session.result
    if result is None:
        return None, None
    capture = result.capture
    profiles = list(result.profiles.values())
    return (
        clean(capture.text()) if capture is not None and capture.flows else None,
        readiness_summary(profiles) if profiles else None,
    )


def stop_summary(session: Session, already_stopped: bool) -> StopResult:
    """What stop_session returns once the session has stopped."""
    result = session.result
    agg = result.aggregator if result else None
    health = result.health if result else None
    words = _capture_words(session)
    return StopResult(
        session_id=session.id,
        error=clean(session.error) or None,
        already_stopped=already_stopped,
        duration=duration_text(session.elapsed()),
        flows_seen=agg.total_flows if agg else 0,
        policies_written=result.count("created") + result.count("updated") if result else 0,
        policies_skipped=result.count("unchanged") if result else 0,
        policies_failed=len(result.failed) if result else 0,
        lost_events=result.stats.lost_events if result else 0,
        l7_record_count=agg.l7_records if agg else 0,
        audit_verdict_count=agg.audit_flows if agg else 0,
        infra_drop_total=agg.infra_drops if agg else 0,
        infra_drops_by_reason={d.reason: d.count for d in health.drops} if health else {},
        cluster_health_path=in_session(
            session,
            result.health_path
            if result and result.health_path
            else session.evidence_store.health_path,
        ),
        tmp_dir=str(session.tmp),
        capture=words[0],
        readiness=words[1],
    )


def in_session(session: Session, path: Path) -> str:
    """``path`` relative to the session's folder (``tmp_dir``): the part an agent can use
    anywhere (the folder is the server's, and temporary)."""
    try:
        return path.relative_to(session.tmp).as_posix()
    except ValueError:
        return path.name


def health_of(session: Session) -> ClusterHealth | None:
    """The session's cluster-health report: the run's own, else the file it wrote."""
    if session.result is not None and session.result.health is not None:
        return session.result.health
    try:
        return session.evidence_store.read_health()
    except EvidenceError as exc:
        raise ToolError(f"parsing cluster health: {exc}") from None


def _evidence(session: Session) -> list[tuple[str, str, PolicyEvidence]]:
    found = []
    for item in session.evidence_store.read_all(
        lambda problem: log.warning("skipping %s", problem)
    ):
        checkpoint()
        found.append(item)
    return found


def _samples(session: Session) -> list[DroppedFlowSample]:
    return [row for ns, wl, doc in _evidence(session) for row in flow_samples(ns, wl, doc)]


def _policy_rows(session: Session) -> list[PolicyRow]:
    rows = []
    for namespace, workload in session.policy_store.targets():
        checkpoint()
        try:
            rows.append(_policy_row(session, namespace, workload)[0])
        except (OSError, StoreError, ToolError, yaml.YAMLError) as exc:
            log.warning("skipping %s/%s: %s", namespace, workload, exc)
    return rows


def _dropped(session: Session, wanted: DroppedFlowFilter) -> list[Any]:
    """A stopped session's dropped-flow list under ``wanted``, samples then counts (the
    parts are looked up only when the list is not: one look at the folders per call)."""
    return session.memo(
        f"dropped {wanted!r}",
        lambda: compose(
            session.memo("samples", lambda: _samples(session)),
            session.memo("health rows", lambda: aggregate_rows(health_of(session))),
            wanted,
        ),
    )


def warm(session: Session) -> None:
    """Build what the read tools share for a session that has just stopped, so that no call
    pays for it (SessionManager.on_stopped)."""
    session.memo("policy rows", lambda: _policy_rows(session))
    session.memo("health", lambda: health_of(session))
    _dropped(session, DroppedFlowFilter())


def list_dropped_flows(
    session: Session,
    *,
    namespace: str | None = None,
    workload: str | None = None,
    dropclass: str | None = None,
    direction: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> DroppedFlows:
    if namespace is not None:
        validated(lambda: check_target(namespace, "namespace"))
    if workload is not None:
        validated(lambda: check_target(workload, "workload"))
    paging.decode(cursor)
    stopped = session.state == "stopped"
    live = not stopped and session.capture is not None
    wanted = DroppedFlowFilter(namespace, workload, dropclass, direction)
    if stopped:
        items = _dropped(session, wanted)
    else:
        rows = []
        if session.capture is not None:  # a live capture: the counts so far
            rows = aggregate_rows(session.capture.health_so_far())
        items = compose(session.memo("samples", lambda: _samples(session)), rows, wanted)
    chunk, meta = paging.page(items, cursor, limit)
    counts = [to_data(row) for row in chunk if isinstance(row, DroppedFlowCount)]
    aggregates: dict[str, Any]
    if stopped:
        aggregates = {"rows": counts} if counts else {}
    elif live:
        aggregates = {"so_far": True, "message": DROPPED_FLOWS_SO_FAR} | (
            {"rows": counts} if counts else {}
        )
    else:
        aggregates = {"available_after_stop": True, "message": DROPPED_FLOWS_CAPTURING}
    return DroppedFlows.model_validate(
        clean(
            {
                "samples": [to_data(row) for row in chunk if isinstance(row, DroppedFlowSample)],
                "aggregates": aggregates,
                **meta,
            }
        )
    )


def _policy_row(session: Session, namespace: str, workload: str) -> tuple[PolicyRow, str]:
    store = session.policy_store
    path = store.path_for(namespace, workload)
    text = store.read(path)
    if text is None:
        known = [f"{ns}/{wl}" for ns, wl in store.targets()]
        near = difflib.get_close_matches(f"{namespace}/{workload}", known, n=3, cutoff=0.8)
        hint = f"did you mean {' or '.join(near)}? " if near else ""
        raise ToolError(
            f"no policy for {namespace}/{workload}; {hint}call list_policies to see what exists"
        )
    try:
        docs = load_all(text, path.name)
    except CpgError as exc:
        raise ToolError(f"{exc}; fix the file or move it aside") from None
    doc = docs[0] if len(docs) == 1 and isinstance(docs[0], dict) else {}
    spec = doc.get("spec") or {}
    row = PolicyRow(
        namespace=namespace,
        workload=workload,
        name=str((doc.get("metadata") or {}).get("name", "")),
        directions=[d for d in ("ingress", "egress") if spec.get(d)],
        ingress_rule_count=len(spec.get("ingress") or []),
        egress_rule_count=len(spec.get("egress") or []),
        path=in_session(session, path),
    )
    return row, text


def list_policies(session: Session, *, limit: int = 50, cursor: str | None = None) -> PolicyList:
    paging.decode(cursor)  # a garbage cursor is an error even with no policy yet
    if session.generation() is None:  # a replay still writing: read the page's files alone
        chunk, meta = paging.page(list(session.policy_store.targets()), cursor, limit)
        rows = []
        for namespace, workload in chunk:
            checkpoint()
            try:
                rows.append(_policy_row(session, namespace, workload)[0])
            except (OSError, StoreError, ToolError, yaml.YAMLError) as exc:
                log.warning("skipping %s/%s: %s", namespace, workload, exc)
    else:
        rows, meta = paging.page(
            session.memo("policy rows", lambda: _policy_rows(session)), cursor, limit
        )
    return PolicyList.model_validate(clean({"policies": [r.model_dump() for r in rows], **meta}))


def get_policy(session: Session, *, namespace: str, workload: str) -> PolicyResult:
    validated(lambda: check_target(namespace, "namespace"))
    validated(lambda: check_target(workload, "workload"))
    try:
        row, text = _policy_row(session, namespace, workload)
    except StoreError as exc:
        raise ToolError(in_tool_words(exc)) from None
    return PolicyResult(
        namespace=namespace,
        workload=workload,
        name=clean(row.name),
        yaml=clean(text, keep_newlines=True),
        path=row.path,
        ingress_rule_count=row.ingress_rule_count,
        egress_rule_count=row.egress_rule_count,
    )


def get_evidence(
    session: Session,
    *,
    namespace: str,
    workload: str,
    limit: int = 20,
    cursor: str | None = None,
    **filters: Any,
) -> EvidenceResult:
    """``filters`` are explain filters as the tool received them (direction, port, peer…)."""
    from cpg_io.runs import explain

    request = validated(
        lambda: ExplainRequest.build(namespace=namespace, workload=workload, **filters)
    )
    paging.decode(cursor)
    try:
        explained = validated(lambda: explain(request, session.evidence_store))
    except (EvidenceError, StoreError) as exc:
        raise ToolError(in_tool_words(exc)) from None
    if explained.evidence is None:
        raise ToolError(
            f"no evidence for {namespace}/{workload}; call list_policies to see available targets"
        )
    record = to_data(explain_record(explained.evidence, explained.filter))
    rules, meta = paging.page(record["matched_rules"], cursor, limit)
    return EvidenceResult.model_validate(clean({**record, "matched_rules": rules, **meta}))


HEALTH_CAPTURING = (
    "the replay is still running: the cluster health report comes when it ends (or after "
    "stop_session)"
)


def get_cluster_health(
    session: Session, *, limit: int = 50, cursor: str | None = None
) -> HealthResult:
    """The session's cluster health; its findings (one per subject, so many) are paged."""
    paging.decode(cursor)
    so_far = None
    if session.state == "capturing":
        if session.capture is None:  # a replay still reading
            return HealthResult(available_after_stop=True, message=HEALTH_CAPTURING)
        so_far = True
        report: ClusterHealth | None = session.capture.health_so_far()
    else:
        report = session.memo("health", lambda: health_of(session))
    if report is None and session.error:
        raise ToolError(
            clean(
                "cluster health unavailable: session ended with error before any drop was "
                f"recorded: {session.error}"
            )
        )
    if report is None or not (report.drops or report.findings):
        return HealthResult(
            no_drops=True,
            so_far=so_far,
            message="no infra/transient drops observed this session"
            + (" so far (the capture is still running)" if so_far else ""),
        )
    capped, truncated = capped_breakdowns(report)
    data = to_data(capped)
    findings, meta = paging.page(data["findings"], cursor, limit)
    return HealthResult(
        report=clean({**data, "findings": findings}),
        truncated=truncated or None,
        so_far=so_far,
        message=DROPPED_FLOWS_SO_FAR if so_far else None,
        **meta,
    )


def bootstrap_text(namespace: str) -> str:
    """The default-deny policy YAML for ``namespace`` (checked before the cluster is asked)."""
    if not namespace:
        raise ToolError("namespace is required")
    try:
        return render_bootstrap(namespace)
    except ValueError as exc:
        raise ToolError(in_tool_words(exc)) from None


def bootstrap_policy(namespace: str, text: str, agent_images: list[str]) -> BootstrapResult:
    """The bootstrap result, checked against the oldest Cilium agent among ``agent_images``
    (none: the version is undetermined, with a warning)."""
    version = minimum_version(agent_images)
    if version is None:
        return BootstrapResult(
            namespace=namespace,
            yaml=text,
            version_warning="Cilium version undetermined; enableDefaultDeny requires "
            ">= 1.16 — proceeding",
        )
    if below_floor(version, [DEFAULT_DENY_FIELD]):
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
        cilium_versions_seen=versions_seen(agent_images),
    )


def get_plan(
    session: Session,
    *,
    capture: Path | None = None,
    from_cluster: bool = False,
    allow_localhost: str = "always",
    policy_map_max: int = 16_384,
    kube_dir: Path | None = None,
    section: str = "would_break",
    limit: int = 50,
    cursor: str | None = None,
) -> PlanResult:
    """What applying the session's policies would change, judged on ``capture`` (a file the
    operator allowed), else on the capture the session read."""
    paging.decode(cursor)
    if session.shadow is not None:
        if capture is not None or from_cluster:
            raise ToolError(
                "a shadow session judges its proposed policies on its own stream, against the "
                "current policies it started with: leave capture and from_cluster out"
            )
        running = session.state == "capturing"
        view = session.shadow.so_far() if running else session.shadow_plan
        if view is None:
            raise ToolError(f"the shadow session ended without a plan: {session.error}")
        return _plan_result(view.plan, limit, cursor, section=section, so_far=running)
    if session.state != "stopped":
        raise ToolError("the session is still running; call stop_session first")
    result = session.result
    if capture is not None:
        inputs = [str(capture)]
    else:
        inputs = [p for p in (result.inputs if result is not None else []) if p != "-"]
    if not inputs:
        raise ToolError(
            "get_plan needs a capture with every verdict: a live session keeps no flows; "
            "give capture (a file inside the folder the operator allowed with "
            "--allow-replay-dir, taken with hubble observe without --verdict)"
        )
    cache_key = (from_cluster, allow_localhost, policy_map_max, tuple(inputs))
    planned = session.plans.get(cache_key)
    if planned is None:
        from cpg_core import CheckRequest

        request = CheckRequest.build(
            inputs=inputs,
            policies=str(session.policies) if session.policies.is_dir() else None,
            cluster=from_cluster,
            default_local_cluster=None,
            allow_localhost=allow_localhost,
            host_firewall=_tristate_word(session.host_firewall),
            dual_stack=_tristate_word(session.dual_stack),
            identities=session.identities,
            declarations=session.declarations,
            policy_map_max=policy_map_max,
        )
        planned = workers.run(
            "plan", request, session.evidence_store, kube_dir, cancel=CANCEL.get()
        )
        session.plans[cache_key] = planned
    made = planned  # the plan's wire form, once: each call pages it
    data = session.memo(f"plan {cache_key!r}", lambda: to_data(made))
    return _plan_result(planned, limit, cursor, section=section, data=data)


PLAN_LISTS: tuple[str, ...] = get_args(PlanSection)
"""The plan's lists, as get_plan's ``section`` names them."""


def _plan_result(
    plan: Plan,
    limit: int,
    cursor: str | None,
    *,
    section: str = "would_break",
    so_far: bool = False,
    data: dict[str, Any] | None = None,
) -> PlanResult:
    data = to_data(plan) if data is None else data
    rollout = data.get("rollout") or {}
    data = {
        **data,
        "rollout": rollout.get("batches", []),
        "rollout_waiting": rollout.get("waiting", []),
    }
    if section not in PLAN_LISTS:
        raise ToolError(f"section {section!r}: one of {', '.join(PLAN_LISTS)}")
    chunk, meta = paging.page(data[section], cursor, limit)
    return PlanResult.model_validate(
        clean(
            {
                "current_source": data["current_source"],
                "blind_spots": data["blind_spots"],
                "candidates": data["candidates"],
                "fixed": data["fixed"],
                "forwarded_flows": data["forwarded_flows"],
                "node_flows": data["node_flows"],
                "notes": data["notes"],
                "verdict": data["verdict"],
                "message": CANNOT_JUDGE if data["verdict"] == "cannot_judge" else None,
                "would_break_flows": data["would_break_flows"],
                "policy_map_max": data["policy_map_max"],
                "capture": data.get("capture"),
                "so_far": True if so_far else None,
                "totals": {name: len(data[name]) for name in PLAN_LISTS},
                "section": section,
                section: chunk,
                **meta,
            }
        )
    )


REPORT_BUDGET = 60_000
"""Characters of Markdown a get_report page holds unless asked otherwise."""


def get_report(
    session: Session,
    *,
    section: str | None = None,
    max_size: int = REPORT_BUDGET,
    cursor: str | None = None,
) -> ReportResult:
    """The Markdown review report of a stopped session (what cpg report prints), one page of
    whole rows and graphs at a time: all of it in order, or one section."""
    from cpg_core.reports import markdown_page

    start = paging.decode(cursor)
    if session.state != "stopped":
        raise ToolError("the session is still running; call stop_session first")
    if not session.policies.is_dir():
        raise ToolError("the session wrote no policy; there is nothing to report")
    head, sections = session.memo(
        "report",
        lambda: workers.run(
            "report",
            session.policies,
            session.evidence_store,
            f"session {session.id}",
            session.declarations,
            cancel=CANCEL.get(),
        ),
    )
    names = {name.replace(" ", "_"): blocks for name, blocks in sections}
    if section is not None and section not in names:
        raise ToolError(f"section {section!r}: one of {', '.join(names)}")
    blocks = (
        [head] + [b for bs in names.values() for b in bs] if section is None else names[section]
    )
    text, end = markdown_page(blocks, start, max_size)
    meta: dict[str, Any] = {"total_count": len(blocks), "has_more": end < len(blocks)}
    if end < len(blocks):
        meta["next_cursor"] = paging.encode(end)
    return ReportResult(
        markdown=text,
        section=section,
        sections=[
            ReportSection(
                name=name, blocks=len(bs), characters=sum(len(x) + 1 for b in bs for x in b)
            )
            for name, bs in names.items()
        ],
        **meta,
    )


def _why_request(session: Session, inputs: list[str], from_cluster: bool) -> Any:
    from cpg_core import CheckRequest

    return CheckRequest.build(
        inputs=inputs,
        policies=str(session.policies) if session.policies.is_dir() else None,
        cluster=from_cluster,
        default_local_cluster=None,
        allow_localhost="auto",
        host_firewall=_tristate_word(session.host_firewall),
        dual_stack=_tristate_word(session.dual_stack),
        identities=session.identities,
        declarations=session.declarations,
    )


def _tristate_word(value: bool | None) -> str:
    """A session's agent setting as the request builder reads it (auto: as the cluster
    says)."""
    return "auto" if value is None else str(value).lower()


def _why_result(
    answered: tuple[str, int, list[Any], int], limit: int, cursor: str | None
) -> WhyResult:
    origin, selected, answers, unanswered = answered
    chunk, meta = paging.page(answers, cursor, limit)
    data: dict[str, Any] = {"origin": origin, "selected_flows": selected, "answers": chunk}
    if unanswered:
        data["unanswered_flows"] = unanswered
        data["message"] = (
            f"answered the most frequent kinds of flow before the deadline; {unanswered:,} "
            "distinct flows were left: narrow the filters (from_namespace, to_pod, port…) to "
            "have them answered"
        )
    return WhyResult.model_validate(clean({**data, **meta}))


def _stamps(inputs: list[str]) -> list[tuple[str, int, int]]:
    """Each input with its size and time of change: a memo of answers holds while they do."""
    out = []
    for name in inputs:
        try:
            stat = Path(name).stat()
            out.append((name, stat.st_size, stat.st_mtime_ns))
        except OSError:
            out.append((name, -1, -1))
    return out


def explain_flow(
    session: Session,
    *,
    capture: Path | None = None,
    from_cluster: bool = False,
    kube_dir: Path | None = None,
    limit: int = 20,
    cursor: str | None = None,
    answer_seconds: float | None = None,
    **filters: Any,
) -> WhyResult:
    """Why the flows the filters select (denied ones unless verdict is given) were denied,
    judged against the session's policies (or the cluster's). ``filters`` are the tool's
    filter arguments, one value each (None: not given)."""
    from cpg_core.why import FlowFilter

    paging.decode(cursor)
    if session.state != "stopped":
        raise ToolError("the session is still running; call stop_session first")
    result = session.result
    inputs = (
        [str(capture)]
        if capture is not None
        else [p for p in (result.inputs if result is not None else []) if p != "-"]
    )
    if not inputs:
        raise ToolError(
            "explain_flow needs a capture: a live session keeps no flows; give capture (a "
            "file inside the folder the operator allowed with --allow-replay-dir)"
        )
    request = validated(lambda: _why_request(session, inputs, from_cluster))
    chosen = {name: [value] for name, value in filters.items() if value is not None}
    selection = validated(lambda: FlowFilter.build(**chosen))
    answered = session.memo(
        f"why {_stamps(inputs)!r} {from_cluster} {sorted(chosen.items())!r}",
        lambda: workers.run(
            "why",
            request,
            selection,
            kube_dir,
            answer_seconds,
            session.evidence_store,
            cancel=CANCEL.get(),
        ),
    )
    return _why_result(answered, limit, cursor)


def trace_flow(
    session: Session,
    *,
    source: str,
    destination: str,
    port: str,
    method: str = "",
    path: str = "",
    dns: str = "",
    from_cluster: bool = False,
    node_labels: list[str] | None = None,
    kube_dir: Path | None = None,
) -> WhyResult:
    """Whether the session's policies (or the cluster's) would admit a flow described by hand."""
    from cpg_core.why import traced_flows

    if session.state != "stopped":
        raise ToolError("the session is still running; call stop_session first")
    request = validated(lambda: _why_request(session, ["-"], from_cluster))
    flows = validated(
        lambda: traced_flows(
            source,
            destination,
            port,
            method=method,
            path=path,
            dns=dns,
            node_labels=node_labels or (),
        )
    )
    answered = workers.run(
        "trace", request, flows, kube_dir, session.evidence_store, cancel=CANCEL.get()
    )
    return _why_result(answered, 200, None)
