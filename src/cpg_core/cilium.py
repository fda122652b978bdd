"""Facts about Cilium and its policy files that adapters need: reading policy YAML, the labels
cpg marks its policies with, and the agent versions a cluster runs."""

from cpg_core.base._cilium_version import (
    LOCAL_CLUSTER_DEFAULT_SINCE,
    Version,
    format_version,
    local_cluster_default,
    minimum_version,
    versions_seen,
)
from cpg_core.base._names import POLICY_NAME_PREFIX
from cpg_core.policy._model import DEFAULT_DENY_FIELD, SECTIONS, below_floor, specs_police
from cpg_core.policy._policy_docs import PolicyShapeProblem, policies_in
from cpg_core.policy._policy_set import PolicySet
from cpg_core.policy._yamlread import JsonInputError, YamlInputError, load_all, load_json, load_one
from cpg_core.synthesis._merge import ForeignPolicy, foreign_policy
from cpg_core.synthesis._narrow import narrow_in_text
from cpg_core.synthesis._render import MANAGED_BY_LABEL, MANAGED_BY_VALUE

__all__ = [
    "DEFAULT_DENY_FIELD",
    "LOCAL_CLUSTER_DEFAULT_SINCE",
    "MANAGED_BY_LABEL",
    "MANAGED_BY_VALUE",
    "POLICY_NAME_PREFIX",
    "SECTIONS",
    "ForeignPolicy",
    "JsonInputError",
    "PolicySet",
    "PolicyShapeProblem",
    "Version",
    "YamlInputError",
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
    "specs_police",
    "versions_seen",
]
