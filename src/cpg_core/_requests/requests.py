"""What a user asks cpg to do, validated once. The CLI builds these from flags and cpg-mcp
from tool arguments; both get the same checks and the same error texts, and only map the
neutral field name of a :class:`RequestError` to their own spelling (``--ignore-protocol`` or
``ignore_protocols``)."""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Iterable
from typing import Any

import attrs

from cpg_core._base.dropreasons import DropClass, classify_reason, parse_reason_name, reason_name
from cpg_core._base.flow import PROTOCOLS
from cpg_core._base.names import SHARED_FOLDER, is_dns1123_label, path_component_problem
from cpg_core._base.request_error import RequestError, split_values
from cpg_core._flows.attribution import NO_TIME, time_key
from cpg_core._flows.decide import DecideOptions
from cpg_core._flows.filters import FlowFilter
from cpg_core._policy.agent import AgentChoice
from cpg_core._review.explain import ExplainFilter
from cpg_core._synthesis.aggregate import AggregateOptions
from cpg_core._synthesis.catalogue import BUILTIN, Catalogue
from cpg_core._synthesis.scope import DEFAULT_SERVICE_NAMESPACES, ClusterScope
from cpg_core.text import shown

MAX_SECONDS = 10 * 365 * 86400
"""The longest duration cpg accepts anywhere (ten years)."""
_NEVER_RULES = frozenset({DropClass.INFRA, DropClass.TRANSIENT, DropClass.NOISE})
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """Seconds in ``90s``, ``30m``, ``1h30m``, ``2d``; ValueError naming the expected form."""
    spec = text.strip().lower()
    parts = _DURATION.findall(spec)
    if not spec or "".join(n + u for n, u in parts) != spec:
        raise ValueError(
            f"{shown(text)} is not a duration; use a number and a unit, e.g. 90s, 30m, 2h, 1h30m, 7d"
        )
    return sum(float(n) * _UNITS[u] for n, u in parts)


def parse_peer(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"{shown(text)} is not KEY=VALUE; e.g. app=frontend or namespace=shop")
    return key.strip(), value.strip()


def parse_cidr(text: str) -> str:
    try:
        return str(ipaddress.ip_network(text.strip(), strict=False))
    except ValueError:
        raise ValueError(f"{shown(text)} is not a CIDR; e.g. 10.0.0.0/8 or 2001:db8::/32") from None


def duration_seconds(
    text: str, field: str, *, maximum: float = MAX_SECONDS, zero: bool = False
) -> float:
    """A positive duration of at most ``maximum`` seconds (``zero``: or 0)."""
    if zero and text.strip() in ("0", "0s"):
        return 0.0
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise RequestError(field, str(exc)) from None
    if not seconds > 0:
        raise RequestError(field, f"{shown(text)} must be more than zero")
    if not math.isfinite(seconds) or seconds > maximum:
        raise RequestError(field, f"{shown(text)} is too long; at most {_describe(maximum)}")
    return seconds


def _describe(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def check_namespace(name: str, field: str = "namespace") -> str:
    if not is_dns1123_label(name):
        raise RequestError(
            field,
            f"{shown(name)} is not a valid namespace name (lower-case letters, digits and '-', "
            "at most 63)",
        )
    return name


def check_target(value: str, what: str) -> str:
    """A namespace or workload that names a policy: safe as a path component, and a namespace
    is a DNS-1123 label (or the folder of shared policies, which no namespace can be called)."""
    problem = path_component_problem(value)
    if (
        problem is None
        and what == "namespace"
        and value != SHARED_FOLDER
        and not is_dns1123_label(value)
    ):
        problem = "not a DNS-1123 label"
    if problem is not None:
        raise RequestError(what, f"{what} {shown(value)} is not valid: {problem}")
    return value


@attrs.frozen(slots=True, kw_only=True)
class CaptureRequest:
    """What a capture (replay, live, an MCP session) should turn into policies."""

    namespaces: tuple[str, ...] = ()
    exclude_namespaces: tuple[str, ...] = ()
    """Namespaces whose workloads get no policy (hubble observe's ``--not --namespace``)."""
    include_audit: bool = False
    ignore_protocols: tuple[str, ...] = ()
    ignore_drop_reasons: tuple[int, ...] = ()
    l7: bool = False
    l7_collapse_paths: bool = False
    max_samples: int = 10
    """Sample flows kept per rule (0 when no evidence is recorded)."""
    agent: AgentChoice = attrs.Factory(
        lambda: AgentChoice(allow_localhost=True, default_local_cluster=True)
    )
    """Cilium's agent settings the rules are written for: policy-default-local-cluster (on
    since 1.19; off, a selector without a cluster label selects every ClusterMesh cluster, so
    peers carry their cluster) and allow-localhost (always: the node's own traffic to its
    pods needs no rule)."""
    learn: str = ""
    """``forwarded``: flows that work today (FORWARDED, REDIRECTED) become rules too."""
    learn_allowed: bool = False
    """With ``learn``: also the flows a policy of the cluster already allowed."""
    scope: ClusterScope = attrs.Factory(ClusterScope)
    """How far the rules reach beyond the capture (§D47)."""
    catalogue: tuple[str, ...] = ()
    """Catalogue files of platform workloads (read by the run layer into ``scope``), and
    ``none`` when the built-in entries are left out (§D58)."""

    @classmethod
    def build(
        cls,
        *,
        namespace: Iterable[str] | None = None,
        all_namespaces: bool = False,
        exclude_namespace: Iterable[str] | None = None,
        include_audit: bool = False,
        ignore_protocols: Iterable[str] | None = None,
        ignore_drop_reasons: Iterable[str] | None = None,
        l7: bool = False,
        l7_collapse_paths: bool = False,
        max_samples: int = 10,
        policy_default_local_cluster: bool | str = True,
        learn: str | None = None,
        learn_allowed: bool = False,
        allow_localhost: bool | str = True,
        cluster_service_namespaces: int = DEFAULT_SERVICE_NAMESPACES,
        exact_peers: Iterable[str] | None = None,
        include_system_namespaces: bool = False,
        dns_rule: bool = True,
        catalogue: Iterable[str] | None = None,
    ) -> CaptureRequest:
        """Validate the user's values (lists may repeat or comma-separate); RequestError names
        the first bad one."""
        chosen = split_values(namespace or ())
        if chosen and all_namespaces:
            raise RequestError(
                "all_namespaces", "use either a namespace or all namespaces, not both"
            )
        for ns in chosen:
            check_namespace(ns)
        excluded = split_values(exclude_namespace or ())
        for ns in excluded:
            check_namespace(ns, "exclude_namespace")
        both = sorted(set(chosen) & set(excluded))
        if both:
            raise RequestError(
                "exclude_namespace", f"{', '.join(both)} is both asked for and excluded"
            )
        protocols = _protocols(ignore_protocols)
        reasons = _reasons(ignore_drop_reasons)
        if l7_collapse_paths and not l7:
            raise RequestError("l7_collapse_paths", "collapsing L7 paths needs L7 rules (l7)")
        if max_samples < 0:
            raise RequestError("max_samples", f"{max_samples} samples: must be 0 or more")
        local = _flag(
            policy_default_local_cluster,
            "policy_default_local_cluster",
            ("true", "false"),
            "is not true or false (false for ClusterMesh on Cilium before 1.19)",
        )
        mode = (learn or "").strip().lower()
        if mode not in ("", "forwarded"):
            raise RequestError(
                "learn", f"{shown(learn)} is not a learning mode; the one there is: forwarded"
            )
        if learn_allowed and not mode:
            raise RequestError("learn_allowed", "only means something with learn forwarded")
        localhost = _flag(
            allow_localhost, "allow_localhost", ("always", "policy"), "is not always or policy"
        )
        if cluster_service_namespaces < 0:
            raise RequestError(
                "cluster_service_namespaces",
                f"{cluster_service_namespaces}: must be 0 or more (0: only the DNS service)",
            )
        exact = _exact_peers(exact_peers)
        sources = catalogue_sources(catalogue)
        return cls(
            namespaces=tuple(dict.fromkeys(chosen)),
            exclude_namespaces=tuple(dict.fromkeys(excluded)),
            include_audit=include_audit,
            ignore_protocols=tuple(dict.fromkeys(protocols)),
            ignore_drop_reasons=tuple(dict.fromkeys(reasons)),
            l7=l7,
            l7_collapse_paths=l7_collapse_paths,
            max_samples=max_samples,
            agent=AgentChoice(allow_localhost=localhost, default_local_cluster=local),
            learn=mode,
            learn_allowed=learn_allowed,
            scope=ClusterScope(
                service_namespaces=cluster_service_namespaces,
                exact=frozenset(exact),
                include_system=include_system_namespaces,
                dns=dns_rule,
                catalogue=Catalogue() if NO_CATALOGUE in sources else BUILTIN,
            ),
            catalogue=sources,
        )

    @property
    def redundant_drop_reasons(self) -> list[str]:
        """Ignored reasons that never become rules anyway (worth a warning)."""
        return sorted(
            {reason_name(r) for r in self.ignore_drop_reasons if classify_reason(r) in _NEVER_RULES}
        )

    def decide_options(self) -> DecideOptions:
        return DecideOptions(
            include_audit=self.include_audit,
            ignore_protocols=frozenset(self.ignore_protocols),
            ignore_reasons=frozenset(self.ignore_drop_reasons),
            learn=bool(self.learn),
            learn_allowed=self.learn_allowed,
            allow_localhost=self.agent.allow_localhost is not False,
        )

    def aggregate_options(self) -> AggregateOptions:
        return AggregateOptions(
            decide=self.decide_options(),
            namespaces=frozenset(self.namespaces),
            excluded=frozenset(self.exclude_namespaces),
            max_samples=self.max_samples,
            l7=self.l7,
            collapse_paths=self.l7_collapse_paths,
            explicit_cluster=self.agent.default_local_cluster is False,
            scope=self.scope,
        )


MAX_INTERVAL = 86400.0
"""The longest connect timeout or flush interval (a day)."""


@attrs.frozen(slots=True, kw_only=True)
class LiveRequest:
    """Where and how a live capture runs (the connection's TLS files stay with the CLI)."""

    server: str = ""
    """Hubble Relay host:port; "" to port-forward to the hubble-relay pod."""
    timeout: float = 10.0
    flush_interval: float = 5.0
    duration: float | None = None
    cluster_dedup: bool = False
    evidence_interval: float = 60.0
    """Seconds between writes of the evidence of policies whose rules did not change."""
    relay_namespace: str = "kube-system"
    """Where to look for the hubble-relay pod when no server is given."""
    stable_for: float = 0.0
    """Seconds a policy must go without gaining a rule before it is written (0: at once)."""
    metrics_addr: str = ""
    """Where ``/metrics``, ``/healthz`` and ``/readyz`` are served ("": not at all)."""
    max_policies: int = 5000
    """Policies a live session keeps in memory (0: no cap)."""
    max_peers: int = 2000
    """Allow entries per policy a live session keeps in memory (0: no cap)."""
    max_rules: int = 200000
    """Allow entries in all a live session keeps in memory (0: no cap)."""
    max_kinds: int = 20000
    """Kinds of traffic a live shadow or drift judges (0: no cap)."""

    @classmethod
    def build(
        cls,
        *,
        server: str | None = None,
        timeout: str | None = None,
        flush_interval: str | None = None,
        duration: str | None = None,
        cluster_dedup: bool = False,
        metrics_addr: str | None = None,
        evidence_interval: str | None = None,
        relay_namespace: str | None = None,
        stable_for: str | None = None,
        max_policies: int = 5000,
        max_peers: int = 2000,
        max_rules: int = 200_000,
        max_kinds: int = 20_000,
    ) -> LiveRequest:
        address = (metrics_addr or "").strip()
        host, sep, port = address.rpartition(":")
        if address and (not sep or not port.isdigit() or int(port) > 65535):
            raise RequestError(
                "metrics_addr",
                f"{shown(address)}: give HOST:PORT, e.g. :9090 (every address, IPv4 and IPv6), "
                "0.0.0.0:9090 or [::1]:9090",
            )
        if ":" in host and not (host.startswith("[") and host.endswith("]")):
            raise RequestError(
                "metrics_addr",
                f"{shown(address)}: write an IPv6 address in brackets, e.g. [::1]:9090 or [::]:9090",
            )
        return cls(
            metrics_addr=address,
            server=(server or "").strip(),
            timeout=duration_seconds(timeout, "timeout", maximum=MAX_INTERVAL) if timeout else 10.0,
            flush_interval=(
                duration_seconds(flush_interval, "flush_interval", maximum=MAX_INTERVAL)
                if flush_interval
                else 5.0
            ),
            duration=duration_seconds(duration, "duration") if duration else None,
            cluster_dedup=cluster_dedup,
            evidence_interval=(
                duration_seconds(evidence_interval, "evidence_interval", maximum=MAX_INTERVAL)
                if evidence_interval
                else 60.0
            ),
            relay_namespace=_relay_namespace(relay_namespace),
            stable_for=duration_seconds(stable_for, "stable_for") if stable_for else 0.0,
            max_policies=_cap(max_policies, "max_policies"),
            max_peers=_cap(max_peers, "max_peers"),
            max_rules=_cap(max_rules, "max_rules"),
            max_kinds=_cap(max_kinds, "max_kinds"),
        )


def _relay_namespace(given: str | None) -> str:
    namespace = (given or "kube-system").strip()
    if given is not None:
        check_namespace(namespace, "relay_namespace")
    return namespace


def _cap(value: int, name: str) -> int:
    if value < 0:
        raise RequestError(name, f"{value}: must be 0 (no cap) or more")
    return value


def explain_filter(
    *,
    direction: str | None = None,
    port: str | int | None = None,
    peer: str | None = None,
    peer_cidr: str | None = None,
    http_method: str | None = None,
    http_path: str | None = None,
    dns_pattern: str | None = None,
    since: str | None = None,
    until: str | None = None,
    reference: str | None = None,
    samples_limit: int = 10,
) -> ExplainFilter:
    """Explain/evidence filters from user text. ``since``/``until`` are RFC 3339 times or
    durations counted back from ``reference`` (cpg explain: the newest evidence; cpg_core
    reads no clock)."""
    if direction not in (None, "ingress", "egress"):
        raise RequestError(
            "direction", f"{shown(direction)} is not a direction; use ingress or egress"
        )
    if port is not None:
        text = str(port).strip() if not isinstance(port, bool) else ""
        if not text.isdigit() or int(text) > 65535:
            raise RequestError("port", f"{shown(port)} is not a port number (or ICMP type)")
        port = str(int(text))
    try:
        peer_pair = parse_peer(peer) if peer is not None else None
    except ValueError as exc:
        raise RequestError("peer", str(exc)) from None
    try:
        cidr = parse_cidr(peer_cidr) if peer_cidr is not None else None
    except ValueError as exc:
        raise RequestError("peer_cidr", str(exc)) from None
    first, last = TimeWindow.build(since, until).resolve(reference)
    if samples_limit < 0:
        raise RequestError("samples_limit", f"{samples_limit}: must be 0 or more")
    return ExplainFilter(
        direction=direction,
        port=port,
        peer=peer_pair,
        peer_cidr=cidr,
        http_method=http_method.strip().upper() if http_method else None,
        http_path=http_path or None,
        dns_pattern=dns_pattern.strip().rstrip(".") if dns_pattern else None,
        since=first or None,
        until=last or None,
        samples_limit=samples_limit,
    )


def _time_before(now: str, seconds: float) -> str:
    """The time key ``seconds`` before ``now`` (both RFC 3339 UTC); the year 1 at the least."""
    from datetime import UTC, datetime, timedelta

    moment = datetime.fromisoformat(now.replace("Z", "+00:00")).astimezone(UTC)
    try:
        earlier = moment - timedelta(seconds=seconds)
    except OverflowError:
        earlier = datetime.min.replace(tzinfo=UTC)
    return earlier.strftime("%Y-%m-%dT%H:%M:%S.%f000Z").rjust(30, "0")


@attrs.frozen(slots=True)
class TimeWindow:
    """``--since``/``--until`` as given: an RFC 3339 time (kept as a time key), or a duration
    in seconds counted back from a reference the caller chooses (the newest flow of a capture,
    the newest evidence, or now)."""

    since: str | float | None = None
    until: str | float | None = None

    @classmethod
    def build(cls, since: str | None = None, until: str | None = None) -> TimeWindow:
        window = cls(_time_bound(since, "since"), _time_bound(until, "until"))
        if (
            isinstance(window.since, str)
            and isinstance(window.until, str)
            and window.since > window.until
        ):
            raise RequestError("since", "the window ends before it starts (since > until)")
        return window

    @property
    def bounded(self) -> bool:
        return self.since is not None or self.until is not None

    @property
    def relative(self) -> bool:
        return isinstance(self.since, float) or isinstance(self.until, float)

    def resolve(self, reference: str | None) -> tuple[str, str]:
        """(since, until) time keys, "" where unbounded. A duration counts back from
        ``reference`` (an RFC 3339 time); with none (no flow had a time) it bounds nothing."""
        keys = []
        for bound in (self.since, self.until):
            if isinstance(bound, float):
                keys.append(_time_before(reference, bound) if reference else "")
            else:
                keys.append(bound or "")
        since, until = keys
        if since and until and since > until:
            raise RequestError("since", "the window ends before it starts (since > until)")
        return since, until


@attrs.frozen(slots=True, kw_only=True)
class ExplainRequest:
    """What ``cpg explain`` and cpg-mcp's get_evidence ask of one policy's evidence: the
    workload, the rule filters, and a time window whose durations count back from the
    newest evidence (known only once it is read)."""

    namespace: str
    workload: str
    filter: ExplainFilter
    """The filters, the window not applied yet."""
    window: TimeWindow = attrs.Factory(TimeWindow)

    @classmethod
    def build(
        cls,
        *,
        namespace: str,
        workload: str,
        since: str | None = None,
        until: str | None = None,
        flows: FlowFilter | None = None,
        **filters: Any,
    ) -> ExplainRequest:
        """Validate the user's values (``filters`` as :func:`explain_filter` takes them);
        RequestError names the first bad one."""
        check_target(namespace, "namespace")
        check_target(workload, "workload")
        window = TimeWindow.build(since, until)
        checked = explain_filter(**filters)
        return cls(
            namespace=namespace,
            workload=workload,
            filter=attrs.evolve(checked, flows=None if flows is None or flows.empty else flows),
            window=window,
        )

    def filter_for(self, newest: str | None) -> ExplainFilter:
        """The filters with the window counted back from ``newest`` (the newest evidence)."""
        since, until = self.window.resolve(newest)
        return attrs.evolve(self.filter, since=since or None, until=until or None)


def _time_bound(text: str | None, field: str) -> str | float | None:
    if text is None:
        return None
    stripped = text.strip()
    if stripped[:1].isdigit() and ("T" in stripped or "-" in stripped[1:]):
        from datetime import datetime

        try:  # time_key trusts the forms Hubble writes; a person's text is checked first
            datetime.fromisoformat(stripped.replace("Z", "+00:00").replace("z", "+00:00"))
            key = time_key(stripped)
        except ValueError:
            key = NO_TIME
        if key == NO_TIME:
            raise RequestError(
                field,
                f"{shown(text)} is not an RFC 3339 time (e.g. 2026-11-02T10:00:00Z) or a "
                "duration (e.g. 2h, 30m, 7d)",
            )
        return key
    try:
        parse_duration(text)
    except ValueError:
        raise RequestError(
            field,
            f"{shown(text)} is not an RFC 3339 time (e.g. 2026-11-02T10:00:00Z) or a duration "
            "(e.g. 2h, 30m, 7d)",
        ) from None
    return duration_seconds(text, field)


def _protocols(values: Iterable[str] | None) -> list[str]:
    protocols = [p.lower() for p in split_values(values or ())]
    for proto in protocols:
        if proto not in PROTOCOLS:
            raise RequestError(
                "ignore_protocol",
                f"unknown protocol {shown(proto)}; valid values are {', '.join(PROTOCOLS)}",
            )
    return protocols


def _reasons(values: Iterable[str] | None) -> list[int]:
    reasons = []
    for name in split_values(values or ()):
        try:
            reasons.append(parse_reason_name(name))
        except ValueError as exc:
            raise RequestError("ignore_drop_reason", str(exc)) from None
    return reasons


def _flag(value: bool | str, field: str, words: tuple[str, str], problem: str) -> bool:
    """A setting given as a boolean, or as one of two words (the first meaning true)."""
    if not isinstance(value, str):
        return value
    word = value.strip().lower()
    if word not in words:
        raise RequestError(field, f"{shown(value)} {problem}")
    return word == words[0]


NO_CATALOGUE = "none"
"""The catalogue source that leaves the built-in platform workloads out."""


def catalogue_sources(given: Iterable[str] | None) -> tuple[str, ...]:
    """The catalogue sources as given (files, ``none``), each once; RequestError for a
    blank one."""
    chosen: list[str] = []
    for source in given or ():
        text = source.strip()
        if not text or "\x00" in text:
            raise RequestError(
                "catalogue", f"{shown(source)} is not a catalogue file or {NO_CATALOGUE}"
            )
        if text not in chosen:
            chosen.append(text)
    return tuple(chosen)


def _exact_peers(values: Iterable[str] | None) -> list[str]:
    exact = split_values(values or ())
    for name in exact:
        namespace, slash, workload = name.partition("/")
        if name != "*" and not (slash and namespace and workload):
            raise RequestError(
                "exact_peers",
                f"{shown(name)} is not NAMESPACE/WORKLOAD (as cpg explain takes it) or *",
            )
        if name != "*":
            check_target(namespace, "namespace")
            check_target(workload, "workload")
    return exact
