"""Facts about Cilium and its policy files that adapters need: reading policy YAML, the labels
cpg marks its policies with, and the agent versions a cluster runs."""

from cpg_core._base.cilium_version import (
    LOCAL_CLUSTER_DEFAULT_SINCE,
    Version,
    format_version,
    local_cluster_default,
    minimum_version,
    versions_seen,
)
from cpg_core._base.names import POLICY_NAME_PREFIX
from cpg_core._policy.agent import (
    CILIUM_DEFAULTS,
    CONFIG_MAP,
    AgentChoice,
    AgentSettings,
    agent_settings,
    release_notes,
)
from cpg_core._policy.matcher import policy_name
from cpg_core._policy.model import DEFAULT_DENY_FIELD, SECTIONS, below_floor, specs_police
from cpg_core._policy.policy_docs import PolicyShapeProblem, policies_in
from cpg_core._policy.policy_set import PolicySet
from cpg_core._policy.yamlread import JsonInputError, YamlInputError, load_all, load_json, load_one
from cpg_core._review.owners import AlsoSelected, also_selected
from cpg_core._synthesis.merge import ForeignPolicy, foreign_policy, written_by_cpg
from cpg_core._synthesis.narrow import narrow_in_text
from cpg_core._synthesis.render import MANAGED_BY_LABEL, MANAGED_BY_VALUE, policy_document

__all__ = [
    "CILIUM_DEFAULTS",
    "CONFIG_MAP",
    "DEFAULT_DENY_FIELD",
    "LOCAL_CLUSTER_DEFAULT_SINCE",
    "MANAGED_BY_LABEL",
    "MANAGED_BY_VALUE",
    "POLICY_NAME_PREFIX",
    "SECTIONS",
    "AgentChoice",
    "AgentSettings",
    "AlsoSelected",
    "ForeignPolicy",
    "JsonInputError",
    "PolicySet",
    "PolicyShapeProblem",
    "Version",
    "YamlInputError",
    "agent_settings",
    "also_selected",
    "below_floor",
    "foreign_policy",
    "format_version",
    "load_all",
    "load_json",
    "load_one",
    "local_cluster_default",
    "minimum_version",
    "narrow_in_text",
    "policies_in",
    "policy_document",
    "policy_name",
    "release_notes",
    "specs_police",
    "versions_seen",
    "written_by_cpg",
]
