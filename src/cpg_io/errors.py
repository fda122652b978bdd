"""The errors cpg_io raises: one family under :class:`cpg_core.CpgError`.

A command catches :class:`IoError` (or ``CpgError`` for core and io together) and renders the
message in its own words (``error.render(words)``): the messages name settings as
:class:`~cpg_core.Setting` parts, never as a CLI flag or a tool argument."""

from __future__ import annotations

from cpg_core import CpgError


class IoError(CpgError):
    """Something outside cpg (a file, a URL, the relay, the cluster) could not be used; the
    message names it and says what to do."""

    usage: bool = False
    """True when the fix is on the command line, not in the world (a missing extra): the CLI
    exits 2 for these, as for a bad flag."""


class SourceError(IoError):
    """The input could not be read."""


class UnreadableInput(SourceError):
    """The input is not a Hubble capture, or mostly not; nothing was written."""


class MissingExtra(SourceError):
    """A URL whose storage library is not installed: the message is the install command."""

    usage = True


class SecretInURL(MissingExtra):
    """A URL that carries what may be credentials: refused before any library sees it."""


class EngineError(SourceError):
    """The Dask cluster could not be reached or used."""


class MissingDask(MissingExtra):
    """Dask is not installed: the message is the install command."""


class StoreError(IoError):
    """A path or a write was refused; the message names the path and the fix."""


class RelayError(IoError):
    """The relay could not be reached or refused the stream."""


class KubeError(IoError):
    """The cluster could not be read."""


class RelaySetupError(KubeError):
    """Set-up before a live capture failed. ``field`` is ``cluster_dedup`` or ``server`` (no
    server was given and the port-forward to hubble-relay failed)."""


class PolicyLoadError(IoError):
    """A policy file could not be read; the message names it."""


class ReviewInputError(IoError):
    """What a report reads could not be used."""


class Cancelled(IoError):
    """The run was cancelled (Ctrl+C, an MCP stop): nothing of it was written."""


__all__ = [
    "Cancelled",
    "EngineError",
    "IoError",
    "KubeError",
    "MissingDask",
    "MissingExtra",
    "PolicyLoadError",
    "RelayError",
    "RelaySetupError",
    "ReviewInputError",
    "SecretInURL",
    "SourceError",
    "StoreError",
    "UnreadableInput",
]
