"""``cpg replay``: generate policies (and their evidence) from a captured flow file."""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from cpg_cli import options as opt
from cpg_cli.terminal import fail, say
from cpg_core import CpgError
from cpg_core.why import FlowFilter
from cpg_io import runs

log = logging.getLogger("cpg")


_Inputs = Annotated[
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
]


@opt.with_flow_filters
@opt.with_options("replay")
def replay(
    inputs: _Inputs,
    options: opt.Values,
    output_dir: opt.OutputDir = Path("policies"),
    log_level: opt.LogLevel = "warning",
    evidence_dir: opt.EvidenceDir = None,
    flow_filter: FlowFilter = opt.NO_FILTER,
    output: opt.Output = "text",
    quiet: opt.Quiet = False,
) -> None:
    """Generate policies from a captured Hubble flow file.

    Capture with:  hubble observe --verdict DROPPED -o jsonpb > drops.jsonl

    Only drops that a missing allow rule explains (POLICY_DENIED, and AUDIT with
    --include-audit) become rules. Explicit denies, infrastructure drops and reply packets are
    counted in the report and never allowed. Existing files are merged: rules and comments
    you added are kept, and a file is only rewritten when its content changes.

    Exit codes: 0 done (an empty input writes nothing), 1 something could not be read or
    written (an input that is not a Hubble capture, or mostly not: see --max-malformed), 2 bad
    flags, 3 --fail-on-infra-drops and infrastructure or transient drops were seen, --verify
    and a candidate is not admitted, or --dry-run --exit-code and a file would change.
    """
    from cpg_cli.progress import ReplayProgress, on_terminal
    from cpg_cli.report import print_run, warn_about_run
    from cpg_io.sources import describe_source

    opt.setup_logging(log_level)
    request = opt.run_request(options, flow_filter)
    kubeconfig, context = options.kube_access()  # identities read from the cluster
    label = describe_source(inputs[0]) if len(inputs) == 1 else f"{len(inputs)} inputs"
    try:
        with ReplayProgress(label, show=on_terminal(quiet)) as progress:
            result = runs.replay(
                request,
                inputs,
                output_dir,
                evidence_dir=evidence_dir,
                watch=progress,
                kubeconfig=kubeconfig,
                context=context,
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
    warn_about_run(result.aggregator, source, request)
    code = runs.exit_code(result, request)
    print_run(
        result,
        request=request,
        source=source,
        output_dir=output_dir,
        as_json=output in ("json", "yaml"),
        machine_format=output,
        exit_code=code,
        evidence_dir=evidence_dir,
        inputs=[str(name) for name in inputs],
    )
    if code:
        raise typer.Exit(code)
