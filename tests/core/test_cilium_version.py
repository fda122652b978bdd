"""Cilium version from agent images, and the fields a version would prune."""

from __future__ import annotations

import pytest

from cpg_core._base.cilium_version import image_version, minimum_version, versions_seen
from cpg_core._policy.model import below_floor


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("quay.io/cilium/cilium:v1.19.4@sha256:0123abcd", (1, 19, 4)),
        ("quay.io/cilium/cilium:v1.16.0-rc.1", (1, 16, 0)),
        ("registry.local:5000/cilium/cilium:1.15.7", (1, 15, 7)),
        ("docker.io/cilium/cilium:v1.17", (1, 17, 0)),
        ("registry.local:5000/cilium/cilium", None),
        ("quay.io/cilium/cilium:latest", None),
        ("quay.io/cilium/cilium@sha256:0123abcd", None),
    ],
)
def test_image_version(image: str, version: tuple[int, int, int] | None) -> None:
    assert image_version(image) == version


def test_the_oldest_agent_decides_during_a_rolling_upgrade() -> None:
    images = ["c/cilium:v1.16.2", "c/cilium:v1.15.9", "c/cilium:v1.16.2", "c/cilium:dev"]
    assert minimum_version(images) == (1, 15, 9)
    assert versions_seen(images) == {"1.15.9": 1, "1.16.2": 2}
    assert minimum_version(["c/cilium:dev"]) is None


def test_below_floor() -> None:
    assert below_floor((1, 15, 9), ["enableDefaultDeny"]) == [
        "enableDefaultDeny CNP field (requires >= 1.16.0)"
    ]
    assert below_floor((1, 16, 0), ["enableDefaultDeny"]) == []
