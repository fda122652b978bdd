"""Reading what ``cpg report`` shows: the output folder's policies, their evidence, the
cluster-health document and, when given, a plan's JSON."""

from __future__ import annotations

import threading
from pathlib import Path

from cpg_core import DocumentError, EvidenceError, Message, Plan, Setting, from_data
from cpg_core.cilium import JsonInputError, load_json
from cpg_core.declarations import Declarations
from cpg_core.lint import declared_denials
from cpg_core.reports import ReviewInputs
from cpg_io.errors import PolicyLoadError, ReviewInputError, StoreError
from cpg_io.evidence_store import EvidenceStore
from cpg_io.policy_files import read_policy_folder
from cpg_io.runs._heap import reads_in_bulk
from cpg_io.store import RefusedFile, read_bounded


@reads_in_bulk
def read_review(
    output_dir: Path,
    store: EvidenceStore,
    plan: Path | None,
    cancel: threading.Event | None = None,
    declarations: Declarations | None = None,
) -> ReviewInputs:
    """The policies, their evidence, the cluster health and the plan a report shows, and
    what the cluster declares that they deny; Cancelled soon after ``cancel`` is set (a
    deadline that expired)."""
    try:
        folder = read_policy_folder(output_dir, cancel)
    except PolicyLoadError as exc:
        raise ReviewInputError(*exc.parts) from None  # keeps the setting for each root to name
    files = folder.files
    policies = [policy for _text, found in files for policy in found]
    texts = {
        f"{(p.get('metadata') or {}).get('namespace', '')}/{(p.get('metadata') or {}).get('name', '')}": text
        for text, found in files
        for p in found
    }
    problems: list[str] = list(folder.problems)  # the report goes on without those files
    evidence = {
        f"{namespace}/{doc.policy.name}": doc
        for namespace, _workload, doc in store.read_all(problems.append, cancel)
    }
    if policies and not evidence:
        problems.append(no_evidence(len(policies), store))
    try:
        health = store.read_health()
    except (EvidenceError, StoreError) as exc:
        problems.append(str(exc))
        health = None
    planned = None
    if plan is not None:
        try:
            plan_data = load_json(read_bounded(plan), str(plan))
        except RefusedFile as exc:
            raise ReviewInputError(str(exc)) from None
        except (OSError, UnicodeDecodeError, JsonInputError) as exc:
            raise ReviewInputError(
                f"{plan}: cannot read it as a plan ({exc}); write one with "
                "'cpg plan CAPTURE -d DIR -o json > plan.json'"
            ) from None
        if not isinstance(plan_data, dict) or "would_break" not in plan_data:
            raise ReviewInputError(f"{plan}: not the JSON of 'cpg plan -o json'")
        try:
            planned = from_data(plan_data, Plan, str(plan))
        except DocumentError as exc:
            raise ReviewInputError(
                f"{exc}; write the plan with this cpg's 'cpg plan -o json'"
            ) from None
    denied = declared_denials(policies, declarations) if declarations is not None else []
    if declarations is not None:
        problems += [f"declarations: {note}" for note in declarations.notes]
    return ReviewInputs(policies, evidence, health, planned, problems, texts, denied)


def no_evidence(policies: int, store: EvidenceStore, what: str = "policies") -> str:
    """The warning for a folder of policies none of which has evidence where cpg looked: a
    wrong or forgotten --evidence-dir, never a silent "0 flows"."""
    return Message(
        f"no evidence for any of the {policies} {what}: looked in {store.base} (the evidence "
        f"of {store.output_dir}); give the ",
        Setting("evidence_dir"),
        " the run that wrote them used",
    )
