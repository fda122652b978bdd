"""``verify``: do these policies admit the capture's denied flows, and nothing an explicit
deny dropped? Reading is here; the checking is cpg_core's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from cpg_core import DecideOptions, Flow, VerifyReport, verify_flows
from cpg_core.reading import time_key
from cpg_io.sources import CaptureFlows, ReadStats


@attrs.frozen
class VerifiedCapture:
    stats: ReadStats
    report: VerifyReport


def _inside(key: str, since: str, until: str) -> bool:
    return bool(key) and (not since or key >= since) and (not until or key <= until)


def verify_capture(
    source: str | Sequence[str],
    policies: Sequence[Mapping[str, Any]],
    options: DecideOptions,
    *,
    default_local_cluster: bool = True,
    window: tuple[str, str] = ("", ""),
) -> VerifiedCapture:
    """Check ``policies`` against a capture (files, folders, globs: as cpg replay reads
    them); UnreadableInput when it holds no Hubble record. Only flows inside ``window``
    (since, until time keys; "" is open) are checked."""
    capture = CaptureFlows([source] if isinstance(source, str) else source)
    since, until = window
    flows: Iterable[Flow] = capture
    if since or until:
        flows = (flow for flow in capture if _inside(time_key(flow.time), since, until))
    report = verify_flows(flows, policies, options, default_local_cluster=default_local_cluster)
    capture.check_readable()
    return VerifiedCapture(stats=capture.stats, report=report)
