"""Which Cilium a cluster runs, from its agent images, and what that means for the fields cpg
writes: a CRD older than a field prunes it silently, so a policy would do less than it reads."""

from __future__ import annotations

import re
from collections.abc import Iterable

Version = tuple[int, int, int]

_TAG = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+].*)?$")


def image_version(image: str) -> Version | None:
    """The version in an image reference's tag (``quay.io/cilium/cilium:v1.19.4@sha256:…``),
    or None when the tag is absent or not a version."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" not in last:
        return None
    match = _TAG.fullmatch(last.rsplit(":", 1)[1])
    if match is None:
        return None
    return (int(match[1]), int(match[2]), int(match[3] or 0))


def format_version(version: Version) -> str:
    return ".".join(map(str, version))


def versions_seen(images: Iterable[str]) -> dict[str, int]:
    """How many agents run each version (unparseable tags are left out), newest last."""
    counts: dict[Version, int] = {}
    for image in images:
        version = image_version(image)
        if version is not None:
            counts[version] = counts.get(version, 0) + 1
    return {format_version(v): counts[v] for v in sorted(counts)}


def minimum_version(images: Iterable[str]) -> Version | None:
    """The oldest agent version: during a rolling upgrade the old agents still enforce."""
    versions = [v for v in map(image_version, images) if v is not None]
    return min(versions) if versions else None


LOCAL_CLUSTER_DEFAULT_SINCE: Version = (1, 19, 0)
"""The first Cilium whose policy-default-local-cluster is on: a peer selector without a
cluster label selects the local cluster only."""


def local_cluster_default(images: Iterable[str]) -> tuple[bool, str]:
    """policy-default-local-cluster as the oldest agent applies it, and a note when the
    agents did not say."""
    version = minimum_version(images)
    if version is None:
        return True, (
            "no Cilium agent version could be read from the cluster: judged as Cilium 1.19+ "
            "(policy-default-local-cluster false for an older ClusterMesh)"
        )
    return version >= LOCAL_CLUSTER_DEFAULT_SINCE, ""
