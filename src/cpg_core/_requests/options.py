"""Every option both front ends take, declared once: its name (the keyword of the request
builder that checks it), its value, default and words, how ``cpg`` spells it (flags, section,
commands) and whether cpg-mcp offers it (and why not). The request builders read their
defaults here; ``cpg_cli.options`` makes the Typer parameters and ``cpg_mcp.server`` the tool
arguments from it, and ``tests/test_parity.py`` walks it (ARCHITECTURE §L4)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

from cpg_core._base.flow import PROTOCOLS

Request = Literal["run", "check", "relay", "kube"]
"""The typed request an option belongs to: :class:`RunRequest`, :class:`CheckRequest`, the
relay's TLS settings, or the Kubernetes access of a command that reads the cluster."""

Value = Literal["flag", "int", "int?", "float", "text", "text?", "texts", "path?"]
"""What the user gives: a switch, a number, a text (``?``: may be left out), several texts,
a file or folder."""

_REPLAY = frozenset({"replay"})
_CAPTURES = frozenset({"replay", "generate"})
_LIVE = frozenset({"generate", "shadow"})
_RELAYS = frozenset({"generate", "shadow", "drift"})
_CHECKS = frozenset({"plan", "verify", "why", "trace", "shadow"})
_KUBE = frozenset(
    {"replay", "generate", "plan", "verify", "why", "trace", "shadow", "drift", "lint", "report"}
)


_SAME: Any = object()
"""A checked option's default where it is the run's."""


@attrs.frozen(slots=True, kw_only=True)
class Checked:
    """How check commands take a run's setting too: into their :class:`CheckRequest`, so that
    a check reads the capture as the run that wrote the policies did. cpg-mcp's sessions pass
    their own value to their checks (the tool argument is the run's)."""

    commands: frozenset[str]
    help: str = ""
    """Their words, where they are not the run's."""
    default: Any = _SAME
    metavar: str = ""
    panel: str = ""


@attrs.frozen(slots=True, kw_only=True)
class Option:
    name: str
    """The request builder's keyword (and the MCP argument, unless ``tool`` says otherwise)."""
    request: Request
    value: Value
    default: Any
    help: str
    """The command line's words (``-h``)."""
    flags: tuple[str, ...]
    commands: frozenset[str]
    """The ``cpg`` commands that take it into ``request``."""
    panel: str
    """The section of ``-h`` it is listed in."""
    metavar: str = ""
    param: str = ""
    """The command's parameter name when it is not ``name`` (a flag that switches the value
    off, a repeatable flag spelled in the singular)."""
    inverted: bool = False
    """The flag sets the value to False (``--no-evidence`` → ``evidence``)."""
    envvar: str = ""
    minimum: float | None = None
    maximum: float | None = None
    helps: Mapping[str, str] = attrs.field(factory=dict)
    """A command's own words for it, when they differ."""
    metavars: Mapping[str, str] = attrs.field(factory=dict)
    envvars: Mapping[str, str] = attrs.field(factory=dict)
    """A command's own environment variable ("": none), when it differs."""
    defaults: Mapping[str, Any] = attrs.field(factory=dict)
    """A command's own default, when it differs."""
    checked: Checked | None = None
    """A run setting the check commands take too."""
    tool: str = ""
    """The cpg-mcp argument name ("" with ``not_tool``: not offered)."""
    tool_help: str = ""
    """cpg-mcp's words (an agent reads them: no flag spellings)."""
    tool_value: Any = None
    """The argument's type when it is not the value's (``Literal`` choices, a bool)."""
    tool_default: Any = None
    not_tool: str = ""
    """Why a read-only server for agents does not take it."""

    @property
    def parameter(self) -> str:
        return self.param or self.name

    @property
    def requests(self) -> tuple[Request, ...]:
        return (self.request, "check") if self.checked is not None else (self.request,)

    def takes(self, command: str) -> bool:
        return command in self.commands or self._checks(command)

    def request_of(self, command: str) -> Request:
        """The request ``command`` reads it into."""
        return "check" if self._checks(command) else self.request

    def _checks(self, command: str) -> bool:
        return self.checked is not None and command in self.checked.commands

    def help_for(self, command: str) -> str:
        if self.checked is not None and self._checks(command):
            return self.helps.get(command, self.checked.help or self.help)
        return self.helps.get(command, self.help)

    def metavar_for(self, command: str) -> str:
        if self.checked is not None and self._checks(command):
            return self.metavars.get(command, self.checked.metavar or self.metavar)
        return self.metavars.get(command, self.metavar)

    def panel_for(self, command: str) -> str:
        if self.checked is not None and self._checks(command):
            return self.checked.panel or self.panel
        return self.panel

    def envvar_for(self, command: str) -> str:
        return self.envvars.get(command, self.envvar)

    def default_for(self, command: str) -> Any:
        return self.defaults.get(command, self.default_in(self.request_of(command)))

    def default_in(self, request: Request) -> Any:
        """Its default in the builder of ``request``."""
        if request == "check" and self.checked is not None and self.checked.default is not _SAME:
            return self.checked.default
        return self.default


def _o(
    name: str, request: Request, value: Value, default: Any, help: str, *flags: str, **more: Any
) -> Option:
    return Option(
        name=name, request=request, value=value, default=default, help=help, flags=flags, **more
    )


_NOT_DIRECT = "a session writes only into its own private folder; there is nothing to protect"

OPTIONS: tuple[Option, ...] = (
    # --- what a run reads ---------------------------------------------------------------------
    _o(
        "namespace",
        "run",
        "texts",
        (),
        "Only this namespace (repeat or comma-separate): replay writes only its policies; "
        "generate also asks Hubble only for flows from or to its pods.",
        "-n",
        "--namespace",
        metavar="NS",
        panel="Input",
        commands=frozenset({"replay", "generate", "shadow", "drift"}),
        envvars={"generate": "CPG_NAMESPACE"},  # the Deployment's settings (a ConfigMap)
        tool="namespace",
        tool_help="only flows from or to pods in these namespaces",
    ),
    _o(
        "all_namespaces",
        "run",
        "flag",
        False,
        "Every namespace (the default).",
        "-A",
        "--all-namespaces",
        panel="Input",
        commands=frozenset({"replay", "generate", "shadow"}),
        tool="all_namespaces",
        tool_help="observe every namespace (what happens anyway when no namespace is given); "
        "cannot be combined with namespace",
    ),
    _o(
        "exclude_namespace",
        "run",
        "texts",
        (),
        "Never write policies for workloads in this namespace (repeat or comma-separate), as "
        "hubble observe's --not --namespace; their flows still give the other end its rules.",
        "--exclude-namespace",
        metavar="NS",
        panel="Input",
        commands=frozenset({"replay", "generate"}),
        tool="exclude_namespace",
        tool_help="namespaces whose workloads get no policy (their traffic still gives the "
        "other end its rules)",
    ),
    _o(
        "include_audit",
        "run",
        "flag",
        False,
        "Also turn AUDIT-verdict flows (policy audit mode) into rules.",
        "--include-audit",
        panel="Input",
        commands=_CAPTURES,
        tool="include_audit",
        tool_help="also turn AUDIT-verdict flows into rules",
        helps={
            "verify": "Also check AUDIT-verdict flows, as replay does.",
            "shadow": "AUDIT flows are denied flows to fix, as in replay.",
            "drift": "AUDIT flows are drops too.",
        },
        checked=Checked(
            commands=frozenset({"plan", "verify", "shadow", "drift"}),
            help="AUDIT flows are candidates, as in replay.",
        ),
    ),
    _o(
        "ignore_protocols",
        "run",
        "texts",
        (),
        f"Skip flows of this L4 protocol ({', '.join(PROTOCOLS)}); repeatable.",
        "--ignore-protocol",
        metavar="PROTO",
        param="ignore_protocol",
        panel="Input",
        commands=_CAPTURES,
        tool="ignore_protocols",
        tool_help="skip flows of these protocols: tcp, udp, sctp, icmpv4, icmpv6",
    ),
    _o(
        "ignore_drop_reasons",
        "run",
        "texts",
        (),
        "Skip drops with this DropReason name (any case, e.g. CT_MAP_INSERTION_FAILED); "
        "repeatable. They are counted, never classified.",
        "--ignore-drop-reason",
        metavar="REASON",
        param="ignore_drop_reason",
        panel="Input",
        commands=_CAPTURES,
        tool="ignore_drop_reasons",
        tool_help="skip drops with these DropReason names",
    ),
    _o(
        "learn",
        "run",
        "text?",
        None,
        "Learn from the traffic that works today: FORWARDED, REDIRECTED and AUDIT flows "
        "become rules too (replies, the node's probes and health checks never do; flows a "
        "policy already allowed are counted and skipped). For a cluster without policies, or "
        "one in audit mode.",
        "--learn",
        metavar="forwarded",
        panel="Input",
        commands=_CAPTURES,
        tool="learn",
        tool_value=Literal["forwarded"] | None,
        tool_help="forwarded: learn from the traffic that works today (FORWARDED, REDIRECTED "
        "and AUDIT flows become rules; replies, node probes and health checks never do)",
        checked=Checked(
            commands=frozenset({"verify"}),
            help="Check the flows that work today too, as replay --learn forwarded made rules of "
            "them.",
        ),
    ),
    _o(
        "learn_allowed",
        "run",
        "flag",
        False,
        "With --learn: also the flows a policy already allowed (to rewrite a folder).",
        "--learn-allowed",
        panel="Input",
        commands=_CAPTURES,
        tool="learn_allowed",
        tool_help="with learn: also flows a policy already allowed",
    ),
    _o(
        "max_malformed",
        "run",
        "float",
        50.0,
        "Fail (exit 1, nothing written) when more than PCT percent of the lines are not "
        "Hubble records. An input without any Hubble record always fails.",
        "--max-malformed",
        metavar="PCT",
        minimum=0,
        maximum=100,
        panel="Input",
        commands=_REPLAY,
        tool="max_malformed",
        tool_help="replay_file: fail when more than this percent of its lines are not Hubble "
        "records (nothing is written)",
    ),
    _o(
        "since",
        "run",
        "text?",
        None,
        "Only flows at or after TIME (RFC 3339, e.g. 2026-11-02T10:00:00Z) or in the last "
        "DURATION (30m, 2h, 7d) before the newest flow of the capture. Flows outside are "
        "counted, not used.",
        "--since",
        metavar="TIME|DURATION",
        panel="Time window",
        commands=frozenset({"replay", "generate", "shadow", "drift"}),
        helps={
            live: "Also take the flows Hubble still buffers from TIME (RFC 3339) or the last "
            "DURATION (30m, 2h), counted back from now as hubble observe does."
            for live in ("generate", "shadow", "drift")
        },
        tool="since",
        tool_help="only flows from this RFC 3339 time, or the last DURATION (30m, 2h): counted "
        "back from the newest flow of a replay, from now when live (the relay's buffer)",
    ),
    _o(
        "until",
        "run",
        "text?",
        None,
        "Only flows at or before TIME, or up to DURATION before the newest flow.",
        "--until",
        metavar="TIME|DURATION",
        panel="Time window",
        commands=frozenset({"replay", "generate", "shadow", "drift"}),
        helps={
            live: "Stop at TIME (RFC 3339, in the future); flows after it are not used."
            for live in ("generate", "shadow", "drift")
        },
        metavars={live: "TIME" for live in ("generate", "shadow", "drift")},
        tool="until",
        tool_help="only flows up to this RFC 3339 time (a replay), or stop then (live: a time "
        "in the future)",
    ),
    # --- L7 and Cilium's semantics ------------------------------------------------------------
    _o(
        "l7",
        "run",
        "flag",
        False,
        "Turn HTTP requests into per-port HTTP rules and DNS queries into toFQDNs with a DNS "
        "rule on the resolver (needs L7 visibility: see docs/no-policies-yet.md, 'L7 rules').",
        "--l7",
        panel="L7",
        commands=_CAPTURES,
        tool="l7",
        tool_help="HTTP and DNS rules from L7 records",
    ),
    _o(
        "l7_collapse_paths",
        "run",
        "flag",
        False,
        "With --l7: path segments that are ids (digits, UUIDs, long hex) match any segment, "
        "so /users/17 and /users/42 give one rule.",
        "--l7-collapse-paths",
        panel="L7",
        commands=_CAPTURES,
        tool="l7_collapse_paths",
        tool_help="with l7: collapse HTTP paths that differ only in an ID segment (/users/123, "
        "/users/456) into one regex rule",
    ),
    _o(
        "policy_default_local_cluster",
        "run",
        "text",
        "true",
        "As the Cilium agent flag of that name (true since Cilium 1.19). false (ClusterMesh "
        "before 1.19, where a selector without a cluster label selects every cluster): "
        "endpoint peers carry io.cilium.k8s.policy.cluster of their cluster, local ones too.",
        "--policy-default-local-cluster",
        metavar="true|false",
        panel="Cilium semantics",
        commands=_CAPTURES,
        tool="policy_default_local_cluster",
        tool_value=bool,
        tool_default=True,
        tool_help="Cilium's policy-default-local-cluster (true since 1.19); false for "
        "ClusterMesh before 1.19: peers then carry their cluster label, local ones too",
    ),
    # --- what a run writes --------------------------------------------------------------------
    _o(
        "dry_run",
        "run",
        "flag",
        False,
        "Write nothing; print a unified diff of every file that would change.",
        "--dry-run",
        panel="Output",
        commands=_CAPTURES,
        not_tool=_NOT_DIRECT,
    ),
    _o(
        "diff",
        "run",
        "flag",
        True,
        "With --dry-run, list the files without their diffs.",
        "--no-diff",
        param="no_diff",
        inverted=True,
        panel="Output",
        commands=_CAPTURES,
        not_tool="a diff belongs to a dry run",
    ),
    _o(
        "exit_code",
        "run",
        "flag",
        False,
        "With --dry-run: exit 3 when any file would change (as git diff --exit-code).",
        "--exit-code",
        panel="Output",
        commands=_CAPTURES,
        not_tool="no process exits; stop_session returns the counts",
    ),
    _o(
        "kustomize",
        "run",
        "flag",
        False,
        "Keep a kustomization.yaml in each namespace folder (and one at the top) listing cpg's "
        "policy files, for kubectl apply -k, Argo CD and Flux: cpg's entries are marked '# cpg' "
        "and every other byte of a kustomization a person wrote is kept.",
        "--kustomize",
        panel="Output",
        commands=_CAPTURES,
        not_tool="no one applies a session's temp folder with kubectl -k",
    ),
    _o(
        "shared",
        "run",
        "int",
        10,
        "Write a rule at least N workloads need (same peer and ports: DNS, scraping, the "
        "ingress controller) once, in a policy of its own under _shared/ that selects exactly "
        "their pods, instead of in each workload's policy; 0 writes every rule in its "
        "workload's policy. Evidence stays per workload.",
        "--shared",
        metavar="N",
        minimum=0,
        panel="Output",
        commands=_CAPTURES,
        tool="shared",
        tool_help="rules at least this many workloads need are written once, in a shared "
        "policy under _shared/ selecting exactly their pods (0: every rule in its workload's "
        "policy)",
    ),
    _o(
        "cluster_service_namespaces",
        "run",
        "int",
        5,
        "A server port callers of at least N namespaces reach (the cluster's DNS always) "
        "admits the whole cluster (fromEntities: cluster) on that port, and a client that "
        "reaches pods of N namespaces on one port (a scraper, an ingress controller) reaches "
        "the whole cluster there: workloads the capture did not show keep working. 0: only "
        "the DNS service.",
        "--cluster-service-namespaces",
        metavar="N",
        minimum=0,
        panel="Cluster safety",
        commands=_CAPTURES,
        tool="cluster_service_namespaces",
        tool_help="a server port callers of this many namespaces reach (the cluster's DNS "
        "always) admits the whole cluster on it; a client reaching this many namespaces on "
        "one port reaches the whole cluster there (0: only the DNS service)",
    ),
    _o(
        "exact_peers",
        "run",
        "texts",
        (),
        "Write this workload (NAMESPACE/WORKLOAD, repeatable; * for all) with exactly the "
        "peers the capture shows, even where it serves or calls the whole cluster.",
        "--exact-peers",
        metavar="NS/WORKLOAD",
        param="exact_peer",
        panel="Cluster safety",
        commands=_CAPTURES,
        tool="exact_peers",
        tool_help="workloads (namespace/workload, or * for all) written with exactly the peers "
        "the capture shows, even where they serve or call the whole cluster",
    ),
    _o(
        "include_system_namespaces",
        "run",
        "flag",
        False,
        "Also write per-peer rules for workloads of kube-system, kube-public, "
        "kube-node-lease and Cilium's namespace (by default they get at most the rules of "
        "the services the whole cluster uses; what was left out is reported).",
        "--include-system-namespaces",
        panel="Cluster safety",
        commands=_CAPTURES,
        tool="include_system_namespaces",
        tool_help="also write per-peer rules for workloads of the system namespaces",
        checked=Checked(
            commands=frozenset({"verify"}),
            help="Check the denied flows of workloads in the system namespaces too, as replay "
            "--include-system-namespaces wrote rules for them (by default they are counted as"
            " left to you, not checked).",
            panel="Input",
        ),
    ),
    _o(
        "identities",
        "run",
        "texts",
        (),
        "Identity where Hubble leaves it out: a JSON or YAML file of CiliumEndpoints, "
        "CiliumIdentities and pods ('kubectl get ciliumendpoints,ciliumidentities,pods -A "
        "-o json'), or cluster to read them (read-only); repeatable. A peer reported as the "
        "world at a pod's IP, an identity number without labels and a pod without a stable "
        "label are filled in (an IP only when the pod name agrees or the pod is older than "
        "the flow).",
        "--identities",
        metavar="FILE|cluster",
        panel="Input",
        commands=_CAPTURES,
        tool="identities",
        tool_help="identity sources for peers Hubble left without identity: files of "
        "CiliumEndpoints, CiliumIdentities and pods (kubectl get … -o json) inside the folder "
        "the operator allowed with --allow-replay-dir, or cluster (the environment's "
        "kubeconfig, read-only)",
        checked=Checked(
            commands=frozenset({*_CHECKS, "drift"}),
            help="Identity where Hubble leaves it out, as replay --identities: files of "
            "CiliumEndpoints, CiliumIdentities and pods, or cluster (with --cluster, the "
            "cluster's are read too); repeatable.",
        ),
    ),
    _o(
        "declarations",
        "run",
        "texts",
        (),
        "What the cluster declares it depends on, kept open in every policy that polices one "
        "of its ends: files or folders of its objects ('kubectl get validatingwebhookconfigurations,"
        "mutatingwebhookconfigurations,apiservices,crds,services,endpointslices,pods,"
        "deployments,daemonsets,statefulsets,namespaces,servicemonitors,podmonitors,"
        "prometheuses -A -o yaml', rendered Helm or kustomize output), or cluster to list them "
        "(read-only); repeatable. Admission webhooks, aggregated APIs and CRD conversion "
        "webhooks (from kube-apiserver, on the Service's target port), Prometheus scrapes "
        "and discovery, and the node-local DNS cache beside every DNS rule.",
        "--declarations",
        metavar="FILE|DIR|cluster",
        panel="Input",
        commands=_CAPTURES,
        tool="declarations",
        tool_help="the cluster's own objects (webhook configurations, APIServices, CRDs, "
        "Services, EndpointSlices, workloads, namespaces, ServiceMonitors, PodMonitors, "
        "Prometheus resources) as YAML or JSON files inside the folder the operator allowed "
        "with --allow-replay-dir, or cluster (the environment's kubeconfig, read-only): what "
        "they declare the cluster depends on is kept open",
        helps={
            "plan": "What the cluster declares it depends on, as replay --declarations: files "
            "or folders of its objects, or cluster (read-only). Each declared dependency the "
            "proposal denies is traffic that would break (exit 3), with the object that "
            "declares it and the fix.",
            "lint": "What the cluster declares it depends on, as replay --declarations: files "
            "or folders of its objects, or cluster (read-only). A policy that denies a "
            "declared dependency is a finding (CPG045), naming the declaring object.",
            "report": "What the cluster declares it depends on, as replay --declarations: "
            "files or folders of its objects, or cluster (read-only). The report lists each "
            "declared dependency the policies deny.",
        },
        checked=Checked(
            commands=frozenset({"plan", "verify", "why", "trace", "lint", "report"}),
            help="What the cluster declares it depends on, as replay --declarations: files or "
            "folders of its objects, or cluster (read-only); a declared dependency the "
            "policies deny is reported with the object that declares it.",
        ),
    ),
    _o(
        "dns_rule",
        "run",
        "flag",
        True,
        "Do not give every policy with egress rules DNS (UDP and TCP 53) to the cluster's "
        "DNS service (found in the capture or the identities, else kube-system/"
        "k8s-app=kube-dns).",
        "--no-dns-rule",
        param="no_dns_rule",
        inverted=True,
        panel="Cluster safety",
        commands=_CAPTURES,
        tool="dns_rule",
        tool_help="give every policy with egress rules DNS (UDP and TCP 53) to the cluster's "
        "DNS service (default true)",
    ),
    _o(
        "catalogue",
        "run",
        "texts",
        (),
        "Platform workloads recognised by their labels (service mesh control planes, "
        "Prometheus, collectors, ingress controllers, certificate and policy webhooks) are "
        "left alone as a system namespace's are (docs/catalogue.md lists them): a YAML file of "
        "more entries, or none to leave the built-in ones out; repeatable.",
        "--catalogue",
        metavar="FILE|none",
        panel="Cluster safety",
        commands=_CAPTURES,
        tool="catalogue",
        tool_help="none to leave out the built-in catalogue of platform workloads (mesh "
        "control planes, Prometheus, collectors, ingress controllers, webhooks), which cpg "
        "otherwise leaves alone as a system namespace's; or catalogue files inside the "
        "folder the operator allowed with --allow-replay-dir",
        checked=Checked(
            commands=frozenset({"verify"}),
            help="The catalogue of platform workloads replay used (--catalogue FILE, or none): "
            "their denied flows the policies do not admit are counted as left to you, not "
            "checked.",
            panel="Input",
        ),
    ),
    _o(
        "baseline_format",
        "run",
        "text",
        "ccnp",
        "How shared egress rules are written: ccnp (Cilium's policies) or kcnp (Kubernetes "
        "ClusterNetworkPolicies in the Baseline tier, for the workloads whose egress they can "
        "hold whole, kept default-deny by a Baseline deny; needs Cilium 1.20). Shared ingress "
        "rules stay Cilium's: a Baseline deny cannot refuse traffic from outside the cluster.",
        "--baseline-format",
        metavar="ccnp|kcnp",
        panel="Output",
        commands=_CAPTURES,
        tool="baseline_format",
        tool_value=Literal["ccnp", "kcnp"],
        tool_help="ccnp: shared rules in Cilium policies; kcnp: shared egress rules as "
        "Kubernetes ClusterNetworkPolicies in the Baseline tier where they can hold a "
        "workload's egress whole",
    ),
    _o(
        "min_flows",
        "run",
        "int",
        1,
        "Hold back allow entries seen fewer than N times: they are listed in the report as "
        "held back, not written (in generate, written once they reach N).",
        "--min-flows",
        metavar="N",
        minimum=1,
        panel="Output",
        commands=_CAPTURES,
        tool="min_flows",
        tool_help="hold back allow rules seen fewer times than this (reported by stop_session, "
        "not written)",
    ),
    _o(
        "verify",
        "run",
        "flag",
        False,
        "After writing, check that the policies admit every candidate flow and no explicitly "
        "denied one (as cpg verify does); exit 3 if they do not.",
        "--verify",
        panel="Output",
        commands=_REPLAY,
        not_tool="an exit-code check of written files; get_plan answers for a session",
    ),
    _o(
        "fail_on_infra_drops",
        "run",
        "flag",
        False,
        "Exit with code 3 when any infrastructure or transient drop was seen (after "
        "everything was written): for CI and cron.",
        "--fail-on-infra-drops",
        panel="Output",
        commands=_CAPTURES,
        not_tool="an exit code; stop_session returns infra_drop_total instead",
    ),
    # --- evidence -----------------------------------------------------------------------------
    _o(
        "evidence",
        "run",
        "flag",
        True,
        "Do not record the flows behind each rule.",
        "--no-evidence",
        param="no_evidence",
        inverted=True,
        panel="Evidence",
        commands=_CAPTURES,
        not_tool="a session always records evidence: its query tools serve it",
    ),
    _o(
        "evidence_samples",
        "run",
        "int",
        10,
        "Sample flows kept per rule (newest).",
        "--evidence-samples",
        metavar="N",
        minimum=0,
        maximum=1000,
        panel="Evidence",
        commands=_CAPTURES,
        tool="evidence_samples",
        tool_help="sample flows kept per rule as evidence",
    ),
    _o(
        "evidence_sessions",
        "run",
        "int",
        10,
        "Runs kept per policy's evidence (newest).",
        "--evidence-sessions",
        metavar="N",
        minimum=0,
        panel="Evidence",
        commands=_CAPTURES,
        not_tool="a session's folder only ever holds that one session",
    ),
    _o(
        "evidence_redact",
        "run",
        "flag",
        False,
        "Write evidence without the IP addresses of its sample flows (for evidence committed "
        "to a public repository); pod names and labels stay.",
        "--evidence-redact",
        panel="Evidence",
        commands=_CAPTURES,
        tool="evidence_redact",
        tool_help="record no IP address of a sample flow in the evidence",
    ),
    _o(
        "evidence_interval",
        "run",
        "text?",
        "1m",
        "How often the evidence of policies whose rules did not change is written (their "
        "files are not touched); the last flush, on Ctrl+C or SIGTERM, writes it all. A crash "
        "loses at most this much evidence, never a rule.",
        "--evidence-interval",
        metavar="DURATION",
        panel="Evidence",
        commands=frozenset({"generate"}),
        envvar="CPG_EVIDENCE_INTERVAL",
        tool="evidence_interval",
        tool_help="how often the evidence of policies whose rules did not change is written "
        "(live sessions; default 1m)",
    ),
    # --- the engine ---------------------------------------------------------------------------
    _o(
        "engine",
        "run",
        "text",
        "local",
        "Where the capture is read and aggregated: local (worker processes on this machine) "
        "or dask (the workers of a Dask cluster read their files and byte ranges straight "
        "from storage; needs pip install 'cpg[dask]'). The output is the same.",
        "--engine",
        metavar="local|dask",
        panel="Engine",
        commands=_REPLAY,
        not_tool="a session replays inside the server's process; it starts no cluster for an agent",
    ),
    _o(
        "jobs",
        "run",
        "int?",
        None,
        "Worker processes for large captures (default: one per CPU).",
        "-j",
        "--jobs",
        metavar="N",
        minimum=1,
        panel="Engine",
        commands=_REPLAY,
        not_tool="as engine: the server forks no workers for an agent",
    ),
    _o(
        "scheduler",
        "run",
        "text?",
        None,
        "With --engine dask: the Dask scheduler (e.g. tcp://dask-scheduler:8786), or local:N "
        "for a cluster of N worker processes on this machine (default: local:J, J from -j or "
        "one per CPU).",
        "--scheduler",
        metavar="ADDRESS|local:N",
        panel="Engine",
        commands=_REPLAY,
        not_tool="as engine",
    ),
    _o(
        "part_size",
        "run",
        "text?",
        None,
        "With --engine dask: plain (uncompressed) objects are read in byte ranges of this "
        "size, one task each (e.g. 64MiB, 1GiB); gzip objects are always one task. Default: "
        "64MiB, or smaller (down to 4MiB) so that each worker thread gets about 16 parts and "
        "all of them stay busy until the end.",
        "--part-size",
        metavar="SIZE",
        panel="Engine",
        commands=_REPLAY,
        not_tool="as engine",
    ),
    # --- the relay (a live capture) -----------------------------------------------------------
    _o(
        "server",
        "run",
        "text?",
        None,
        "Hubble Relay address host:port. Without it, cpg finds a running k8s-app=hubble-relay "
        "pod (--relay-namespace) and port-forwards to it through the Kubernetes API "
        "(--kubeconfig, --context).",
        "-s",
        "--server",
        metavar="ADDR",
        envvar="HUBBLE_SERVER",
        panel="Hubble Relay",
        commands=_RELAYS,
        helps={
            "drift": "Watch live traffic from Hubble Relay at host:port instead of reading a "
            "capture (with --duration or --until; Ctrl+C stops and reports)."
        },
        envvars={"drift": ""},  # drift reads a capture unless told: HUBBLE_SERVER must not
        tool="server",
        tool_help="explicit Hubble Relay host:port; without it cpg port-forwards to the "
        "hubble-relay pod of cpg-mcp's environment kubeconfig",
    ),
    _o(
        "timeout",
        "run",
        "text?",
        None,
        "How long to wait for the connection.",
        "--timeout",
        metavar="DURATION",
        panel="Hubble Relay",
        commands=_RELAYS,
        defaults={c: "10s" for c in _RELAYS},
        tool="timeout",
        tool_help="connect timeout, e.g. 10s",
    ),
    _o(
        "flush_interval",
        "run",
        "text?",
        None,
        "How often policies and evidence are written.",
        "--flush-interval",
        metavar="DURATION",
        panel="Hubble Relay",
        commands=_LIVE,
        helps={"shadow": "How often the plan so far is judged (and the report rewritten)."},
        defaults={c: "5s" for c in _LIVE},
        envvars={"generate": "CPG_FLUSH_INTERVAL"},
        tool="flush_interval",
        tool_help="how often files are written, e.g. 5s",
    ),
    _o(
        "metrics_addr",
        "run",
        "text?",
        None,
        "Serve Prometheus metrics at http://HOST:PORT/metrics, with /healthz (the session's "
        "loop flushed within three intervals) and /readyz (receiving from the relay), for "
        "the probes of a pod; e.g. :9090 (every address, IPv4 and IPv6), [::1]:9090.",
        "--metrics-addr",
        metavar="HOST:PORT",
        panel="Hubble Relay",
        commands=_RELAYS,
        envvars={"generate": "CPG_METRICS_ADDR"},
        not_tool="a cpg-mcp session is watched through its tools (session_status), not scraped",
    ),
    _o(
        "duration",
        "run",
        "text?",
        None,
        "Stop by itself after this long (e.g. 10m).",
        "--duration",
        metavar="DURATION",
        panel="Time window",
        commands=_RELAYS,
        tool="duration",
        tool_help="stop the live capture by itself after this long",
    ),
    _o(
        "stable_for",
        "run",
        "text?",
        None,
        "Write a policy only once it has gained no new rule for DURATION (e.g. 10m), so a "
        "burst of new traffic does not churn the files; the summary lists the policies still "
        "waiting and since when. Default: write at every flush.",
        "--stable-for",
        metavar="DURATION",
        panel="Hubble Relay",
        commands=frozenset({"generate"}),
        not_tool="a session's policies are read through its tools, never applied from its "
        "folder: rewriting its files as rules arrive churns nothing anyone reviews",
    ),
    _o(
        "max_policies",
        "run",
        "int",
        5000,
        "Keep at most N policies in memory in this session: the flows of a new workload beyond "
        "them are counted and reported, not kept (a flood of new workloads cannot exhaust "
        "memory). 0: no cap.",
        "--max-policies",
        metavar="N",
        minimum=0,
        panel="Hubble Relay",
        commands=frozenset({"generate"}),
        tool="max_policies",
        tool_help="a live session keeps at most this many policies; flows of new workloads "
        "beyond are counted, not kept (0: no cap)",
    ),
    _o(
        "max_peers",
        "run",
        "int",
        2000,
        "Keep at most N allow entries (a peer and a port) per policy in this session: beyond "
        "them, flows of new peers are counted and reported, not kept. 0: no cap.",
        "--max-peers",
        metavar="N",
        minimum=0,
        panel="Hubble Relay",
        commands=frozenset({"generate"}),
        tool="max_peers",
        tool_help="a live session keeps at most this many allow entries per policy; flows of "
        "new peers beyond are counted, not kept (0: no cap)",
    ),
    _o(
        "max_rules",
        "run",
        "int",
        200000,
        "Keep at most N allow entries in all in this session (about 2.5 KB of memory each): "
        "beyond them, flows of new peers are counted and reported, not kept. 0: no cap.",
        "--max-rules",
        metavar="N",
        minimum=0,
        panel="Hubble Relay",
        commands=frozenset({"generate"}),
        tool="max_rules",
        tool_help="a live session keeps at most this many allow entries in all; flows of new "
        "peers beyond are counted, not kept (0: no cap)",
    ),
    _o(
        "max_kinds",
        "run",
        "int",
        20000,
        "Judge at most N kinds of traffic (two ends, a port, a request) in this session: flows "
        "of new kinds beyond them are counted and reported, not judged, and the verdict is "
        "then 'cannot judge' rather than 'nothing breaks'. Bounds memory and the time a flush "
        "takes (about 60 microseconds per kind). 0: no cap.",
        "--max-kinds",
        metavar="N",
        minimum=0,
        panel="Hubble Relay",
        commands=frozenset({"shadow", "drift"}),
        tool="max_kinds",
        tool_help="a shadow session judges at most this many kinds of traffic; flows of new "
        "kinds beyond are counted, not judged (0: no cap)",
    ),
    _o(
        "cluster_dedup",
        "run",
        "flag",
        False,
        "Do not write policies the cluster already has an equivalent cpg-managed policy for "
        "(lists ciliumnetworkpolicies labelled app.kubernetes.io/managed-by=cpg).",
        "--cluster-dedup",
        panel="Cluster",
        commands=frozenset({"generate"}),
        tool="cluster_dedup",
        tool_help="skip policies already applied in the cluster (lists ciliumnetworkpolicies "
        "labelled app.kubernetes.io/managed-by=cpg)",
    ),
    _o(
        "relay_namespace",
        "run",
        "text?",
        None,
        "Namespace of hubble-relay.",
        "--relay-namespace",
        metavar="NS",
        panel="Hubble Relay",
        commands=_LIVE,
        defaults={c: "kube-system" for c in _LIVE},
        tool="relay_namespace",
        tool_help="without server: the namespace of the hubble-relay pod to port-forward to "
        "(default kube-system)",
    ),
    _o(
        "tls",
        "relay",
        "flag",
        False,
        "Connect with TLS.",
        "--tls",
        envvar="HUBBLE_TLS",
        panel="Hubble Relay",
        commands=_RELAYS,
        tool="tls",
        tool_help="connect with TLS",
    ),
    _o(
        "tls_ca_cert",
        "relay",
        "path?",
        None,
        "CA bundle to trust (PEM).",
        "--tls-ca-cert",
        "--tls-ca-cert-files",
        metavar="FILE",
        envvar="HUBBLE_TLS_CA_CERT_FILES",
        panel="Hubble Relay",
        commands=_RELAYS,
        tool="tls_ca_cert",
        tool_help="the CA bundle (PEM) that signed the relay's certificate: a file inside "
        "the folder the operator allowed with --allow-tls-dir",
    ),
    _o(
        "tls_client_cert",
        "relay",
        "path?",
        None,
        "Client certificate (PEM) for mutual TLS.",
        "--tls-client-cert",
        "--tls-client-cert-file",
        metavar="FILE",
        envvar="HUBBLE_TLS_CLIENT_CERT_FILE",
        panel="Hubble Relay",
        commands=_RELAYS,
        tool="tls_client_cert",
        tool_help="a client certificate (PEM) for mutual TLS: a file inside the folder the "
        "operator allowed with --allow-tls-dir",
    ),
    _o(
        "tls_client_key",
        "relay",
        "path?",
        None,
        "Client key (PEM) for mutual TLS.",
        "--tls-client-key",
        "--tls-client-key-file",
        metavar="FILE",
        envvar="HUBBLE_TLS_CLIENT_KEY_FILE",
        panel="Hubble Relay",
        commands=_RELAYS,
        tool="tls_client_key",
        tool_help="the client certificate's key (PEM): a file inside the folder the operator "
        "allowed with --allow-tls-dir",
    ),
    _o(
        "tls_server_name",
        "relay",
        "text?",
        None,
        "Name to expect in the relay's certificate.",
        "--tls-server-name",
        metavar="NAME",
        envvar="HUBBLE_TLS_SERVER_NAME",
        panel="Hubble Relay",
        commands=_RELAYS,
        tool="tls_server_name",
        tool_help="the name to expect in the relay's certificate",
    ),
    # --- the policies judged (verify, plan, why, trace, shadow) -------------------------------
    _o(
        "current",
        "check",
        "path?",
        None,
        "The policies applied today, as YAML ('kubectl get cnp,ccnp -A -o yaml', lists included).",
        "--current",
        metavar="DIR|FILE",
        panel="Cluster",
        commands=frozenset({"plan", "why", "trace", "shadow"}),
        not_tool="a server reads no folder an agent names: from_cluster reads the cluster",
    ),
    _o(
        "cluster",
        "check",
        "flag",
        False,
        "Read the policies applied today from the cluster (read-only: 'list' on "
        "ciliumnetworkpolicies and ciliumclusterwidenetworkpolicies).",
        "--cluster",
        panel="Cluster",
        commands=frozenset({*_CHECKS, "lint"}),
        helps={
            "verify": "Also read the Cilium policies already in the cluster (read-only: needs "
            "'list' on ciliumnetworkpolicies and ciliumclusterwidenetworkpolicies).",
            "lint": "Also flag policies whose endpointSelector selects no pod in their "
            "namespace today, and every policy in the cluster that Cilium's operator marked "
            "Valid=False (read-only: 'list' on pods in those namespaces and on Cilium's "
            "policies).",
        },
        tool="from_cluster",
        tool_help="read the policies applied today from the cluster of cpg-mcp's kubeconfig "
        "(read-only); default false: infer what is policed from the flows",
    ),
    _o(
        "default_local_cluster",
        "check",
        "text",
        "auto",
        "As the Cilium agent flag of that name (true since Cilium 1.19): a peer selector that "
        "names no cluster (io.cilium.k8s.policy.cluster) selects endpoints of the local "
        "cluster only. auto (the default): as the oldest agent's version says with --cluster, "
        "else true. Use false for ClusterMesh before 1.19.",
        "--policy-default-local-cluster",
        metavar="true|false|auto",
        panel="Cilium semantics",
        commands=_CHECKS,
        not_tool="a session's own policy_default_local_cluster decides what its checks take",
    ),
    _o(
        "allow_localhost",
        "run",
        "text",
        "always",
        "As the Cilium agent option of that name. always (Cilium's default): a pod's own "
        "node (kubelet probes) reaches it whatever the policy, so such traffic never breaks. "
        "policy: the node's traffic is policed like any other.",
        "--allow-localhost",
        metavar="always|policy",
        panel="Cilium semantics",
        commands=_CAPTURES,
        tool="allow_localhost",
        tool_value=Literal["always", "policy"],
        tool_default="always",
        tool_help="Cilium's allow-localhost: always (its default) admits a pod's own node "
        "(kubelet probes) whatever the policy; policy polices it",
        checked=Checked(
            commands=frozenset({*_CHECKS, "drift"}),
            help="As the Cilium agent option of that name. always (Cilium's default): a pod's own "
            "node (kubelet probes) reaches it whatever the policy, so such traffic never "
            "breaks. policy: the node's traffic is policed like any other. auto (the "
            "default): as the agents' cilium-config says with --cluster, else always.",
            default="auto",
            metavar="always|policy|auto",
        ),
    ),
    _o(
        "host_firewall",
        "check",
        "text",
        "auto",
        "As the Cilium agent's enable-host-firewall. true: a clusterwide policy with a "
        "nodeSelector polices the node (host) it selects. false (Cilium's default): host "
        "policies are ignored and the node is not policed. auto (the default): as the "
        "agents' cilium-config says with --cluster, else false.",
        "--host-firewall",
        metavar="true|false|auto",
        panel="Cilium semantics",
        commands=frozenset({*_CHECKS, "drift"}),
        not_tool="a session's own host_firewall decides what its checks take",
    ),
    _o(
        "cilium_version",
        "check",
        "text",
        "auto",
        "The agents' Cilium release (X.Y or X.Y.Z). auto (the default): the oldest agent's "
        "with --cluster, else the newest. It decides --policy-default-local-cluster auto "
        "(on from 1.19), and the notes on what an older release reads otherwise (a "
        "NetworkPolicy's ipBlock-only ingress peer before 1.20).",
        "--cilium-version",
        metavar="X.Y|auto",
        panel="Cilium semantics",
        commands=frozenset({*_CHECKS, "drift", "lint"}),
        helps={
            "lint": "The Cilium release the policies are for (1.16 to 1.20, default the "
            "newest): its deprecations, the features it lacks (cluster-mesh entity, ** "
            "wildcards), the local-cluster default of ClusterMesh selectors and how it reads "
            "a NetworkPolicy's ipBlock-only ingress peer."
        },
        metavars={"lint": "X.Y"},
        defaults={"lint": "1.20"},
        not_tool="a session's checks take the version of the cluster's agents",
    ),
    _o(
        "dual_stack",
        "check",
        "text",
        "auto",
        "Whether the agents run IPv4 and IPv6 both (enable-ipv4 and enable-ipv6). true: a "
        "world address is also world-ipv4 or world-ipv6, and a world peer without an address "
        "is selected by no CIDR. auto (the default): as the agents' cilium-config says with "
        "--cluster, else false.",
        "--dual-stack",
        metavar="true|false|auto",
        panel="Cilium semantics",
        commands=frozenset({*_CHECKS, "drift"}),
        not_tool="a session's own dual_stack decides what its checks take",
    ),
    _o(
        "policy_map_max",
        "check",
        "int?",
        None,
        "The agents' bpf-policy-map-max (Cilium's default 16384; with --cluster, as the "
        "agents' cilium-config says): plan estimates each selected pod's policy map entries "
        "under the proposal and names the pods at 80 % of it or over (over: the agent cannot "
        "apply the policy; exit 3).",
        "--policy-map-max",
        metavar="N",
        minimum=1,
        panel="Cilium semantics",
        commands=frozenset({"plan", "shadow"}),
        tool="policy_map_max",
        tool_default=16_384,
        tool_help="the agents' bpf-policy-map-max (16384 by default): the plan names the pods "
        "whose estimated policy map entries reach 80 % of it",
    ),
    _o(
        "only",
        "check",
        "texts",
        (),
        "Judge only these proposed policies (NAMESPACE/NAME, or NAME for a cluster-wide one; "
        "repeat or comma-separate): one batch of a rollout, the others left out as if not "
        "proposed.",
        "--only",
        metavar="POLICY",
        panel="Readiness",
        commands=frozenset({"plan", "shadow"}),
        not_tool="a session judges its own policies, all of them",
    ),
    _o(
        "ready_min_span",
        "run",
        "text",
        "24h",
        "A workload is ready to enforce only once observed for DURATION, its first flow to "
        "its last (a day shows its daily cycle: a nightly job, a morning batch); shorter, "
        "it should keep learning.",
        "--ready-min-span",
        metavar="DURATION",
        panel="Readiness",
        commands=_CAPTURES,
        tool="ready_min_span",
        tool_help="a workload is ready to enforce once observed this long (a duration, default 24h)",
        checked=Checked(commands=frozenset({"plan", "report", "shadow", "propose"})),
    ),
    _o(
        "ready_stable_for",
        "run",
        "text",
        "6h",
        "A workload is ready to enforce only once no new rule appeared in the last DURATION "
        "of its observation (0: whenever).",
        "--ready-stable-for",
        metavar="DURATION",
        panel="Readiness",
        commands=_CAPTURES,
        tool="ready_stable_for",
        tool_help="and once no new rule appeared in the last part of its observation this long (default 6h)",
        checked=Checked(commands=frozenset({"plan", "report", "shadow", "propose"})),
    ),
    _o(
        "ready_min_flows",
        "run",
        "int",
        100,
        "A workload is ready to enforce only once its rules stand on N flows at least.",
        "--ready-min-flows",
        metavar="N",
        panel="Readiness",
        commands=_CAPTURES,
        minimum=0,
        tool="ready_min_flows",
        tool_help="and once its rules stand on this many flows (default 100)",
        checked=Checked(commands=frozenset({"plan", "report", "shadow", "propose"})),
    ),
    _o(
        "only_ready",
        "run",
        "flag",
        False,
        "Write the policies of the workloads ready to enforce only: the others keep learning "
        "(their evidence is written, so readiness accumulates over runs and restarts).",
        "--only-ready",
        panel="Readiness",
        commands=_CAPTURES,
        tool="only_ready",
        tool_help="write only the policies of workloads ready to enforce",
    ),
    # --- Kubernetes access --------------------------------------------------------------------
    _o(
        "kubeconfig",
        "kube",
        "path?",
        None,
        "Kubeconfig (default $KUBECONFIG, else ~/.kube/config; in a pod without either, its "
        "service account).",
        "--kubeconfig",
        "--kube-config",
        metavar="FILE",
        panel="Cluster",
        commands=_KUBE,
        not_tool="cpg-mcp reads the cluster with KUBECONFIG in its environment",
    ),
    _o(
        "context",
        "kube",
        "text?",
        None,
        "Kubeconfig context.",
        "--context",
        "--kube-context",
        metavar="NAME",
        panel="Cluster",
        commands=_KUBE,
        not_tool="as kubeconfig: the environment's current context",
    ),
)
"""Every shared option, in the order ``-h`` lists them within their sections."""


def options_of(command: str) -> list[Option]:
    """The options ``command`` takes, in table order."""
    return [o for o in OPTIONS if o.takes(command)]


def option(request: Request, name: str) -> Option:
    for entry in OPTIONS:
        if request in entry.requests and entry.name == name:
            return entry
    raise KeyError(f"no {request} option {name!r}")


def defaults(request: Request) -> dict[str, Any]:
    """Each option of ``request`` and its default, as the request builder takes them."""
    return {o.name: o.default_in(request) for o in OPTIONS if request in o.requests}
