"""One typed request for a run (replay, live capture, an MCP session), validated once.

The CLI builds it from flags, cpg-mcp from tool arguments, a notebook from keywords; the run
layer (``cpg_io.runs``) takes it whole. Every check lives in :meth:`RunRequest.build`, so the
two roots cannot drift: a :class:`~cpg_core.RequestError` names the neutral field and
each root words it its own way."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import attrs

from cpg_core.base._errors import Setting
from cpg_core.base._request_error import RequestError
from cpg_core.flows._attribution import time_key
from cpg_core.flows._decide import DecideOptions
from cpg_core.flows._filters import FlowFilter
from cpg_core.requests._options import defaults
from cpg_core.requests._requests import (
    MAX_INTERVAL,
    CaptureRequest,
    LiveRequest,
    TimeWindow,
    check_namespace,
    duration_seconds,
)
from cpg_core.synthesis._aggregate import AggregateOptions
from cpg_core.text import shown

_RUN = defaults("run")
"""The builders' defaults are the option table's (one declaration, read by both roots)."""
_CHECK = defaults("check")

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


def _cap(value: int, name: str) -> int:
    if value < 0:
        raise RequestError(name, f"{value}: must be 0 (no cap) or more")
    return value


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
    """Percent of lines that may be malformed before the run fails and writes nothing."""
    fail_on_infra_drops: bool = False
    verify: bool = False
    """After writing, check that the policies admit every candidate flow."""
    engine: EngineChoice = attrs.Factory(EngineChoice)
    live: LiveRequest = attrs.Factory(LiveRequest)
    """Only a live capture reads these."""

    @classmethod
    def build(
        cls,
        *,
        namespace: Iterable[str] | None = _RUN["namespace"],
        all_namespaces: bool = _RUN["all_namespaces"],
        include_audit: bool = _RUN["include_audit"],
        ignore_protocols: Iterable[str] | None = _RUN["ignore_protocols"],
        ignore_drop_reasons: Iterable[str] | None = _RUN["ignore_drop_reasons"],
        l7: bool = _RUN["l7"],
        l7_collapse_paths: bool = _RUN["l7_collapse_paths"],
        policy_default_local_cluster: bool | str = _RUN["policy_default_local_cluster"],
        learn: str | None = _RUN["learn"],
        learn_allowed: bool = _RUN["learn_allowed"],
        allow_localhost: bool | str = _RUN["allow_localhost"],
        flow_filter: FlowFilter | None = None,
        since: str | None = _RUN["since"],
        until: str | None = _RUN["until"],
        min_flows: int = _RUN["min_flows"],
        shared: int = _RUN["shared"],
        baseline_format: str = _RUN["baseline_format"],
        cluster_service_namespaces: int = _RUN["cluster_service_namespaces"],
        exact_peers: Iterable[str] | None = _RUN["exact_peers"],
        include_system_namespaces: bool = _RUN["include_system_namespaces"],
        dns_rule: bool = _RUN["dns_rule"],
        evidence: bool = _RUN["evidence"],
        evidence_samples: int = _RUN["evidence_samples"],
        evidence_sessions: int = _RUN["evidence_sessions"],
        evidence_redact: bool = _RUN["evidence_redact"],
        dry_run: bool = _RUN["dry_run"],
        diff: bool = _RUN["diff"],
        exit_code: bool = _RUN["exit_code"],
        kustomize: bool = _RUN["kustomize"],
        max_malformed: float = _RUN["max_malformed"],
        fail_on_infra_drops: bool = _RUN["fail_on_infra_drops"],
        verify: bool = _RUN["verify"],
        engine: str = _RUN["engine"],
        jobs: int | None = _RUN["jobs"],
        scheduler: str | None = _RUN["scheduler"],
        part_size: str | None = _RUN["part_size"],
        server: str | None = _RUN["server"],
        timeout: str | None = _RUN["timeout"],
        flush_interval: str | None = _RUN["flush_interval"],
        metrics_addr: str | None = _RUN["metrics_addr"],
        duration: str | None = _RUN["duration"],
        evidence_interval: str | None = _RUN["evidence_interval"],
        stable_for: str | None = _RUN["stable_for"],
        max_policies: int = _RUN["max_policies"],
        max_peers: int = _RUN["max_peers"],
        max_rules: int = _RUN["max_rules"],
        max_kinds: int = _RUN["max_kinds"],
        cluster_dedup: bool = _RUN["cluster_dedup"],
        relay_namespace: str | None = _RUN["relay_namespace"],
        identities: Iterable[str] | None = _RUN["identities"],
    ) -> RunRequest:
        """Validate the user's values; RequestError names the first bad one."""
        if exit_code and not dry_run:
            raise RequestError("exit_code", "the exit code of a dry run needs dry_run")
        if verify and dry_run:
            raise RequestError("verify", "verify checks written files; leave out dry_run")
        if min_flows < 1:
            raise RequestError("min_flows", f"{min_flows}: must be 1 or more")
        if shared < 0 or shared == 1:
            raise RequestError(
                "shared",
                f"{shared}: a rule is shared by 2 or more workloads (0 turns sharing off)",
            )
        if baseline_format not in ("ccnp", "kcnp"):
            raise RequestError("baseline_format", f"{shown(baseline_format)}: use ccnp or kcnp")
        if not 0 <= max_malformed <= 100:
            raise RequestError("max_malformed", f"{max_malformed:g}: a percentage, 0 to 100")
        if evidence_samples < 0:
            raise RequestError("evidence_samples", f"{evidence_samples}: must be 0 or more")
        if evidence_sessions < 1:
            raise RequestError("evidence_sessions", f"{evidence_sessions}: must be 1 or more")
        if engine not in ENGINES:
            raise RequestError("engine", f"{shown(engine)}: use local or dask")
        if jobs is not None and jobs < 1:
            raise RequestError("jobs", f"{jobs}: must be 1 or more")
        if scheduler is not None and engine != "dask":
            raise RequestError("scheduler", "a scheduler needs the dask engine")
        if part_size is not None and engine != "dask":
            raise RequestError("part_size", "a part size needs the dask engine")
        record = evidence and not dry_run
        capture = CaptureRequest.build(
            namespace=namespace,
            all_namespaces=all_namespaces,
            include_audit=include_audit,
            ignore_protocols=ignore_protocols,
            ignore_drop_reasons=ignore_drop_reasons,
            l7=l7,
            l7_collapse_paths=l7_collapse_paths,
            max_samples=evidence_samples if record else 0,
            default_local_cluster=policy_default_local_cluster,
            learn=learn,
            learn_allowed=learn_allowed,
            allow_localhost=allow_localhost,
            cluster_service_namespaces=cluster_service_namespaces,
            exact_peers=exact_peers,
            include_system_namespaces=include_system_namespaces,
            dns_rule=dns_rule,
        )
        window = TimeWindow.build(since, until)
        if engine == "dask" and window.relative:
            raise RequestError(
                "since",
                "a duration counts back from the newest flow, which this machine would have to "
                "read the whole archive to find; with the dask engine give RFC 3339 times "
                "(e.g. 2026-11-30T00:00:00Z)",
            )
        live = LiveRequest.build(
            server=server,
            timeout=timeout,
            flush_interval=flush_interval,
            metrics_addr=metrics_addr,
            duration=duration,
            cluster_dedup=cluster_dedup,
        )
        relay_ns = (relay_namespace or "kube-system").strip()
        if relay_namespace is not None:
            check_namespace(relay_ns, "relay_namespace")
        live = attrs.evolve(
            live,
            evidence_interval=(
                duration_seconds(evidence_interval, "evidence_interval", maximum=MAX_INTERVAL)
                if evidence_interval
                else 60.0
            ),
            relay_namespace=relay_ns,
            stable_for=duration_seconds(stable_for, "stable_for") if stable_for else 0.0,
            max_policies=_cap(max_policies, "max_policies"),
            max_peers=_cap(max_peers, "max_peers"),
            max_rules=_cap(max_rules, "max_rules"),
            max_kinds=_cap(max_kinds, "max_kinds"),
        )
        return cls(
            capture=capture,
            window=window,
            min_flows=min_flows,
            shared=shared,
            baseline_format=baseline_format,
            flow_filter=flow_filter if flow_filter is not None and not flow_filter.empty else None,
            evidence=EvidencePolicy(
                record=record,
                samples=evidence_samples,
                sessions=evidence_sessions,
                redact=evidence_redact,
            ),
            dry_run=dry_run,
            diff=diff,
            exit_code=exit_code,
            kustomize=kustomize,
            max_malformed=max_malformed,
            identities=identity_sources(identities),
            fail_on_infra_drops=fail_on_infra_drops,
            verify=verify,
            engine=EngineChoice(
                kind="dask" if engine == "dask" else "local",
                jobs=jobs,
                scheduler=scheduler,
                part_bytes=parse_size(part_size, "part_size") if part_size else None,
            ),
            live=live,
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


def identity_sources(given: Iterable[str] | None) -> tuple[str, ...]:
    """The identity sources as given (each once, in order); RequestError for a blank one."""
    chosen: list[str] = []
    for source in given or ():
        text = source.strip()
        if not text or "\x00" in text:
            raise RequestError("identities", f"{shown(source)} is not a file or cluster")
        if text not in chosen:
            chosen.append(text)
    return tuple(chosen)


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
    default_local_cluster: bool | None = True
    """Cilium's policy-default-local-cluster: a selector without a cluster label selects the
    local cluster only (1.19+). None: as the cluster's agents do (``--cluster``: on from
    Cilium 1.19, off before), else on."""
    allow_localhost: bool = True
    """Cilium's allow-localhost: ``always`` (True, the default) admits the node's traffic to
    its own pods whatever the policy; ``policy`` (False) polices it."""
    learn: str = ""
    """``forwarded``: check the flows that work today too, as replay --learn made rules."""
    include_system: bool = False
    """Check the denied flows of system-namespace workloads too (replay wrote their rules)."""
    identities: tuple[str, ...] = ()
    """Identity sources (files, or ``cluster``); with ``cluster`` set, the cluster is one."""
    policy_map_max: int = 16_384
    """The agents' bpf-policy-map-max: the plan's policy map pressure is judged against it."""

    @classmethod
    def build(
        cls,
        *,
        inputs: Iterable[str],
        policies: str | None = "policies",
        current: str | None = _CHECK["current"],
        cluster: bool = _CHECK["cluster"],
        include_audit: bool = _CHECK["include_audit"],
        default_local_cluster: bool | str | None = _CHECK["default_local_cluster"],
        allow_localhost: bool | str = _CHECK["allow_localhost"],
        learn: str | None = _CHECK["learn"],
        include_system_namespaces: bool = _CHECK["include_system_namespaces"],
        identities: Iterable[str] | None = _CHECK["identities"],
        policy_map_max: int = _CHECK["policy_map_max"],
    ) -> CheckRequest:
        chosen = tuple(inputs)
        if policy_map_max < 1:
            raise RequestError("policy_map_max", f"{policy_map_max}: must be 1 or more")
        if not chosen:
            raise RequestError("inputs", "give the capture to check (files, folders or -)")
        if current is not None and cluster:
            raise RequestError("current", "give the current policies or the cluster, not both")
        local = default_local_cluster
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
        localhost = allow_localhost
        if isinstance(localhost, str):
            word = localhost.strip().lower()
            if word not in ("always", "policy"):
                raise RequestError(
                    "allow_localhost",
                    f"{shown(localhost)} is not always or policy (Cilium's allow-localhost; "
                    "always is its default)",
                )
            localhost = word == "always"
        return cls(
            inputs=chosen,
            policies=policies,
            current=current,
            cluster=cluster,
            include_audit=include_audit,
            default_local_cluster=local,
            allow_localhost=localhost,
            learn=CaptureRequest.build(learn=learn).learn,
            include_system=include_system_namespaces,
            identities=identity_sources(identities),
            policy_map_max=policy_map_max,
        )

    @property
    def identity_sources(self) -> tuple[str, ...]:
        """Where the identities come from: those given, and the cluster when its policies
        are read too."""
        if self.cluster and "cluster" not in self.identities:
            return (*self.identities, "cluster")
        return self.identities

    def decide_options(self) -> DecideOptions:
        return CaptureRequest.build(
            include_audit=self.include_audit,
            learn=self.learn,
            allow_localhost=self.allow_localhost,
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
