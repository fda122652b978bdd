"""How the cluster's Cilium agents are configured, as far as a verdict depends on it: one
value the review commands and the MCP session pass down to the one matcher (§D61)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from cpg_core._base.cilium_version import (
    LOCAL_CLUSTER_DEFAULT_SINCE,
    Version,
    format_version,
    local_cluster_default,
    minimum_version,
)
from cpg_core._policy.netpol_validation import ipblock_release_note

POLICY_MAP_MAX = 16_384
"""Cilium's default ``bpf-policy-map-max``: entries of one endpoint's policy map."""


@attrs.frozen(slots=True)
class AgentSettings:
    """The agent settings a verdict depends on; the defaults are Cilium's own."""

    allow_localhost: bool = True
    """``allow-localhost: always`` (True): the node reaches its own pods whatever the policy;
    ``policy`` (False): the node's traffic to its pods is policed like any other."""
    default_local_cluster: bool = True
    """``policy-default-local-cluster`` (on since 1.19): a peer selector that names no cluster
    selects the enforcing endpoint's cluster only."""
    host_firewall: bool = False
    """``enable-host-firewall``: host policies (a clusterwide policy's ``nodeSelector``) police
    the node; without it Cilium ignores them and the node is not policed."""
    dual_stack: bool = False
    """IPv4 and IPv6 both on: a world address carries ``world-ipv4`` or ``world-ipv6``, and a
    world peer without an address is selected by neither ``0.0.0.0/0`` nor ``::/0``."""
    policy_map_max: int = POLICY_MAP_MAX
    """``bpf-policy-map-max``: the plan's policy map pressure is judged against it."""
    version: str = ""
    """The agents' Cilium version (the oldest, ``1.19.2``); "" when unknown (the newest)."""


CILIUM_DEFAULTS = AgentSettings()
"""The settings of an agent configured as Cilium ships it."""


@attrs.frozen(slots=True)
class AgentChoice:
    """The agent settings as the user gave them: None is *as the cluster says* (its
    ``cilium-config`` and agent images, when read), else Cilium's default."""

    allow_localhost: bool | None = None
    default_local_cluster: bool | None = None
    host_firewall: bool | None = None
    dual_stack: bool | None = None
    policy_map_max: int | None = None
    version: Version | None = None


CONFIG_MAP = ("kube-system", "cilium-config")
"""Where Cilium's agents read their settings (namespace, ConfigMap)."""

_LOCALHOST_WORDS = {"always": True, "auto": True, "policy": False}


def agent_settings(
    choice: AgentChoice,
    config: Mapping[str, str] | None = None,
    images: Sequence[str] = (),
    *,
    from_cluster: bool = False,
) -> tuple[AgentSettings, tuple[str, ...]]:
    """The settings judged with, and notes on what could not be read: what the user gave,
    else (``from_cluster``) what the cluster's ``cilium-config`` (``config``; None when it
    could not be read) and the oldest agent's version say, else Cilium's defaults."""
    read = config or {}
    notes: list[str] = []
    version = choice.version or minimum_version(images)

    def said(key: str, words: Mapping[str, bool]) -> bool | None:
        value = read.get(key)
        return words.get(value.strip().lower()) if isinstance(value, str) else None

    localhost = _first(choice.allow_localhost, said("allow-localhost", _LOCALHOST_WORDS), True)
    local = choice.default_local_cluster
    if local is None:
        local = said("policy-default-local-cluster", _BOOLEANS)
    if local is None and choice.version is not None:
        local = choice.version >= LOCAL_CLUSTER_DEFAULT_SINCE
    if local is None and from_cluster:
        local, unknown = local_cluster_default(images)
        notes += [unknown] if unknown else []
    firewall = _first(choice.host_firewall, said("enable-host-firewall", _BOOLEANS), False)
    dual = choice.dual_stack
    if dual is None and config is not None:
        ipv4 = _first(said("enable-ipv4", _BOOLEANS), None, True)
        dual = ipv4 and bool(said("enable-ipv6", _BOOLEANS))
    map_max = choice.policy_map_max
    if map_max is None:
        map_max = _count(read.get("bpf-policy-map-max")) or POLICY_MAP_MAX
    if from_cluster and config is None:
        notes.append(
            f"the agents' settings ({'/'.join(CONFIG_MAP)}) could not be read: judged with "
            "Cilium's defaults where none was given (host firewall off, one address family)"
        )
    settings = AgentSettings(
        allow_localhost=localhost,
        default_local_cluster=True if local is None else local,
        host_firewall=firewall,
        dual_stack=bool(dual),
        policy_map_max=map_max,
        version=format_version(version) if version is not None else "",
    )
    return settings, tuple(notes)


_BOOLEANS = {"true": True, "false": False}


def _first(given: bool | None, said: bool | None, default: bool) -> bool:
    if given is not None:
        return given
    return default if said is None else said


def _count(text: object) -> int | None:
    if not isinstance(text, str) or not text.strip().isdigit() or len(text.strip()) > 9:
        return None
    value = int(text.strip())
    return value if value > 0 else None


def release_notes(agent: AgentSettings, policies: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the agents' release reads otherwise than the verdicts do (they follow the newest
    reading): one note each, none when the version is unknown."""
    if not agent.version:
        return []
    major, minor, patch = (int(part) for part in agent.version.split("."))
    note = ipblock_release_note(policies, (major, minor, patch))
    return [note] if note else []
