"""One typed request for a run (replay, live capture, an MCP session), validated once.

The CLI builds it from flags, cpg-mcp from tool arguments, a notebook from keywords; the run
layer (``cpg_io.runs``) takes it whole. Every check lives in :meth:`RunRequest.build`, so the
two roots cannot drift: a :class:`~cpg_core.RequestError` names the neutral field and
each root words it its own way."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs

from cpg_core._base.cilium_version import Version
from cpg_core._base.errors import Setting
from cpg_core._base.request_error import RequestError
from cpg_core._flows.attribution import time_key
from cpg_core._flows.decide import DecideOptions
from cpg_core._flows.filters import FlowFilter
from cpg_core._policy.agent import AgentChoice, AgentSettings, agent_settings
from cpg_core._requests.options import Request, defaults
from cpg_core._requests.requests import (
    CaptureRequest,
    LiveRequest,
    TimeWindow,
    catalogue_sources,
    duration_seconds,
)
from cpg_core._review.readiness import ReadinessRules
from cpg_core._synthesis.aggregate import AggregateOptions
from cpg_core.text import shown

EngineKind = Literal["local", "dask"]
ENGINES: tuple[EngineKind, ...] = ("local", "dask")
"""Byte ranges a Dask worker reads of a plain object (64 MiB)."""
_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "kb": 1000,
    "mb": 10**6,
    "gb": 10**9,
}


def parse_size(text: str, field: str) -> int:
    """Bytes in ``64MiB``, ``1GiB``, ``500MB`` or a plain number (at least 1 MiB)."""
    spec = text.strip()
    number = spec.rstrip("BbIiKkMmGg")
    unit = spec[len(number) :].lower()
    if not number.isdigit() or unit not in _SIZE_UNITS or int(number) * _SIZE_UNITS[unit] < 1 << 20:
        raise RequestError(
            field, f"{shown(text)}: give a size of at least 1MiB, such as 64MiB, 1GiB or 500MB"
        )
    return int(number) * _SIZE_UNITS[unit]


def _table_values(request: Request, given: Mapping[str, Any]) -> dict[str, Any]:
    """The option table's defaults for ``request``, with the values given; a name the table
    does not have is refused as Python refuses an unknown keyword."""
    values = defaults(request)
    unknown = sorted(set(given) - set(values))
    if unknown:
        raise TypeError(f"unexpected keyword argument(s) for a {request} request: {unknown}")
    values.update(given)
    return values


def _taken_by(builder: Callable[..., Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """The values whose names are parameters of ``builder`` (a part of the request)."""
    return {name: values[name] for name in _parameters(builder) if name in values}


@functools.cache
def _parameters(builder: Callable[..., Any]) -> tuple[str, ...]:
    return tuple(inspect.signature(builder).parameters)


def _check_run(values: Mapping[str, Any]) -> None:
    """The checks of a run's values that no part of the request makes itself."""
    if values["exit_code"] and not values["dry_run"]:
        raise RequestError("exit_code", "the exit code of a dry run needs dry_run")
    if values["verify"] and values["dry_run"]:
        raise RequestError("verify", "verify checks written files; leave out dry_run")
    if values["min_flows"] < 1:
        raise RequestError("min_flows", f"{values['min_flows']}: must be 1 or more")
    shared = values["shared"]
    if shared < 0 or shared == 1:
        raise RequestError(
            "shared", f"{shared}: a rule is shared by 2 or more workloads (0 turns sharing off)"
        )
    if values["baseline_format"] not in ("ccnp", "kcnp"):
        raise RequestError(
            "baseline_format", f"{shown(values['baseline_format'])}: use ccnp or kcnp"
        )
    if not 0 <= values["max_malformed"] <= 100:
        raise RequestError("max_malformed", f"{values['max_malformed']:g}: a percentage, 0 to 100")
    _check_evidence(values)
    _check_engine(values)


def _check_evidence(values: Mapping[str, Any]) -> None:
    if values["evidence_samples"] < 0:
        raise RequestError("evidence_samples", f"{values['evidence_samples']}: must be 0 or more")
    if values["evidence_sessions"] < 1:
        raise RequestError("evidence_sessions", f"{values['evidence_sessions']}: must be 1 or more")


def _check_engine(values: Mapping[str, Any]) -> None:
    engine = values["engine"]
    if engine not in ENGINES:
        raise RequestError("engine", f"{shown(engine)}: use local or dask")
    if values["jobs"] is not None and values["jobs"] < 1:
        raise RequestError("jobs", f"{values['jobs']}: must be 1 or more")
    if values["scheduler"] is not None and engine != "dask":
        raise RequestError("scheduler", "a scheduler needs the dask engine")
    if values["part_size"] is not None and engine != "dask":
        raise RequestError("part_size", "a part size needs the dask engine")


@attrs.frozen(slots=True, kw_only=True)
class EvidencePolicy:
    """Whether and how much evidence a run records."""

    record: bool = True
    samples: int = 10
    """Sample flows kept per rule."""
    sessions: int = 10
    """Sessions kept per policy (the oldest go first)."""
    redact: bool = False
    """Write no IP address of a sample flow (evidence committed to a public repository)."""


@attrs.frozen(slots=True, kw_only=True)
class EngineChoice:
    """Where a replay reads and aggregates the capture."""

    kind: EngineKind = "local"
    jobs: int | None = None
    """Worker processes (None: one per CPU, decided where the CPUs are known)."""
    scheduler: str | None = None
    """The Dask scheduler's address, or ``local:N`` (dask only; None: ``local:<jobs>``)."""
    part_bytes: int | None = None
    """Bytes per range task of a plain object (None: at most 64 MiB, and small
    enough that every worker thread gets several parts, decided where the workers are
    known)."""


@attrs.frozen(slots=True, kw_only=True)
class RunRequest:
    """Everything a run needs to know from the user, checked."""

    capture: CaptureRequest = attrs.Factory(CaptureRequest)
    window: TimeWindow = attrs.Factory(TimeWindow)
    min_flows: int = 1
    """Allow entries seen fewer times are held back (reported, not written)."""
    shared: int = 0
    """Rules at least this many workloads need are written once, in a shared policy (0:
    never; §D43)."""
    baseline_format: str = "ccnp"
    """``kcnp``: shared egress rules as Baseline ClusterNetworkPolicies where they can be
    (§D44)."""
    flow_filter: FlowFilter | None = None
    """Hubble-style filters: only the flows they select are used (the others are counted)."""
    evidence: EvidencePolicy = attrs.Factory(EvidencePolicy)
    dry_run: bool = False
    diff: bool = True
    """In a dry run, show a unified diff of what would change."""
    exit_code: bool = False
    """A dry run that would change files exits 3."""
    kustomize: bool = False
    max_malformed: float = 50.0
    identities: tuple[str, ...] = ()
    """Identity sources: files of CiliumEndpoints, CiliumIdentities and pods, or ``cluster``."""
    declarations: tuple[str, ...] = ()
    """Where the cluster's own objects come from (files, folders, or ``cluster``): what they
    declare the cluster depends on is kept open (§D58)."""
    readiness: ReadinessRules = attrs.Factory(ReadinessRules)
    """When a workload is ready to enforce (§D59)."""
    only_ready: bool = False
    """Write the policies of ready workloads only (the others' evidence still)."""
    fail_on_infra_drops: bool = False
    verify: bool = False
    """After writing, check that the policies admit every candidate flow."""
    engine: EngineChoice = attrs.Factory(EngineChoice)
    live: LiveRequest = attrs.Factory(LiveRequest)
    """Only a live capture reads these."""

    @classmethod
    def build(cls, *, flow_filter: FlowFilter | None = None, **given: Any) -> RunRequest:
        """Validate the user's values, named as the option table names the run options (the
        table gives each its default); RequestError names the first bad one. The options a
        part of the request takes (the capture's, the live session's) reach it by the
        names of its builder's parameters: nothing is relayed by a list of its own."""
        values = _table_values("run", given)
        _check_run(values)
        record = values["evidence"] and not values["dry_run"]
        capture = CaptureRequest.build(
            max_samples=values["evidence_samples"] if record else 0,
            **_taken_by(CaptureRequest.build, values),
        )
        window = TimeWindow.build(values["since"], values["until"])
        if values["engine"] == "dask" and window.relative:
            raise RequestError(
                "since",
                "a duration counts back from the newest flow, which this machine would have to "
                "read the whole archive to find; with the dask engine give RFC 3339 times "
                "(e.g. 2026-11-30T00:00:00Z)",
            )
        part_size = values["part_size"]
        return cls(
            capture=capture,
            window=window,
            min_flows=values["min_flows"],
            shared=values["shared"],
            baseline_format=values["baseline_format"],
            flow_filter=flow_filter if flow_filter is not None and not flow_filter.empty else None,
            evidence=EvidencePolicy(
                record=record,
                samples=values["evidence_samples"],
                sessions=values["evidence_sessions"],
                redact=values["evidence_redact"],
            ),
            dry_run=values["dry_run"],
            diff=values["diff"],
            exit_code=values["exit_code"],
            kustomize=values["kustomize"],
            max_malformed=values["max_malformed"],
            identities=identity_sources(values["identities"]),
            declarations=identity_sources(values["declarations"], "declarations"),
            readiness=readiness_rules(values),
            only_ready=values["only_ready"],
            fail_on_infra_drops=values["fail_on_infra_drops"],
            verify=values["verify"],
            engine=EngineChoice(
                kind="dask" if values["engine"] == "dask" else "local",
                jobs=values["jobs"],
                scheduler=values["scheduler"],
                part_bytes=parse_size(part_size, "part_size") if part_size else None,
            ),
            live=LiveRequest.build(**_taken_by(LiveRequest.build, values)),
        )

    def aggregate_options(self, since: str = "", until: str = "") -> AggregateOptions:
        """What the aggregator needs, with the window resolved to time keys."""
        return attrs.evolve(
            self.capture.aggregate_options(),
            since=since,
            until=until,
            flow_filter=self.flow_filter,
        )

    def live_window(self, now: str) -> tuple[str, str, float | None]:
        """(since, until, seconds to run) of a live capture started at ``now`` (RFC 3339):
        a duration counts back from now, and ``until`` must lie ahead (a live capture follows
        new flows; a past window is a replay's)."""
        first, last = self.window.resolve(now)
        stop_after = self.live.duration
        if self.window.until is not None:
            if isinstance(self.window.until, float) or last <= time_key(now):
                raise RequestError(
                    "until",
                    f"{shown(last or str(self.window.until))} is not a time in the future; a live "
                    "capture follows new flows (for a past window, capture with hubble observe "
                    "--since … --until … -o jsonpb and replay it with since/until)",
                )
            left = _seconds_between(now, last)
            stop_after = min(stop_after, left) if stop_after else left
        return first, last, stop_after

    def live_stop(self, now: str) -> tuple[float | None, float | None]:
        """When a live capture started at ``now`` stops by itself: (``duration``, counted
        from the connection to the relay, so a slow port-forward does not eat into it;
        seconds from ``now`` to ``until``, a time on the wall clock). None where not set."""
        _first, last, _stop_after = self.live_window(now)
        left = _seconds_between(now, last) if self.window.until is not None else None
        return self.live.duration, left


def identity_sources(given: Iterable[str] | None, field: str = "identities") -> tuple[str, ...]:
    """The identity (or declaration) sources as given (each once, in order); RequestError
    for a blank one."""
    chosen: list[str] = []
    for source in given or ():
        text = source.strip()
        if not text or "\x00" in text:
            raise RequestError(field, f"{shown(source)} is not a file, folder or cluster")
        if text not in chosen:
            chosen.append(text)
    return tuple(chosen)


def _policy_names(given: Iterable[str]) -> tuple[str, ...]:
    """``--only``'s policies (comma-separated too), each ``namespace/name`` or ``name``."""
    names = [n.strip() for item in given for n in str(item).split(",") if n.strip()]
    for name in names:
        if name.count("/") > 1 or not all(part for part in name.split("/")):
            raise RequestError(
                "only",
                f"{shown(name)} is not NAMESPACE/NAME (or NAME for a cluster-wide policy), "
                "as cpg plan names the policies",
            )
    return tuple(dict.fromkeys(names))


def readiness_rules(values: Mapping[str, Any]) -> ReadinessRules:
    """The readiness settings of a request's values; RequestError names a bad one."""
    flows = values["ready_min_flows"]
    if flows < 0:
        raise RequestError("ready_min_flows", f"{flows}: must be 0 or more")
    return ReadinessRules(
        min_span=duration_seconds(values["ready_min_span"], "ready_min_span", zero=True),
        stable_for=duration_seconds(values["ready_stable_for"], "ready_stable_for", zero=True),
        min_flows=flows,
    )


def _seconds_between(start: str, end: str) -> float:
    from datetime import datetime

    def moment(text: str) -> datetime:
        return datetime.fromisoformat(text.rstrip("Z")[:26] + "+00:00")

    return (moment(end) - moment(start)).total_seconds()


@attrs.frozen(slots=True, kw_only=True)
class CheckRequest:
    """What ``verify`` and ``plan`` check: a capture against policies, validated once.

    ``policies`` is the folder (or file) of the policies checked: the proposal, for plan.
    ``cluster`` adds the cluster's Cilium policies: verify checks them along with the folder;
    plan takes them as the policies applied today. ``current`` (plan only) names a folder or
    file of today's policies instead; with neither, plan infers today's from the flows."""

    inputs: tuple[str, ...]
    policies: str | None = "policies"
    current: str | None = None
    cluster: bool = False
    include_audit: bool = False
    agent: AgentChoice = attrs.Factory(AgentChoice)
    """Cilium's agent settings as given (allow-localhost, policy-default-local-cluster,
    enable-host-firewall, dual stack, bpf-policy-map-max, the release). None: as the
    cluster's agents say (``cluster``), else Cilium's default."""
    learn: str = ""
    """``forwarded``: check the flows that work today too, as replay --learn made rules."""
    include_system: bool = False
    """Check the denied flows of system-namespace workloads too (replay wrote their rules)."""
    identities: tuple[str, ...] = ()
    """Identity sources (files, or ``cluster``); with ``cluster`` set, the cluster is one."""
    policy_map_max: int | None = None
    """The agents' bpf-policy-map-max: the plan's policy map pressure is judged against it.
    None: as the cluster's agents say, else Cilium's default."""
    declarations: tuple[str, ...] = ()
    """Where the cluster's own objects come from (files, folders, or ``cluster``): a declared
    dependency the policies deny is reported (§D58)."""
    readiness: ReadinessRules = attrs.Factory(ReadinessRules)
    """When a workload is ready to enforce (§D59)."""
    only: tuple[str, ...] = ()
    """The proposed policies judged (``namespace/name``; empty: all): a rollout's batch."""
    catalogue: tuple[str, ...] = ()
    """Catalogue files of platform workloads, and ``none`` to leave out the built-in ones:
    verify counts their candidates apart, as replay left their rules out."""

    @classmethod
    def build(
        cls,
        *,
        inputs: Iterable[str],
        policies: str | None = "policies",
        **given: Any,
    ) -> CheckRequest:
        """Validate the user's values, named as the option table names the check options
        (the table gives each its default); RequestError names the first bad one."""
        values = _table_values("check", given)
        current, cluster = values["current"], values["cluster"]
        policy_map_max = values["policy_map_max"]
        chosen = tuple(inputs)
        if policy_map_max is not None and policy_map_max < 1:
            raise RequestError("policy_map_max", f"{policy_map_max}: must be 1 or more")
        if not chosen:
            raise RequestError("inputs", "give the capture to check (files, folders or -)")
        if current is not None and cluster:
            raise RequestError("current", "give the current policies or the cluster, not both")
        local = values["default_local_cluster"]
        if isinstance(local, str):
            word = local.strip().lower()
            if word not in ("true", "false", "auto"):
                raise RequestError(
                    "policy_default_local_cluster",
                    f"{shown(local)} is not true, false or auto (auto: as the cluster's "
                    "Cilium version does with ",
                    Setting("cluster"),
                    ", else true)",
                )
            local = None if word == "auto" else word == "true"
        localhost = values["allow_localhost"]
        if isinstance(localhost, str):
            word = localhost.strip().lower()
            if word not in ("always", "policy", "auto"):
                raise RequestError(
                    "allow_localhost",
                    f"{shown(localhost)} is not always, policy or auto (Cilium's "
                    "allow-localhost; always is its default, auto as the cluster's agents say)",
                )
            localhost = None if word == "auto" else word == "always"
        return cls(
            inputs=chosen,
            policies=policies,
            current=current,
            cluster=cluster,
            include_audit=values["include_audit"],
            agent=AgentChoice(
                allow_localhost=localhost,
                default_local_cluster=local,
                host_firewall=_tristate(values["host_firewall"], "host_firewall"),
                dual_stack=_tristate(values["dual_stack"], "dual_stack"),
                policy_map_max=policy_map_max,
                version=_release(values["cilium_version"]),
            ),
            learn=CaptureRequest.build(learn=values["learn"]).learn,
            include_system=values["include_system_namespaces"],
            identities=identity_sources(values["identities"]),
            declarations=identity_sources(values["declarations"], "declarations"),
            catalogue=catalogue_sources(values["catalogue"]),
            readiness=readiness_rules(values),
            only=_policy_names(values["only"]),
        )

    @property
    def identity_sources(self) -> tuple[str, ...]:
        """Where the identities come from: those given, and the cluster when its policies
        are read too."""
        if self.cluster and "cluster" not in self.identities:
            return (*self.identities, "cluster")
        return self.identities

    def resolve_agent(
        self, config: Mapping[str, str] | None = None, images: Sequence[str] = ()
    ) -> tuple[AgentSettings, tuple[str, ...]]:
        """The settings judged with, and notes: as given, else as the cluster's
        ``cilium-config`` and agent images say (read when ``cluster`` is set), else
        Cilium's defaults."""
        return agent_settings(self.agent, config, images, from_cluster=self.cluster)

    def decide_options(self, agent: AgentSettings | None = None) -> DecideOptions:
        localhost = agent.allow_localhost if agent is not None else self.agent.allow_localhost
        return CaptureRequest.build(
            include_audit=self.include_audit,
            learn=self.learn,
            allow_localhost=localhost is not False,
        ).decide_options()


@attrs.frozen(slots=True, kw_only=True)
class ShadowRequest:
    """What ``cpg shadow`` runs: the proposed policies (``check``, as ``cpg plan`` takes them)
    judged on the flows of a live capture (``live``: the relay, the window, the namespaces)."""

    check: CheckRequest
    live: RunRequest
    report: str | None = None
    """Where the plan so far is written at every flush (the JSON of ``cpg plan -o json``)."""


@attrs.frozen(slots=True, kw_only=True)
class DriftRequest:
    """What ``cpg drift`` checks: the applied policies (``check.policies``) against a capture
    (``check.inputs``) or, with ``live``, the flows of a live capture."""

    check: CheckRequest
    stale_after_days: float = 30.0
    live: RunRequest | None = None

    @classmethod
    def build(
        cls, *, check: CheckRequest, stale_after: str | None = None, live: RunRequest | None = None
    ) -> DriftRequest:
        days = 30.0
        if stale_after:
            days = duration_seconds(stale_after, "stale_after") / 86400
        return cls(check=check, stale_after_days=days, live=live)


_RELEASE = re.compile(r"v?(\d{1,3})\.(\d{1,3})(?:\.(\d{1,4}))?")


def _release(value: str | None) -> Version | None:
    """``1.19``, ``v1.19.3`` or ``auto`` (None: as the cluster's agents say)."""
    if value is None or value.strip().lower() in ("", "auto"):
        return None
    match = _RELEASE.fullmatch(value.strip())
    if match is None:
        raise RequestError(
            "cilium_version", f"{shown(value)} is not a Cilium release (1.19, v1.19.3) or auto"
        )
    return (int(match[1]), int(match[2]), int(match[3] or 0))


def _tristate(value: bool | str | None, field: str) -> bool | None:
    """A setting given as true, false or auto (None: as the cluster says)."""
    if value is None or isinstance(value, bool):
        return value
    word = value.strip().lower()
    if word not in ("true", "false", "auto"):
        raise RequestError(
            field,
            f"{shown(value)} is not true, false or auto (auto: as the cluster's agents say with ",
            Setting("cluster"),
            ", else false)",
        )
    return None if word == "auto" else word == "true"
