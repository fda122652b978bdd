"""cpg_core: pure functions and values from Hubble flows to CiliumNetworkPolicy YAML.

No files, sockets, environment, clock, logging or printing: plain values in, plain values out.

    aggregator = Aggregator()
    for obj in decoded_json_lines:
        aggregator.add(parse_flow(obj))   # parse_record accepts any response line
    for plan in aggregator.plans():
        text = render_or_merge(existing_text_or_None, name=plan.name, namespace=plan.namespace,
                               selector=plan.target.selector, rules=plan.rules)
"""

from cpg_core.aggregate import AggregateOptions, AggregateState, Aggregator, PolicyPlan
from cpg_core.decide import DecideOptions, Decision, decide
from cpg_core.dropreasons import CLASSIFIER_VERSION, DropClass, classify_reason, reason_name
from cpg_core.equivalence import normalise_spec, policies_equivalent, specs_equivalent
from cpg_core.errors import CpgError, FlowParseError, PolicyMergeError, SelectorMismatchError
from cpg_core.flow import Endpoint, Flow, LostEvents, OtherRecord, Verdict
from cpg_core.labels import select_labels, workload_name
from cpg_core.merge import merge_policy_text, render_or_merge
from cpg_core.names import policy_name
from cpg_core.parse import FlowParser, parse_flow, parse_record
from cpg_core.render import policy_document, render_policy
from cpg_core.rules import Atom, CidrPeer, EndpointPeer, EntityPeer, Rule, rules_from_atoms
from cpg_core.synthesis import PolicyTarget, Resolver, Unhandled

__all__ = [
    "CLASSIFIER_VERSION",
    "AggregateOptions",
    "AggregateState",
    "Aggregator",
    "Atom",
    "CidrPeer",
    "CpgError",
    "DecideOptions",
    "Decision",
    "DropClass",
    "Endpoint",
    "EndpointPeer",
    "EntityPeer",
    "Flow",
    "FlowParseError",
    "FlowParser",
    "LostEvents",
    "OtherRecord",
    "PolicyMergeError",
    "PolicyPlan",
    "PolicyTarget",
    "Resolver",
    "Rule",
    "SelectorMismatchError",
    "Unhandled",
    "Verdict",
    "classify_reason",
    "decide",
    "merge_policy_text",
    "normalise_spec",
    "parse_flow",
    "parse_record",
    "policies_equivalent",
    "policy_document",
    "policy_name",
    "reason_name",
    "render_or_merge",
    "render_policy",
    "rules_from_atoms",
    "select_labels",
    "specs_equivalent",
    "workload_name",
]
