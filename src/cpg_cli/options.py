"""Options more than one command takes, declared once, and the one mapping from a
:class:`~cpg_core.RequestError` to the flag the user typed."""

from __future__ import annotations

import functools
import inspect
import logging
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from cpg_cli.command import StrictCommand as StrictCommand  # re-exported for the commands
from cpg_cli.command import output_format as output_format
from cpg_cli.command import output_option as output_option
from cpg_cli.words import flag
from cpg_core import PROTOCOLS, RequestError
from cpg_core.reports import formats
from cpg_core.why import FlowFilter

if TYPE_CHECKING:  # loaded when a command runs, not when its flags are listed (completion)
    from cpg_core import CheckRequest, RunRequest

T = TypeVar("T")
LOG_LEVELS = ("debug", "info", "warning", "error")


def validated(build: Callable[[], T]) -> T:
    """Run a request builder; a RequestError becomes a usage error (exit 2) naming the flag."""
    try:
        return build()
    except RequestError as exc:
        raise typer.BadParameter(exc.render(flag), param_hint=flag(exc.field)) from None


Namespaces = Annotated[
    list[str],
    typer.Option(
        "-n",
        "--namespace",
        metavar="NS",
        help="Only this namespace (repeat or comma-separate): replay writes only its policies; "
        "generate also asks Hubble only for flows from or to its pods.",
        show_default=False,
    ),
]
AllNamespaces = Annotated[
    bool, typer.Option("-A", "--all-namespaces", help="Every namespace (the default).")
]
OutputDir = Annotated[
    Path,
    typer.Option(
        "-d",
        "--output-dir",
        metavar="DIR",
        envvar="CPG_OUTPUT_DIR",
        help="The policy folder: DIR/<namespace>/<workload>.yaml.",
    ),
]
IncludeAudit = Annotated[
    bool,
    typer.Option(
        "--include-audit", help="Also turn AUDIT-verdict flows (policy audit mode) into rules."
    ),
]
IgnoreProtocols = Annotated[
    list[str],
    typer.Option(
        "--ignore-protocol",
        metavar="PROTO",
        help=f"Skip flows of this L4 protocol ({', '.join(PROTOCOLS)}); repeatable.",
        show_default=False,
    ),
]
IgnoreDropReasons = Annotated[
    list[str],
    typer.Option(
        "--ignore-drop-reason",
        metavar="REASON",
        help="Skip drops with this DropReason name (any case, e.g. CT_MAP_INSERTION_FAILED); "
        "repeatable. They are counted, never classified.",
        show_default=False,
    ),
]
DryRun = Annotated[
    bool,
    typer.Option(
        "--dry-run", help="Write nothing; print a unified diff of every file that would change."
    ),
]
ExitCode = Annotated[
    bool,
    typer.Option(
        "--exit-code",
        help="With --dry-run: exit 3 when any file would change (as git diff --exit-code).",
    ),
]
Since = Annotated[
    str | None,
    typer.Option(
        "--since",
        metavar="TIME|DURATION",
        help="Only flows at or after TIME (RFC 3339, e.g. 2026-11-02T10:00:00Z) or in the last "
        "DURATION (30m, 2h, 7d) before the newest flow of the capture. Flows outside are "
        "counted, not used.",
        show_default=False,
    ),
]
Until = Annotated[
    str | None,
    typer.Option(
        "--until",
        metavar="TIME|DURATION",
        help="Only flows at or before TIME, or up to DURATION before the newest flow.",
        show_default=False,
    ),
]
EvidenceRedact = Annotated[
    bool,
    typer.Option(
        "--evidence-redact",
        help="Write evidence without the IP addresses of its sample flows (for evidence "
        "committed to a public repository); pod names and labels stay.",
    ),
]


DefaultLocalCluster = Annotated[
    str,
    typer.Option(
        "--policy-default-local-cluster",
        metavar="true|false|auto",
        help="As the Cilium agent flag of that name (true since Cilium 1.19): a peer selector "
        "that names no cluster (io.cilium.k8s.policy.cluster) selects endpoints of the local "
        "cluster only. auto (the default): as the oldest agent's version says with --cluster, "
        "else true. Use false for ClusterMesh before 1.19.",
    ),
]


LocalClusterPeers = Annotated[
    str,
    typer.Option(
        "--policy-default-local-cluster",
        metavar="true|false",
        help="As the Cilium agent flag of that name (true since Cilium 1.19). false (ClusterMesh "
        "before 1.19, where a selector without a cluster label selects every cluster): "
        "endpoint peers carry io.cilium.k8s.policy.cluster of their cluster, local ones too.",
    ),
]


Learn = Annotated[
    str | None,
    typer.Option(
        "--learn",
        metavar="forwarded",
        help="Learn from the traffic that works today: FORWARDED, REDIRECTED and AUDIT flows "
        "become rules too (replies, the node's probes and health checks never do; flows a "
        "policy already allowed are counted and skipped). For a cluster without policies, or "
        "one in audit mode.",
        show_default=False,
    ),
]
LearnAllowed = Annotated[
    bool,
    typer.Option(
        "--learn-allowed",
        help="With --learn: also the flows a policy already allowed (to rewrite a folder).",
    ),
]


CurrentPolicies = Annotated[
    Path | None,
    typer.Option(
        "--current",
        metavar="DIR|FILE",
        help="The policies applied today, as YAML ('kubectl get cnp,ccnp -A -o yaml', "
        "lists included).",
        show_default=False,
    ),
]


ClusterPolicies = Annotated[
    bool,
    typer.Option(
        "--cluster",
        help="Read the policies applied today from the cluster (read-only: 'list' on "
        "ciliumnetworkpolicies and ciliumclusterwidenetworkpolicies).",
    ),
]


AllowLocalhost = Annotated[
    str,
    typer.Option(
        "--allow-localhost",
        metavar="always|policy",
        help="As the Cilium agent option of that name. always (Cilium's default): a pod's own "
        "node (kubelet probes) reaches it whatever the policy, so such traffic never breaks. "
        "policy: the node's traffic is policed like any other.",
    ),
]


Kustomize = Annotated[
    bool,
    typer.Option(
        "--kustomize",
        help="Keep a kustomization.yaml in each namespace folder (and one at the top) listing "
        "cpg's policy files, for kubectl apply -k, Argo CD and Flux; entries and files a human "
        "added are left alone.",
    ),
]
MinFlows = Annotated[
    int,
    typer.Option(
        "--min-flows",
        metavar="N",
        min=1,
        help="Hold back allow entries seen fewer than N times: they are listed in the report "
        "as held back, not written (in generate, written once they reach N).",
    ),
]
Quiet = Annotated[
    bool,
    typer.Option(
        "-q",
        "--quiet",
        help="No progress line on the terminal (there is none when stderr is not a terminal).",
    ),
]
NoDiff = Annotated[
    bool, typer.Option("--no-diff", help="With --dry-run, list the files without their diffs.")
]
LogLevel = Annotated[
    str,
    typer.Option(
        "--log-level",
        metavar="LEVEL",
        help=f"One of {', '.join(LOG_LEVELS)}; logs go to stderr.",
    ),
]
EvidenceDir = Annotated[
    Path | None,
    typer.Option(
        "--evidence-dir",
        metavar="DIR",
        envvar="CPG_EVIDENCE_DIR",
        help="Evidence root (default $XDG_CACHE_HOME/cpg/evidence, else ~/.cache/cpg/evidence).",
        show_default=False,
    ),
]
NoEvidence = Annotated[
    bool, typer.Option("--no-evidence", help="Do not record the flows behind each rule.")
]
EvidenceSamples = Annotated[
    int,
    typer.Option(
        "--evidence-samples", metavar="N", min=0, help="Sample flows kept per rule (newest)."
    ),
]
EvidenceSessions = Annotated[
    int,
    typer.Option(
        "--evidence-sessions", metavar="N", min=0, help="Runs kept per policy's evidence (newest)."
    ),
]
FailOnInfraDrops = Annotated[
    bool,
    typer.Option(
        "--fail-on-infra-drops",
        help="Exit with code 3 when any infrastructure or transient drop was seen "
        "(after everything was written): for CI and cron.",
    ),
]


Output = Annotated[
    str,
    output_option(
        *formats("run"),
        help="The report: text (for people) or json (for machines).",
    ),
]
L7 = Annotated[
    bool,
    typer.Option(
        "--l7",
        help="Turn HTTP requests into per-port HTTP rules and DNS queries into toFQDNs with "
        "a DNS rule on the resolver (needs L7 visibility: see README 'L7 rules').",
    ),
]
L7CollapsePaths = Annotated[
    bool,
    typer.Option(
        "--l7-collapse-paths",
        help="With --l7: path segments that are ids (digits, UUIDs, long hex) match any "
        "segment, so /users/17 and /users/42 give one rule.",
    ),
]
Kubeconfig = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig",
        "--kube-config",
        metavar="FILE",
        help="Kubeconfig (default $KUBECONFIG, else ~/.kube/config).",
        show_default=False,
    ),
]
Context = Annotated[
    str | None,
    typer.Option(
        "--context",
        "--kube-context",
        metavar="NAME",
        help="Kubeconfig context.",
        show_default=False,
    ),
]


Verify = Annotated[
    bool,
    typer.Option(
        "--verify",
        help="After writing, check that the policies admit every candidate flow and no "
        "explicitly denied one (as cpg verify does); exit 3 if they do not.",
    ),
]


MaxMalformed = Annotated[
    float,
    typer.Option(
        "--max-malformed",
        metavar="PCT",
        min=0,
        max=100,
        help="Fail (exit 1, nothing written) when more than PCT percent of the lines are "
        "not Hubble records. An input without any Hubble record always fails.",
    ),
]


Jobs = Annotated[
    int | None,
    typer.Option(
        "-j",
        "--jobs",
        metavar="N",
        min=1,
        help="Worker processes for large captures (default: one per CPU).",
        show_default=False,
    ),
]


Engine = Annotated[
    str,
    typer.Option(
        "--engine",
        metavar="local|dask",
        help="Where the capture is read and aggregated: local (worker processes on this "
        "machine) or dask (the workers of a Dask cluster read their files and byte ranges "
        "straight from storage; needs pip install 'cpg[dask]'). The output is the same.",
    ),
]


Scheduler = Annotated[
    str | None,
    typer.Option(
        "--scheduler",
        metavar="ADDRESS|local:N",
        help="With --engine dask: the Dask scheduler (e.g. tcp://dask-scheduler:8786), or "
        "local:N for a cluster of N worker processes on this machine (default: local:J, "
        "J from -j or one per CPU).",
        show_default=False,
    ),
]


PartSize = Annotated[
    str | None,
    typer.Option(
        "--part-size",
        metavar="SIZE",
        help="With --engine dask: plain (uncompressed) objects are read in byte ranges of "
        "this size, one task each (e.g. 64MiB, 1GiB); gzip objects are always one task. "
        "Default: 64MiB, or smaller (down to 4MiB) so that each worker thread gets about "
        "16 parts and all of them stay busy until the end.",
        show_default=False,
    ),
]


Server = Annotated[
    str | None,
    typer.Option(
        "-s",
        "--server",
        metavar="ADDR",
        envvar="HUBBLE_SERVER",
        help="Hubble Relay address host:port. Without it, cpg finds a running "
        "k8s-app=hubble-relay pod (--relay-namespace) and port-forwards to it through the "
        "Kubernetes API (--kubeconfig, --context).",
        show_default=False,
    ),
]


TLS = Annotated[bool, typer.Option("--tls", envvar="HUBBLE_TLS", help="Connect with TLS.")]


TLSCACert = Annotated[
    Path | None,
    typer.Option(
        "--tls-ca-cert",
        "--tls-ca-cert-files",
        metavar="FILE",
        envvar="HUBBLE_TLS_CA_CERT_FILES",
        help="CA bundle to trust (PEM).",
        show_default=False,
    ),
]


TLSClientCert = Annotated[
    Path | None,
    typer.Option(
        "--tls-client-cert",
        "--tls-client-cert-file",
        metavar="FILE",
        envvar="HUBBLE_TLS_CLIENT_CERT_FILE",
        help="Client certificate (PEM) for mutual TLS.",
        show_default=False,
    ),
]


TLSClientKey = Annotated[
    Path | None,
    typer.Option(
        "--tls-client-key",
        "--tls-client-key-file",
        metavar="FILE",
        envvar="HUBBLE_TLS_CLIENT_KEY_FILE",
        help="Client key (PEM) for mutual TLS.",
        show_default=False,
    ),
]


TLSServerName = Annotated[
    str | None,
    typer.Option(
        "--tls-server-name",
        metavar="NAME",
        envvar="HUBBLE_TLS_SERVER_NAME",
        help="Name to expect in the relay's certificate.",
        show_default=False,
    ),
]


Timeout = Annotated[
    str,
    typer.Option("--timeout", metavar="DURATION", help="How long to wait for the connection."),
]


FlushInterval = Annotated[
    str,
    typer.Option(
        "--flush-interval",
        metavar="DURATION",
        help="How often policies and evidence are written.",
    ),
]


Duration = Annotated[
    str | None,
    typer.Option(
        "--duration",
        metavar="DURATION",
        help="Stop by itself after this long (e.g. 10m).",
        show_default=False,
    ),
]


ClusterDedup = Annotated[
    bool,
    typer.Option(
        "--cluster-dedup",
        help="Do not write policies the cluster already has an equivalent cpg-managed "
        "policy for (lists ciliumnetworkpolicies labelled app.kubernetes.io/managed-by=cpg).",
    ),
]


RelayNamespace = Annotated[
    str, typer.Option("--relay-namespace", metavar="NS", help="Namespace of hubble-relay.")
]


LiveSince = Annotated[
    str | None,
    typer.Option(
        "--since",
        metavar="TIME|DURATION",
        help="Also take the flows Hubble still buffers from TIME (RFC 3339) or the last "
        "DURATION (30m, 2h), counted back from now as hubble observe does.",
        show_default=False,
    ),
]


LiveUntil = Annotated[
    str | None,
    typer.Option(
        "--until",
        metavar="TIME",
        help="Stop at TIME (RFC 3339, in the future); flows after it are not used.",
        show_default=False,
    ),
]


EvidenceInterval = Annotated[
    str,
    typer.Option(
        "--evidence-interval",
        metavar="DURATION",
        help="How often the evidence of policies whose rules did not change is written "
        "(their files are not touched); the last flush, on Ctrl+C or SIGTERM, writes it "
        "all. A crash loses at most this much evidence, never a rule.",
    ),
]


StableFor = Annotated[
    str | None,
    typer.Option(
        "--stable-for",
        metavar="DURATION",
        help="Write a policy only once it has gained no new rule for DURATION (e.g. 10m), so a "
        "burst of new traffic does not churn the files; the summary lists the policies still "
        "waiting and since when. Default: write at every flush.",
        show_default=False,
    ),
]


def policy_folder(help: str, **extra: Any) -> Any:
    """The ``-d/--output-dir/--policies DIR`` option of a command that reads a policy folder
    (the folder replay and generate write), with that command's words for it."""
    return typer.Option(
        "-d",
        "--output-dir",
        "--policies",
        metavar="DIR",
        envvar="CPG_OUTPUT_DIR",
        help=help,
        rich_help_panel="Input",
        **extra,
    )


PANELS: dict[str, tuple[str, ...]] = {
    "Input": (
        "Namespaces",
        "AllNamespaces",
        "IncludeAudit",
        "IgnoreProtocols",
        "IgnoreDropReasons",
        "Learn",
        "LearnAllowed",
        "MaxMalformed",
    ),
    "Output": (
        "OutputDir",
        "Output",
        "DryRun",
        "NoDiff",
        "ExitCode",
        "Kustomize",
        "MinFlows",
        "Verify",
        "FailOnInfraDrops",
    ),
    "Evidence": (
        "EvidenceDir",
        "NoEvidence",
        "EvidenceSamples",
        "EvidenceSessions",
        "EvidenceRedact",
        "EvidenceInterval",
    ),
    "L7": ("L7", "L7CollapsePaths"),
    "Time window": ("Since", "Until", "LiveSince", "LiveUntil", "Duration"),
    "Hubble Relay": (
        "Server",
        "TLS",
        "TLSCACert",
        "TLSClientCert",
        "TLSClientKey",
        "TLSServerName",
        "Timeout",
        "FlushInterval",
        "StableFor",
        "RelayNamespace",
    ),
    "Cluster": ("CurrentPolicies", "ClusterPolicies", "Kubeconfig", "Context", "ClusterDedup"),
    "Cilium semantics": ("DefaultLocalCluster", "LocalClusterPeers", "AllowLocalhost"),
    "Engine": ("Engine", "Jobs", "Scheduler", "PartSize"),
    "Logging": ("Quiet", "LogLevel"),
}
"""Which section of ``-h`` each shared option is listed in (kubectl groups its flags too)."""


def _set_panels() -> None:
    from typer.models import OptionInfo

    for panel, names in PANELS.items():
        for name in names:
            for info in globals()[name].__metadata__:
                if isinstance(info, OptionInfo):
                    info.rich_help_panel = panel


_set_panels()


_INVERTED = {"no_evidence": "evidence", "no_diff": "diff"}
"""Flags that switch a request field off."""
_SINGULAR = {"ignore_protocol": "ignore_protocols", "ignore_drop_reason": "ignore_drop_reasons"}
"""Repeatable flags spelled in the singular, as kubectl and hubble spell theirs."""


def run_request(flags: Mapping[str, Any]) -> RunRequest:
    """The run request of replay and generate from their flags (a command's ``locals()``):
    each flag named as a :meth:`RunRequest.build` keyword goes there, the others (output
    folders, formats, TLS files) stay with the command. Validated: a bad value is a usage
    error naming the flag."""
    from cpg_core import RunRequest

    fields = inspect.signature(RunRequest.build).parameters
    values: dict[str, Any] = {}
    for name, value in flags.items():
        if name in _INVERTED:
            values[_INVERTED[name]] = not value
        elif _SINGULAR.get(name, name) in fields:
            values[_SINGULAR.get(name, name)] = value
    request = validated(lambda: RunRequest.build(**values))
    if request.capture.redundant_drop_reasons:
        logging.getLogger("cpg").warning(
            "--ignore-drop-reason %s: already reported as infrastructure, transient or noise "
            "and never turned into rules; ignoring only hides them from the report",
            ", ".join(request.capture.redundant_drop_reasons),
        )
    return request


def check_request(flags: Mapping[str, Any], inputs: list[str]) -> CheckRequest:
    """The check request of plan, shadow, why, trace and drift from their flags (a command's
    ``locals()``) and the capture to judge: each flag named as a :meth:`CheckRequest.build`
    keyword goes there, folders as text. Validated: a bad value is a usage error."""
    from cpg_core import CheckRequest

    fields = inspect.signature(CheckRequest.build).parameters
    values: dict[str, Any] = {
        name: str(value) if isinstance(value, Path) else value
        for name, value in flags.items()
        if name in fields and name != "inputs"
    }
    return validated(lambda: CheckRequest.build(inputs=inputs, **values))


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time: while a progress line is drawn,
    that is rich's proxy, which prints the message above the line."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


_DASK_LOGGERS = ("distributed", "dask", "bokeh", "tornado")


def _quiet_dask(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING or not record.name.startswith(_DASK_LOGGERS)


def quiet_grpc() -> None:
    """grpcio logs a traceback of its own for a message it cannot decode; cpg reports the
    failed stream in one line (and reconnects), so grpcio's own log is silenced."""
    logging.getLogger("grpc").setLevel(logging.CRITICAL)


def setup_logging(level: str) -> None:
    """Logs to stderr at ``level`` (a usage error when it is not one of LOG_LEVELS)."""
    level = level.lower()
    if level not in LOG_LEVELS:
        raise typer.BadParameter(
            f"{level!r} is not one of {', '.join(LOG_LEVELS)}", param_hint="--log-level"
        )
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("cpg: %(levelname)s: %(message)s"))
    logging.basicConfig(level=getattr(logging, level.upper()), handlers=[handler], force=True)
    quiet_grpc()
    # Library warnings (urllib3's insecure-request warning…) go to the log, shown at debug.
    logging.captureWarnings(True)
    if level != "debug":  # the libraries' retry chatter; cpg says what failed
        for noisy in ("urllib3", "kubernetes", "websocket", "py.warnings"):
            logging.getLogger(noisy).setLevel(logging.CRITICAL)
        # Dask's chatter (workers starting, connections), whatever levels Dask sets on its
        # loggers when it is imported; its warnings stay.
        handler.addFilter(_quiet_dask)


# --- flow filters, as hubble observe spells them (why, verify, plan) -------------------------

_FILTERS = "Flow filters (as hubble observe)"


def _filter(*names: str, metavar: str, help: str) -> Any:
    return typer.Option(
        *names, metavar=metavar, help=help, show_default=False, rich_help_panel=_FILTERS
    )


FromPod = Annotated[
    list[str],
    _filter(
        "--from-pod",
        metavar="[NS/]POD",
        help="Flows from pods whose name starts so (namespace default: default).",
    ),
]
ToPod = Annotated[
    list[str], _filter("--to-pod", metavar="[NS/]POD", help="Flows to pods whose name starts so.")
]
Pod = Annotated[
    list[str],
    _filter("--pod", metavar="[NS/]POD", help="Flows from or to pods whose name starts so."),
]
FromLabel = Annotated[
    list[str],
    _filter(
        "--from-label", metavar="K=V[,K=V]", help="Flows from endpoints with all these labels."
    ),
]
ToLabel = Annotated[
    list[str],
    _filter("--to-label", metavar="K=V[,K=V]", help="Flows to endpoints with all these labels."),
]
Label = Annotated[
    list[str],
    _filter(
        "--label", metavar="K=V[,K=V]", help="Flows from or to endpoints with all these labels."
    ),
]
FromNamespace = Annotated[
    list[str], _filter("--from-namespace", metavar="NS", help="Flows from this namespace.")
]
ToNamespace = Annotated[
    list[str], _filter("--to-namespace", metavar="NS", help="Flows to this namespace.")
]
FilterPort = Annotated[
    list[str],
    _filter("--port", "--to-port", metavar="PORT", help="Flows to this destination port."),
]
FilterProtocol = Annotated[
    list[str],
    _filter(
        "--protocol",
        metavar="PROTO",
        help="Flows of this L4 protocol (TCP, UDP, SCTP, ICMPv4, ICMPv6).",
    ),
]
FilterVerdict = Annotated[
    list[str],
    _filter(
        "--verdict", metavar="VERDICT", help="Flows with this verdict (DROPPED, FORWARDED, AUDIT…)."
    ),
]
Uuid = Annotated[list[str], _filter("--uuid", metavar="UUID", help="The flow with this uuid.")]


FLOW_FILTERS: dict[str, Any] = {
    "from_pod": FromPod,
    "to_pod": ToPod,
    "pod": Pod,
    "from_label": FromLabel,
    "to_label": ToLabel,
    "label": Label,
    "from_namespace": FromNamespace,
    "to_namespace": ToNamespace,
    "port": FilterPort,
    "protocol": FilterProtocol,
    "verdict": FilterVerdict,
    "uuid": Uuid,
}
"""The filter flags, declared once: :func:`with_flow_filters` gives them to a command."""


NO_FILTER = FlowFilter()
"""Every flow (a command called with no filter flag)."""


def flow_filter(flags: Mapping[str, Any]) -> FlowFilter:
    """The FlowFilter of filter flags (name → the values given), validated."""
    values = {name: flags.get(name) or () for name in FLOW_FILTERS}
    return validated(lambda: FlowFilter.build(**values))


def with_flow_filters(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command the flow filter flags. The command takes ``flow_filter: FlowFilter``
    instead; the flags appear before its ``-o/--output`` in its help, in their own panel."""
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name != "flow_filter"]
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=[], annotation=kind)
        for name, kind in FLOW_FILTERS.items()
    ]
    before = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own if p.name != "output"]
    after = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own if p.name == "output"]

    @functools.wraps(command)
    def run(**values: Any) -> Any:
        chosen = {name: values.pop(name) for name in FLOW_FILTERS}
        return command(**values, flow_filter=flow_filter(chosen))

    # Typer passes every parameter by keyword, so all are keyword-only here.
    run.__signature__ = signature.replace(parameters=[*before, *added, *after])  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in [*before, *added, *after]}
    return run
