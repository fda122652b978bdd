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

import attrs
import typer

from cpg_cli.command import (
    StrictCommand as StrictCommand,  # re-exported for the commands
    output_format as output_format,
    output_option as output_option,
)
from cpg_cli.words import flag
from cpg_core import Message, RequestError
from cpg_core.reports import formats
from cpg_core.why import FlowFilter

if TYPE_CHECKING:  # loaded when a command runs, not when its flags are listed (completion)
    from cpg_core import CheckRequest, RunRequest
    from cpg_io.evidence_store import EvidenceStore
    from cpg_io.hubble import TLSSettings
    from cpg_io.runs import RelayAccess

T = TypeVar("T")
LOG_LEVELS = ("debug", "info", "warning", "error")


def validated(build: Callable[[], T]) -> T:
    """Run a request builder; a RequestError becomes a usage error (exit 2) naming the flag."""
    try:
        return build()
    except RequestError as exc:
        raise typer.BadParameter(exc.render(flag), param_hint=flag(exc.field)) from None


OutputDir = Annotated[
    Path,
    typer.Option(
        "-d",
        "--output-dir",
        metavar="DIR",
        envvar="CPG_OUTPUT_DIR",
        help="The policy folder: DIR/<namespace>/<workload>.yaml.",
        rich_help_panel="Output",
    ),
]


Quiet = Annotated[
    bool,
    typer.Option(
        "-q",
        "--quiet",
        help="No progress line on the terminal (there is none when stderr is not a terminal).",
        rich_help_panel="Logging",
    ),
]
LogLevel = Annotated[
    str,
    typer.Option(
        "--log-level",
        metavar="LEVEL",
        help=f"One of {', '.join(LOG_LEVELS)}; logs go to stderr.",
        rich_help_panel="Logging",
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
        rich_help_panel="Evidence",
    ),
]


Output = Annotated[
    str,
    output_option(
        *formats("run"),
        help="The report: text (for people), json or yaml (for machines).",
        rich_help_panel="Output",
    ),
]


def folder_evidence(policies: Path | str | None, evidence_dir: Path | None) -> EvidenceStore | None:
    """The evidence of cpg's policy folder (``--evidence-dir``, else the folder's default),
    read to say what stands behind a rule that admits a flow; none when -d is no folder."""
    from cpg_io.evidence_store import EvidenceStore, default_evidence_root

    if policies is None or not Path(policies).is_dir():
        return None
    folder = Path(policies)
    return EvidenceStore(evidence_dir or default_evidence_root(folder), folder)


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


def run_request(options: Values, flow_filter: FlowFilter | None = None, **more: Any) -> RunRequest:
    """The run request of a command's shared options, its flow filters and what the command
    says itself (a check option a live capture also takes, a flag of its own). Validated: a
    bad value is a usage error naming the flag."""
    from cpg_core import RunRequest

    values = {**options.run, **more}
    if flow_filter is not None:
        values["flow_filter"] = flow_filter
    request = validated(lambda: RunRequest.build(**values))
    if request.capture.redundant_drop_reasons:
        logging.getLogger("cpg").warning(
            "--ignore-drop-reason %s: already reported as infrastructure, transient or noise "
            "and never turned into rules; ignoring only hides them from the report",
            ", ".join(request.capture.redundant_drop_reasons),
        )
    return request


def check_request(options: Values, inputs: list[str], **more: Any) -> CheckRequest:
    """The check request of a command's shared options, the capture to judge and what the
    command says itself (``policies``, as text). Validated: a bad value is a usage error."""
    from cpg_core import CheckRequest

    values = {**options.check, **{k: str(v) if isinstance(v, Path) else v for k, v in more.items()}}
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


class _FlagFormatter(logging.Formatter):
    """A logged :class:`~cpg_core.Message` names its settings as the CLI's flags."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        if isinstance(record.msg, Message) and not record.args:
            record.message = record.msg.render(flag)
        return super().formatMessage(record)


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
    handler.setFormatter(_FlagFormatter("cpg: %(levelname)s: %(message)s"))
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


# --- the shared options, from the one table (cpg_core's OPTIONS) ------------------------------

_KINDS: dict[str, Any] = {
    "flag": bool,
    "int": int,
    "int?": int | None,
    "float": float,
    "text": str,
    "text?": str | None,
    "texts": list[str],
    "path?": Path | None,
}


@functools.cache
def _options_table() -> tuple[Any, ...]:
    from cpg_core.options import OPTIONS

    return OPTIONS


def _annotated(entry: Any, command: str) -> Any:
    kwargs: dict[str, Any] = {
        "help": entry.help_for(command),
        "rich_help_panel": entry.panel_for(command),
    }
    metavar = entry.metavar_for(command)
    if metavar:
        kwargs["metavar"] = metavar
    if entry.envvar_for(command):
        kwargs["envvar"] = entry.envvar_for(command)
    # Whole bounds as ints, so that -h says 0<=x<=100 rather than 0.0<=x<=100.0.
    if entry.minimum is not None:
        kwargs["min"] = int(entry.minimum) if float(entry.minimum).is_integer() else entry.minimum
    if entry.maximum is not None and entry.value == "float":  # cpg-mcp caps the ints
        kwargs["max"] = int(entry.maximum) if float(entry.maximum).is_integer() else entry.maximum
    if entry.value in ("int?", "text?", "texts", "path?") and entry.default_for(command) is None:
        kwargs["show_default"] = False
    if entry.value == "texts":
        kwargs["show_default"] = False
    return Annotated[_KINDS[entry.value], typer.Option(*entry.flags, **kwargs)]


def _cli_default(entry: Any, command: str) -> Any:
    if entry.inverted:
        return False
    value = entry.default_for(command)
    if entry.value == "texts":
        return list(value or ())
    if entry.value == "path?" and value is not None:
        return Path(value)
    return value


@attrs.frozen
class Values:
    """What a command was given for the shared options, by request and option name."""

    run: dict[str, Any]
    check: dict[str, Any]
    relay: dict[str, Any]
    kube: dict[str, Any]

    def kube_access(self) -> tuple[Path | None, str | None]:
        return self.kube.get("kubeconfig"), self.kube.get("context")

    def access(self) -> RelayAccess:
        """How a live run reaches the relay and the cluster: ``--tls*``, ``--kubeconfig``,
        ``--context``."""
        from cpg_io.runs import RelayAccess

        kubeconfig, context = self.kube_access()
        return RelayAccess(tls=self.tls(), kubeconfig=kubeconfig, context=context)

    def tls(self) -> TLSSettings:
        """The relay's TLS of the ``--tls*`` flags."""
        from cpg_io.hubble import TLSSettings

        relay = self.relay
        return TLSSettings.from_flags(
            bool(relay.get("tls")),
            relay.get("tls_ca_cert"),
            relay.get("tls_client_cert"),
            relay.get("tls_client_key"),
            relay.get("tls_server_name"),
        )


def with_options(command: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the shared options its name takes in the table (cpg_core's OPTIONS).
    The command declares ``options: Values`` instead; they appear before its ``-o/--output``
    in its help, in their sections, with their defaults for this command."""

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        from cpg_core.options import options_of

        entries = options_of(command)
        signature = inspect.signature(function, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "options"]
        added = [
            inspect.Parameter(
                entry.parameter,
                inspect.Parameter.KEYWORD_ONLY,
                default=_cli_default(entry, command),
                annotation=_annotated(entry, command),
            )
            for entry in entries
        ]
        before = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own if p.name != "output"]
        after = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own if p.name == "output"]

        @functools.wraps(function)
        def run(**given: Any) -> Any:
            values: dict[str, dict[str, Any]] = {"run": {}, "check": {}, "relay": {}, "kube": {}}
            for entry in entries:
                value = given.pop(entry.parameter)
                request = entry.request_of(command)
                if entry.inverted:
                    value = not value
                elif entry.value == "path?" and value is not None and request == "check":
                    value = str(value)
                values[request][entry.name] = value
            return function(**given, options=Values(**values))

        params = [*before, *added, *after]
        run.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        return run

    return decorate
