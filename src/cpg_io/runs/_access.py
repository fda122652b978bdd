"""How a live run reaches Hubble Relay and the cluster, and the one place that sets the way
up: a port-forward to hubble-relay when no server was given, the cluster's cpg policies for
cluster_dedup. A failed set-up is worded here, once, with the setting to change as a
:class:`~cpg_core.Setting` each root spells its own way."""

from __future__ import annotations

import tempfile
from pathlib import Path

import attrs

from cpg_core import RunRequest, Setting
from cpg_io.errors import RelaySetupError
from cpg_io.hubble import TLSSettings
from cpg_io.kube import RelayConnection, prepare_relay


@attrs.frozen
class RelayAccess:
    """The relay's TLS and the Kubernetes access of a live run (a port-forward,
    cluster_dedup, the policies read from the cluster)."""

    tls: TLSSettings = attrs.Factory(TLSSettings)
    kubeconfig: Path | None = None
    """None: $KUBECONFIG, else ~/.kube/config."""
    context: str | None = None
    temp_dir: Path | None = None
    """Where an inline kubeconfig's credential files go (removed when the run closes); None:
    a private folder made for the run."""


def open_relay(request: RunRequest, access: RelayAccess) -> RelayConnection:
    """The way to the relay ``request`` names. RelaySetupError says which step failed and
    which setting fixes it; nothing is left open when it is raised."""
    temp_dir = access.temp_dir or Path(tempfile.mkdtemp(prefix="cpg-kube-"))
    try:
        return prepare_relay(
            request.live.server,
            timeout=request.live.timeout,
            namespaces=list(request.capture.namespaces),
            cluster_dedup=request.live.cluster_dedup,
            relay_namespace=request.live.relay_namespace,
            kubeconfig=access.kubeconfig,
            context=access.context,
            temp_dir=temp_dir,
        )
    except RelaySetupError as exc:
        if exc.field == "cluster_dedup":
            raise RelaySetupError(
                Setting("cluster_dedup"), ": ", *exc.parts, field="cluster_dedup"
            ) from None
        raise RelaySetupError(
            Setting("server"),
            " not given and no port-forward to hubble-relay: ",
            *exc.parts,
            field="server",
        ) from None
