"""Reading identity sources: files of CiliumEndpoints, CiliumIdentities and pods (JSON or
YAML, as ``kubectl get … -o json|yaml`` prints them), or the same objects read from the
cluster (``cluster``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from cpg_core import CheckRequest, CpgError, Setting
from cpg_core.cilium import load_all, load_json
from cpg_core.identities import CLUSTER, IdentityBook, identity_book, joined_books
from cpg_io.errors import SourceError
from cpg_io.store import RefusedFile, read_bounded


def read_identities(
    sources: Sequence[str],
    *,
    kubeconfig: Path | None = None,
    context: str | None = None,
    temp_dir: Path | None = None,
) -> IdentityBook | None:
    """One book of every source (None when none is given). SourceError names a file that
    cannot be read, IdentityInputError an object in it, KubeError a cluster that cannot."""
    if not sources:
        return None
    books = []
    for source in sources:
        if source == CLUSTER:
            from cpg_io.kube import cluster_identities

            documents = cluster_identities(kubeconfig, context, temp_dir)
            books.append(identity_book(documents, "the cluster's identities"))
        else:
            books.append(identity_book(_documents(Path(source)), source))
    return joined_books(books)


MAX_IDENTITIES_BYTES = 1 << 30
"""The largest identities file read (a big cluster's endpoints, identities and pods)."""


def _documents(path: Path) -> list[Any]:
    try:
        text = read_bounded(path, MAX_IDENTITIES_BYTES).decode("utf-8")
    except FileNotFoundError:
        raise SourceError(
            Setting("identities"),
            f" {path}: no such file (make it with: kubectl get ciliumendpoints,"
            "ciliumidentities,pods -A -o json)",
        ) from None
    except RefusedFile as exc:
        raise SourceError(Setting("identities"), f" {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(Setting("identities"), f" {path}: cannot read it ({exc})") from None
    try:
        if text.lstrip()[:1] in ("{", "["):
            data = load_json(text, str(path))
            return data if isinstance(data, list) else [data]
        return load_all(text, str(path))
    except CpgError as exc:
        raise SourceError(Setting("identities"), f" {exc}") from None


def check_identities(
    request: CheckRequest,
    *,
    kubeconfig: Path | None = None,
    context: str | None = None,
    temp_dir: Path | None = None,
) -> tuple[IdentityBook | None, str]:
    """The identities a check judges with: those given, and the cluster's when its policies
    are read too. The cluster's are a help there, not what was asked for: when they cannot
    be listed (no right to list pods, say) the check goes on without them, and the second
    value says why (else "")."""
    given = read_identities(
        request.identities, kubeconfig=kubeconfig, context=context, temp_dir=temp_dir
    )
    if not request.cluster or CLUSTER in request.identities:
        return given, ""
    try:
        live = read_identities([CLUSTER], kubeconfig=kubeconfig, context=context, temp_dir=temp_dir)
    except CpgError as exc:
        return given, f"identities not read from the cluster ({exc}); judged without them"
    return joined_books([b for b in (given, live) if b is not None]), ""


IDENTITY_REFRESH = 300.0
"""Seconds between two readings of the cluster's identities in a live session: pods start,
stop and take each other's IPs while it runs for weeks."""


@attrs.define
class IdentityRefresh:
    """How a live session reads the cluster's identities again: ``read`` gives the new book
    and, when the cluster could not be read, why (the session keeps the book it has)."""

    read: Callable[[], tuple[IdentityBook | None, str]]
    interval: float = IDENTITY_REFRESH


def identity_refresh(
    sources: Sequence[str],
    *,
    kubeconfig: Path | None = None,
    context: str | None = None,
    temp_dir: Path | None = None,
) -> IdentityRefresh | None:
    """The refresh of a live session that reads identities from the cluster (None when its
    sources are files only: they do not change)."""
    if CLUSTER not in sources:
        return None

    def read() -> tuple[IdentityBook | None, str]:
        try:
            book = read_identities(
                sources, kubeconfig=kubeconfig, context=context, temp_dir=temp_dir
            )
        except CpgError as exc:
            return None, str(exc)
        return book, ""

    return IdentityRefresh(read)
