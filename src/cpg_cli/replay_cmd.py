"""``cpg replay``: generate policies (and their evidence) from a captured flow file."""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path
from typing import Annotated

import attrs
import typer

from cpg_cli import options as opt
from cpg_cli.progress import ReplayProgress, on_terminal
from cpg_cli.report import print_run, warn_about_run
from cpg_cli.terminal import fail, say
from cpg_cli.words import flag
from cpg_core import CpgError, TimeWindow, to_data
from cpg_io.evidence_store import default_evidence_root
from cpg_io.parallel import default_jobs
from cpg_io.pipeline import EvidenceSettings
from cpg_io.pipeline import replay as run_replay
from cpg_io.sources import describe_source, expand_inputs, newest_time
from cpg_io.verify import load_policies, verify_capture

log = logging.getLogger("cpg")


def replay(
    inputs: Annotated[
        list[str],
        typer.Argument(
            metavar="FILE|DIR|GLOB|URL...|-",
            help="Captures from 'hubble observe -o jsonpb' or the Hubble exporter (plain or "
            "gzip): files, folders (every file inside, e.g. rotated events.log*), quoted glob "
            "patterns, - for stdin, or URLs (s3://bucket/prefix/*.log.gz, gs://…, az://…, "
            "file://…; pip install 'cpg[s3]', [gcs] or [azure]; credentials from the storage "
            "library's usual environment). Several are read as one capture.",
            show_default=False,
        ),
    ],
    namespace: opt.Namespaces = [],  # noqa: B006 - Typer reads the default, never mutates it
    all_namespaces: opt.AllNamespaces = False,
    output_dir: opt.OutputDir = Path("policies"),
    include_audit: opt.IncludeAudit = False,
    ignore_protocol: opt.IgnoreProtocols = [],  # noqa: B006
    dry_run: opt.DryRun = False,
    no_diff: opt.NoDiff = False,
    exit_code: opt.ExitCode = False,
    log_level: opt.LogLevel = "warning",
    evidence_dir: opt.EvidenceDir = None,
    no_evidence: opt.NoEvidence = False,
    evidence_samples: opt.EvidenceSamples = 10,
    evidence_sessions: opt.EvidenceSessions = 10,
    evidence_redact: opt.EvidenceRedact = False,
    ignore_drop_reason: opt.IgnoreDropReasons = [],  # noqa: B006
    fail_on_infra_drops: opt.FailOnInfraDrops = False,
    min_flows: opt.MinFlows = 1,
    kustomize: opt.Kustomize = False,
    since: opt.Since = None,
    until: opt.Until = None,
    output: opt.Output = "text",
    quiet: opt.Quiet = False,
    l7: opt.L7 = False,
    l7_collapse_paths: opt.L7CollapsePaths = False,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="After writing, check that the policies admit every candidate flow and no "
            "explicitly denied one (as cpg verify does); exit 3 if they do not.",
        ),
    ] = False,
    max_malformed: Annotated[
        float,
        typer.Option(
            "--max-malformed",
            metavar="PCT",
            min=0,
            max=100,
            help="Fail (exit 1, nothing written) when more than PCT percent of the lines are "
            "not Hubble records. An input without any Hubble record always fails.",
        ),
    ] = 50.0,
    jobs: Annotated[
        int | None,
        typer.Option(
            "-j",
            "--jobs",
            metavar="N",
            min=1,
            help="Worker processes for large captures (default: one per CPU).",
            show_default=False,
        ),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            metavar="local|dask",
            help="Where the capture is read and aggregated: local (worker processes on this "
            "machine) or dask (the workers of a Dask cluster read their files and byte ranges "
            "straight from storage; needs pip install 'cpg[dask]'). The output is the same.",
        ),
    ] = "local",
    scheduler: Annotated[
        str | None,
        typer.Option(
            "--scheduler",
            metavar="ADDRESS|local:N",
            help="With --engine dask: the Dask scheduler (e.g. tcp://dask-scheduler:8786), or "
            "local:N for a cluster of N worker processes on this machine (default: local:J, "
            "J from -j or one per CPU).",
            show_default=False,
        ),
    ] = None,
    part_size: Annotated[
        str,
        typer.Option(
            "--part-size",
            metavar="SIZE",
            help="With --engine dask: plain (uncompressed) objects are read in byte ranges of "
            "this size, one task each (e.g. 64MiB, 1GiB); gzip objects are always one task. "
            "Bigger parts mean fewer partial results to combine.",
        ),
    ] = "64MiB",
) -> None:
    """Generate policies from a captured Hubble flow file.

    Capture with:  hubble observe --verdict DROPPED -o jsonpb > drops.jsonl

    Only drops that a missing allow rule explains (POLICY_DENIED, and AUDIT with
    --include-audit) become rules. Explicit denies, infrastructure drops and reply packets are
    counted in the report and never allowed. Existing files are merged: rules and comments
    you added are kept, and a file is only rewritten when its content changes.

    Exit codes: 0 done (an empty input writes nothing), 1 something could not be read or
    written (an input that is not a Hubble capture, or mostly not: see --max-malformed), 2 bad
    flags, 3 --fail-on-infra-drops and infrastructure or transient drops were seen.
    """
    opt.setup_logging(log_level)
    opt.check_exit_code(exit_code, dry_run)
    if verify and dry_run:
        raise typer.BadParameter(
            "--verify checks written files; drop --dry-run", param_hint="--verify"
        )
    if engine not in ("local", "dask"):
        raise typer.BadParameter(f"{engine!r}: use local or dask", param_hint="--engine")
    if scheduler is not None and engine != "dask":
        raise typer.BadParameter("--scheduler needs --engine dask", param_hint="--scheduler")
    if engine == "dask":
        scheduler = scheduler or f"local:{jobs or default_jobs()}"
    part_bytes = _size(part_size)
    if part_size != "64MiB" and engine != "dask":
        raise typer.BadParameter("--part-size needs --engine dask", param_hint="--part-size")
    record_evidence = not no_evidence and not dry_run
    label = describe_source(inputs[0]) if len(inputs) == 1 else f"{len(inputs)} inputs"
    options = opt.capture_request(
        namespace=namespace,
        all_namespaces=all_namespaces,
        include_audit=include_audit,
        ignore_protocol=ignore_protocol,
        ignore_drop_reason=ignore_drop_reason,
        l7=l7,
        l7_collapse_paths=l7_collapse_paths,
        max_samples=evidence_samples if record_evidence else 0,
    ).aggregate_options()
    window = opt.validated(lambda: TimeWindow.build(since, until))
    if engine == "dask" and window.relative:
        raise typer.BadParameter(
            "a duration counts back from the newest flow, which this machine would have to "
            "read the whole archive to find; with --engine dask give RFC 3339 times "
            "(e.g. --since 2026-11-30T00:00:00Z)",
            param_hint="--since/--until",
        )
    try:
        if window.bounded:
            reference = newest_time(expand_inputs(inputs)) if window.relative else None
            first, last = opt.validated(lambda: window.resolve(reference))
            options = attrs.evolve(options, since=first, until=last)
        evidence = (
            EvidenceSettings(
                root=evidence_dir or default_evidence_root(output_dir),
                max_samples=evidence_samples,
                max_sessions=evidence_sessions,
                redact=evidence_redact,
            )
            if record_evidence
            else None
        )
        with ReplayProgress(label, show=on_terminal(quiet)) as progress:
            result = run_replay(
                inputs,
                output_dir,
                options,
                dry_run=dry_run,
                diff=not no_diff,
                jobs=jobs or default_jobs(),
                evidence=evidence,
                watch=progress,
                max_malformed=max_malformed,
                min_flows=min_flows,
                kustomize=kustomize,
                scheduler=scheduler,
                part_bytes=part_bytes,
            )
    except CpgError as exc:  # a missing extra is an install away: exit 2, like a bad flag
        fail(exc)
    except KeyboardInterrupt:
        # The workers are stopped and staged files removed by now. Leave at once: an
        # interrupt can land inside a multiprocessing queue's lock, and the interpreter's
        # exit handlers would then wait on it for ever (a second Ctrl+C too).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        say("cpg: interrupted; nothing is half-written, and a rerun completes the run", err=True)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)

    source = result.describe_inputs()
    agg = result.aggregator
    warn_about_run(agg, source, l7=l7, include_audit=include_audit)
    failed = bool(result.failed or result.evidence_errors or result.stats.truncated)
    checked = None
    if verify and not failed:
        try:
            checked = verify_capture(
                inputs,
                load_policies(output_dir),
                options.decide,
                window=(options.since, options.until),
            ).report
        except CpgError as exc:
            say(f"cpg: error: --verify: {exc.render(flag)}", err=True)
            failed = True
    verify_failed = checked is not None and not checked.passed
    code = 1 if failed else 3 if (fail_on_infra_drops and agg.infra_drops) or verify_failed else 0
    if not code and exit_code and opt.would_change(result.files):
        code = 3
    lines = []
    if checked is not None:
        lines = [
            f"  verify: {check.traffic}: {check.reason}"
            for check in checked.checks
            if check.allowed == (check.kind == "explicit_deny")
        ]
        lines.append(f"Verify: {checked.summary()}")
    print_run(
        result,
        source=source,
        output_dir=output_dir,
        dry_run=dry_run,
        evidence=record_evidence,
        as_json=output == "json",
        exit_code=code,
        extra_json={"verify": to_data(checked)} if checked is not None else None,
        extra_lines=lines + opt.redacted_note(evidence_redact and record_evidence),
    )
    if result.stats.truncated:
        say(
            f"cpg: error: {source}: {result.stats.truncated}; policies were generated from "
            "the flows read before that point",
            err=True,
        )
    if verify_failed:
        say("cpg: --verify: the policies do not admit every candidate flow", err=True)
    if code == 3 and agg.infra_drops and fail_on_infra_drops:
        say(
            f"cpg: {agg.infra_drops} infrastructure or transient drop(s) seen "
            "(--fail-on-infra-drops): see the report above",
            err=True,
        )
    if code:
        raise typer.Exit(code)


_UNITS = {
    "": 1,
    "b": 1,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "kb": 1000,
    "mb": 10**6,
    "gb": 10**9,
}


def _size(text: str) -> int:
    """A size such as 64MiB, 1GiB, 500MB or a number of bytes (at least 1 MiB)."""
    number = text.strip().rstrip("BbIiKkMmGg")
    unit = text.strip()[len(number) :].lower()
    if not number.isdigit() or unit not in _UNITS or int(number) * _UNITS[unit] < 1 << 20:
        raise typer.BadParameter(
            f"{text!r}: give a size of at least 1MiB, such as 64MiB, 1GiB or 500MB",
            param_hint="--part-size",
        )
    return int(number) * _UNITS[unit]
