"""Reading what the cluster declares (ARCHITECTURE §D58): files and folders of its objects
(``kubectl get … -o yaml|json``, rendered Helm or kustomize output, lists included), or the
same objects listed from the cluster (``cluster``, read-only).

A source that holds nothing cpg reads (another kind of file, an unrendered Helm template, a
list the cluster would not give) is one line in the notes and never stops a run; a source
that is not there is an error naming the fix, as for ``--identities``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cpg_core import CpgError, Setting
from cpg_core.cilium import load_all, load_json
from cpg_core.declarations import (
    BUILTIN_CATALOGUE,
    CLUSTER,
    NO_CATALOGUE,
    Catalogue,
    Declarations,
    catalogue_from,
    declarations,
    declares_anything,
)
from cpg_io.errors import SourceError
from cpg_io.store import RefusedFile, read_bounded

MAX_DECLARATIONS_BYTES = 1 << 30
"""The largest file of objects read (a big cluster's pods and CRDs)."""
MAX_FILES = 10_000
"""Files read from the folders given, at most."""
_SUFFIXES = (".yaml", ".yml", ".json")
_HELM = re.compile(
    r"\{\{-?\s*(?:\.Values|\.Release|\.Chart|include\s|template\s|define\s|if\s|range\s)"
)
_HOW = (
    "make it with: kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations,"
    "apiservices,crds,services,endpointslices,pods,namespaces -A -o yaml > objects.yaml"
)


def read_declarations(
    sources: Sequence[str],
    *,
    kubeconfig: Path | None = None,
    context: str | None = None,
    temp_dir: Path | None = None,
) -> Declarations | None:
    """What every source declares, read together (a Service in one file resolves against
    the pods of another); None when no source is given. SourceError names a source that
    is not there, KubeError a cluster that cannot be reached."""
    if not sources:
        return None
    documents: list[Any] = []
    notes: list[str] = []
    for source in sources:
        if source == CLUSTER:
            from cpg_io.kube import cluster_declarations

            found, problems = cluster_declarations(kubeconfig, context, temp_dir)
            documents += found
            notes += [f"the cluster's objects: {p}" for p in problems]
            continue
        for path in _files(Path(source)):
            read, note = _documents(path)
            documents += read
            if note:
                notes.append(note)
    result = declarations(documents, ", ".join(sources))
    return result.with_notes(notes) if notes else result


def _files(path: Path) -> list[Path]:
    if not path.exists() and not path.is_symlink():
        raise SourceError(Setting("declarations"), f" {path}: no such file or folder ({_HOW})")
    if not path.is_dir():
        return [path]
    found = []
    for candidate in sorted(path.rglob("*")):
        if candidate.suffix.lower() in _SUFFIXES and not candidate.is_dir():
            found.append(candidate)
            if len(found) >= MAX_FILES:
                break
    return found


def _documents(path: Path) -> tuple[list[Any], str]:
    """The objects of one file, or why there are none (one line)."""
    try:
        text = read_bounded(path, MAX_DECLARATIONS_BYTES).decode("utf-8")
    except RefusedFile as exc:
        return [], f"{exc}"
    except UnicodeDecodeError:
        return [], f"{path}: not UTF-8 text; left out"
    except OSError as exc:
        return [], f"{path}: cannot read it ({exc.strerror or exc}); left out"
    if _HELM.search(text):
        return [], (
            f"{path}: an unrendered Helm template; render it first (helm template RELEASE "
            "CHART > objects.yaml) and give the output; left out"
        )
    try:
        if text.lstrip()[:1] in ("{", "["):
            data = load_json(text, str(path))
            documents = data if isinstance(data, list) else [data]
        else:
            documents = load_all(text, str(path))
    except CpgError as exc:
        return [], f"{exc}; left out"
    if not declares_anything(documents):
        return documents, (
            f"{path}: no object cpg reads for what the cluster declares (webhook "
            "configurations, APIServices, CRDs, Services, EndpointSlices, pods or workloads, "
            "namespaces, ServiceMonitors, PodMonitors, Prometheus); left out"
        )
    return documents, ""


MAX_CATALOGUE_BYTES = 4 << 20
"""The largest catalogue file read."""


def read_catalogue(sources: Sequence[str]) -> Catalogue:
    """The catalogue of platform workloads: the built-in entries unless ``none`` is among
    the sources, then each file's entries. SourceError names a file that cannot be read or
    an entry that is wrong."""
    found = Catalogue() if NO_CATALOGUE in sources else BUILTIN_CATALOGUE
    for source in sources:
        if source == NO_CATALOGUE:
            continue
        path = Path(source)
        try:
            text = read_bounded(path, MAX_CATALOGUE_BYTES).decode("utf-8")
            found = found.joined(catalogue_from(load_all(text, str(path)), str(path)))
        except FileNotFoundError:
            raise SourceError(
                Setting("catalogue"), f" {path}: no such file (or give none for no catalogue)"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise SourceError(Setting("catalogue"), f" {path}: cannot read it ({exc})") from None
        except CpgError as exc:
            raise SourceError(Setting("catalogue"), f" {exc}") from None
    return found


def with_catalogue(options: Any, sources: Sequence[str]) -> Any:
    """Aggregate options whose cluster scope recognises the catalogue ``sources`` say."""
    import attrs

    files = [s for s in sources if s != NO_CATALOGUE]
    if not files:
        return options  # the request chose the built-in entries or none already
    scope = attrs.evolve(options.scope, catalogue=read_catalogue(sources))
    return attrs.evolve(options, scope=scope)
