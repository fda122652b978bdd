"""``cpg lint``: read the policy files, check each with the CRD schema cpg ships and with cpg's
own rules (``cpg_core``), and, with the cluster, whether each selector selects any pod."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs

from cpg_core.cilium import Version
from cpg_core.lint import (
    NEWEST,
    LintFinding,
    invalid_in_cluster,
    lint_texts,
    policy_namespaces,
    unreadable_file,
)
from cpg_core.reports import LintView, guard_notes
from cpg_io.crd_schema import crd_schema_errors
from cpg_io.declarations import read_declarations
from cpg_io.errors import IoError
from cpg_io.kube import cluster_policies, namespace_pod_labels
from cpg_io.policy_files import MAX_FILE_BYTES
from cpg_io.runs._heap import reads_in_bulk
from cpg_io.store import RefusedFile, read_bounded
from cpg_io.version import cpg_version


class LintInputError(IoError):
    """A path given to ``cpg lint`` is not a file or folder it can read."""


@attrs.frozen
class LintRun:
    view: LintView


def _lint_inputs(paths: Sequence[str]) -> list[tuple[Path, Path]]:
    """Each file to lint, with the folder its content must stay inside: the folder given,
    or a file's own folder (a pull request's link to a file elsewhere is refused, never
    read and quoted into a comment)."""
    files: list[tuple[Path, Path]] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found = sorted([*path.rglob("*.yaml"), *path.rglob("*.yml")])
            files += [(file, path) for file in found]
        elif path.is_file():
            files.append((path, path.parent))
        else:
            raise LintInputError(f"{given}: no such file or folder of policies")
    return files


@reads_in_bulk
def lint_run(
    paths: Sequence[str],
    *,
    pod_cidrs: Sequence[str] = (),
    cluster: bool = False,
    kubeconfig: Path | None = None,
    context: str | None = None,
    cilium_version: Version = NEWEST,
    declarations: Sequence[str] = (),
) -> LintRun:
    """Every finding of every file, for Cilium ``cilium_version``; with ``cluster``,
    selectors that select no pod today and the cluster's policies its operator marked
    invalid; with ``declarations`` (sources of the cluster's objects), each declared
    dependency the files deny (CPG045)."""
    texts: list[tuple[Path, str]] = []
    unreadable: list[LintFinding] = []
    for path, inside in _lint_inputs(paths):
        try:
            texts.append((path, read_bounded(path, MAX_FILE_BYTES, inside).decode("utf-8")))
        except (OSError, UnicodeDecodeError, RefusedFile) as exc:
            # a finding of its own: the other files are still linted (and named here)
            reason = getattr(exc, "strerror", None) or str(exc)
            unreadable.append(unreadable_file(str(path), f"cannot read it ({reason})"))
    pods = None
    if cluster:
        namespaces = sorted({ns for _path, text in texts for ns in policy_namespaces(text)})
        pods = namespace_pod_labels(namespaces, kubeconfig, context)
    declared = read_declarations(declarations, kubeconfig=kubeconfig, context=context)
    findings = list(unreadable)
    per_file, together = lint_texts(
        [(str(path), text) for path, text in texts],
        schema=crd_schema_errors,
        pod_cidrs=pod_cidrs,
        pods=pods,
        cilium_version=cilium_version,
        declarations=declared,
    )
    findings += per_file + together.findings
    guarded: tuple[str, ...] = ()
    if cluster:
        stored = cluster_policies(kubeconfig, context)
        findings += invalid_in_cluster(stored)
        guarded = guard_notes(stored, version=cilium_version, pod_cidrs=pod_cidrs)
    return LintRun(
        view=LintView(
            findings=tuple(findings),
            files=len(texts) + len(unreadable),
            version=cpg_version(),
            notes=together.notes
            + tuple(f"declarations: {note}" for note in (declared.notes if declared else ()))
            + guarded,
        )
    )
