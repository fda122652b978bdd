"""``cpg replay``: generate policies (and their evidence) from a captured flow file."""

from __future__ import annotations

import logging
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from cpg_cli.report import print_run, warn_about_run
from cpg_core.aggregate import AggregateOptions
from cpg_core.decide import DecideOptions
from cpg_core.dropreasons import DropClass, classify_reason, parse_reason_name, reason_name
from cpg_core.names import is_dns1123_label
from cpg_io.evidence_store import default_evidence_root
from cpg_io.parallel import default_jobs
from cpg_io.pipeline import EvidenceSettings
from cpg_io.pipeline import replay as run_replay
from cpg_io.sources import SourceError, describe_source
from cpg_io.store import StoreError
from cpg_io.verify import (
    PolicyLoadError,
    load_policies,
    summary_line,
    verify_capture,
    verify_json,
)

log = logging.getLogger("cpg")

PROTOCOLS = ("tcp", "udp", "sctp", "icmpv4", "icmpv6")
_NEVER_RULES = frozenset({DropClass.INFRA, DropClass.TRANSIENT, DropClass.NOISE})


class OutputFormat(StrEnum):
    text = "text"
    json = "json"


LOG_LEVELS = ("debug", "info", "warning", "error")


def split_values(values: list[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def check_namespaces(namespaces: list[str], all_namespaces: bool) -> None:
    if namespaces and all_namespaces:
        raise typer.BadParameter(
            "use either --namespace or --all-namespaces, not both", param_hint="-n/-A"
        )
    for ns in namespaces:
        if not is_dns1123_label(ns):
            raise typer.BadParameter(
                f"{ns!r} is not a valid namespace name (lower-case letters, digits and '-', at most 63)",
                param_hint="--namespace",
            )


def build_options(
    *,
    include_audit: bool,
    ignore_protocol: list[str],
    ignore_drop_reason: list[str],
    namespaces: list[str],
    max_samples: int,
    l7: bool,
    l7_collapse_paths: bool,
) -> AggregateOptions:
    """Aggregation options from the flags shared by replay and generate (validated)."""
    protocols = [p.lower() for p in split_values(ignore_protocol)]
    for proto in protocols:
        if proto not in PROTOCOLS:
            raise typer.BadParameter(
                f"unknown protocol {proto!r}; valid values are {', '.join(PROTOCOLS)}",
                param_hint="--ignore-protocol",
            )
    if l7_collapse_paths and not l7:
        raise typer.BadParameter("--l7-collapse-paths needs --l7", param_hint="--l7-collapse-paths")
    reasons: list[int] = []
    for name in split_values(ignore_drop_reason):
        try:
            reasons.append(parse_reason_name(name))
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--ignore-drop-reason") from None
    redundant = sorted({reason_name(r) for r in reasons if classify_reason(r) in _NEVER_RULES})
    if redundant:
        log.warning(
            "--ignore-drop-reason %s: already reported as infrastructure, transient or noise "
            "and never turned into rules; ignoring only hides them from the report",
            ", ".join(redundant),
        )
    return AggregateOptions(
        decide=DecideOptions(
            include_audit=include_audit,
            ignore_protocols=frozenset(protocols),
            ignore_reasons=frozenset(reasons),
        ),
        namespaces=frozenset(namespaces),
        max_samples=max_samples,
        l7=l7,
        collapse_paths=l7_collapse_paths,
    )


def setup_logging(level: str) -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, level.upper()),
        format="cpg: %(levelname)s: %(message)s",
        force=True,
    )
    if level != "debug":  # the libraries' retry chatter; cpg says what failed
        for noisy in ("urllib3", "kubernetes", "websocket"):
            logging.getLogger(noisy).setLevel(logging.CRITICAL)


def replay(
    file: Annotated[
        str,
        typer.Argument(
            metavar="FILE|-",
            help="Capture from 'hubble observe -o jsonpb' (plain or gzip), or - for stdin.",
            show_default=False,
        ),
    ],
    namespace: Annotated[
        list[str],
        typer.Option(
            "-n",
            "--namespace",
            help="Only write policies for workloads in this namespace (repeat or comma-separate).",
            show_default=False,
        ),
    ] = [],  # noqa: B006 - Typer reads the default, never mutates it
    all_namespaces: Annotated[
        bool,
        typer.Option(
            "-A", "--all-namespaces", help="Write policies for every namespace (the default)."
        ),
    ] = False,
    output_dir: Annotated[
        Path, typer.Option("-o", "--output-dir", help="Where policies are written.")
    ] = Path("policies"),
    include_audit: Annotated[
        bool,
        typer.Option(
            "--include-audit",
            help="Also turn AUDIT-verdict flows (policy audit mode) into rules.",
        ),
    ] = False,
    ignore_protocol: Annotated[
        list[str],
        typer.Option(
            "--ignore-protocol",
            help=f"Skip flows of this L4 protocol ({', '.join(PROTOCOLS)}); repeatable.",
            show_default=False,
        ),
    ] = [],  # noqa: B006
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Write nothing; print a unified diff of every file that would change."
        ),
    ] = False,
    no_diff: Annotated[
        bool, typer.Option("--no-diff", help="With --dry-run, list the files without their diffs.")
    ] = False,
    log_level: Annotated[
        str, typer.Option("--log-level", help=f"One of {', '.join(LOG_LEVELS)}; logs go to stderr.")
    ] = "warning",
    evidence_dir: Annotated[
        Path | None,
        typer.Option(
            "--evidence-dir",
            help="Evidence root (default $XDG_CACHE_HOME/cpg/evidence, else ~/.cache/cpg/evidence).",
            show_default=False,
        ),
    ] = None,
    no_evidence: Annotated[
        bool, typer.Option("--no-evidence", help="Do not record the flows behind each rule.")
    ] = False,
    evidence_samples: Annotated[
        int, typer.Option("--evidence-samples", min=0, help="Sample flows kept per rule (newest).")
    ] = 10,
    evidence_sessions: Annotated[
        int,
        typer.Option(
            "--evidence-sessions", min=0, help="Runs kept per policy's evidence (newest)."
        ),
    ] = 10,
    ignore_drop_reason: Annotated[
        list[str],
        typer.Option(
            "--ignore-drop-reason",
            metavar="REASON",
            help="Skip drops with this DropReason name (any case, e.g. CT_MAP_INSERTION_FAILED); "
            "repeatable. They are counted, never classified.",
            show_default=False,
        ),
    ] = [],  # noqa: B006
    fail_on_infra_drops: Annotated[
        bool,
        typer.Option(
            "--fail-on-infra-drops",
            help="Exit with code 3 when any infrastructure or transient drop was seen "
            "(after everything was written): for CI and cron.",
        ),
    ] = False,
    output: Annotated[
        OutputFormat,
        typer.Option(
            "--output",
            help="The report: text (for people) or json (for machines).",
            case_sensitive=False,
        ),
    ] = OutputFormat.text,
    l7: Annotated[
        bool,
        typer.Option(
            "--l7",
            help="Turn HTTP requests into per-port HTTP rules and DNS queries into toFQDNs with "
            "a DNS rule on the resolver (needs L7 visibility: see README 'L7 rules').",
        ),
    ] = False,
    l7_collapse_paths: Annotated[
        bool,
        typer.Option(
            "--l7-collapse-paths",
            help="With --l7: path segments that are ids (digits, UUIDs, long hex) match any "
            "segment, so /users/17 and /users/42 give one rule.",
        ),
    ] = False,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="After writing, check that the policies admit every candidate flow and no "
            "explicitly denied one (as cpg verify does); exit 3 if they do not.",
        ),
    ] = False,
    jobs: Annotated[
        int | None,
        typer.Option(
            "-j",
            "--jobs",
            min=1,
            help="Worker processes for large captures (default: one per CPU).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Generate policies from a captured Hubble flow file.

    Capture with:  hubble observe --verdict DROPPED -o jsonpb > drops.jsonl

    Only drops that a missing allow rule explains (POLICY_DENIED, and AUDIT with
    --include-audit) become rules. Explicit denies, infrastructure drops and reply packets are
    counted in the report and never allowed. Existing files are merged: rules and comments
    you added are kept, and a file is only rewritten when its content changes.

    Exit codes: 0 done, 1 something could not be read or written, 2 bad flags,
    3 --fail-on-infra-drops and infrastructure or transient drops were seen.
    """
    level = log_level.lower()
    if level not in LOG_LEVELS:
        raise typer.BadParameter(
            f"{log_level!r} is not one of {', '.join(LOG_LEVELS)}", param_hint="--log-level"
        )
    setup_logging(level)
    namespaces = split_values(namespace)
    check_namespaces(namespaces, all_namespaces)
    if verify and dry_run:
        raise typer.BadParameter(
            "--verify checks written files; drop --dry-run", param_hint="--verify"
        )
    record_evidence = not no_evidence and not dry_run
    options = build_options(
        include_audit=include_audit,
        ignore_protocol=ignore_protocol,
        ignore_drop_reason=ignore_drop_reason,
        namespaces=namespaces,
        max_samples=evidence_samples if record_evidence else 0,
        l7=l7,
        l7_collapse_paths=l7_collapse_paths,
    )
    try:
        evidence = (
            EvidenceSettings(
                root=evidence_dir or default_evidence_root(),
                max_samples=evidence_samples,
                max_sessions=evidence_sessions,
            )
            if record_evidence
            else None
        )
        result = run_replay(
            file,
            output_dir,
            options,
            dry_run=dry_run,
            diff=not no_diff,
            jobs=jobs or default_jobs(),
            evidence=evidence,
        )
    except (SourceError, StoreError) as exc:
        typer.echo(f"cpg: error: {exc}", err=True)
        raise typer.Exit(1) from None

    source = describe_source(file)
    agg = result.aggregator
    for line, why in result.stats.malformed_examples:
        log.warning("%s:%d: skipped malformed line: %s", source, line, why)
    warn_about_run(agg, source, l7=l7, include_audit=include_audit)
    failed = bool(result.failed or result.evidence_errors or result.stats.truncated)
    checked = None
    if verify and not failed:
        try:
            checked = verify_capture(file, load_policies(output_dir), options.decide)
        except (PolicyLoadError, SourceError) as exc:
            typer.echo(f"cpg: error: --verify: {exc}", err=True)
            failed = True
    verify_failed = checked is not None and not checked.passed
    code = 1 if failed else 3 if (fail_on_infra_drops and agg.infra_drops) or verify_failed else 0
    lines = []
    if checked is not None:
        lines = [
            f"  verify: {check.subject}: {check.result.reason}"
            for check in checked.checks
            if check.result.allowed == (check.kind == "explicit_deny")
        ]
        lines.append(f"Verify: {summary_line(checked)}")
    print_run(
        result,
        source=source,
        output_dir=output_dir,
        dry_run=dry_run,
        evidence=record_evidence,
        as_json=output is OutputFormat.json,
        exit_code=code,
        extra_json={"verify": verify_json(checked)} if checked is not None else None,
        extra_lines=lines,
    )
    if result.stats.truncated:
        typer.echo(
            f"cpg: error: {source}: {result.stats.truncated}; policies were generated from "
            "the flows read before that point",
            err=True,
        )
    if verify_failed:
        typer.echo("cpg: --verify: the policies do not admit every candidate flow", err=True)
    if code == 3 and agg.infra_drops and fail_on_infra_drops:
        typer.echo(
            f"cpg: {agg.infra_drops} infrastructure or transient drop(s) seen "
            "(--fail-on-infra-drops): see the report above",
            err=True,
        )
    if code:
        raise typer.Exit(code)
