"""Merge time against the size of an existing (hand-edited) policy: ``python benchmarks/merge.py``.

Renders policies of growing size (up to ~10 MB), adds a human rule, merges one new rule into
each and prints MB, seconds and seconds per MB: a flat last column means linear time.
"""

from __future__ import annotations

import resource
import time

from cpg_core import render_or_merge
from cpg_core._rules import Atom, EndpointPeer, rules_from_atoms

SELECTOR = (("app", "x"),)


def policy_text(rules: int) -> str:
    atoms = [
        Atom("ingress", EndpointPeer(f"ns{i % 50}", (("app", f"svc-{i}"),)), "TCP", 1000 + i % 500)
        for i in range(rules)
    ]
    text = render_or_merge(
        None, name="cpg-x", namespace="shop", selector=SELECTOR, rules=rules_from_atoms(atoms)
    )
    return text.replace(
        "  ingress:\n", "  ingress:\n  # a human rule\n  - fromEntities:\n    - host\n", 1
    )


def main() -> None:
    new = rules_from_atoms([Atom("ingress", EndpointPeer("zz", (("app", "new"),)), "TCP", 9)])
    for rules in (2_500, 5_000, 10_000, 20_000, 50_000):
        text = policy_text(rules)
        start = time.perf_counter()
        render_or_merge(text, name="cpg-x", namespace="shop", selector=SELECTOR, rules=new)
        seconds = time.perf_counter() - start
        size = len(text) / 1e6
        print(f"{size:6.1f} MB  {seconds:6.2f} s  {seconds / size:5.2f} s/MB")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:,.0f} MB")


if __name__ == "__main__":
    main()
