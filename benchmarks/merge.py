"""Merge time: ``python benchmarks/merge.py`` (existing size) or ``python benchmarks/merge.py
peers`` (new peers).

Size: renders policies of growing size (up to ~10 MB), adds a human rule, merges one new rule
into each and prints MB, seconds and seconds per MB: a flat last column means linear time.

Peers: merges N new peers (1,000, 2,000, 4,000; what a flood of new workloads brings a live
flush) into a policy that already holds N, beside writing the 2N rules at once, and prints
both times and their ratio: a ratio near 1 means merging costs what writing does.
"""

from __future__ import annotations

import resource
import sys
import time

from cpg_core import render_or_merge
from cpg_core._base.rules import Atom, EndpointPeer, rules_from_atoms

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


def peers() -> None:
    for count in (1_000, 2_000, 4_000):
        old = [
            Atom("ingress", EndpointPeer(f"ns{i}", (("app", "old"),)), "TCP", 8080)
            for i in range(count)
        ]
        new = [
            Atom("ingress", EndpointPeer(f"ns{i}", (("app", "new"),)), "TCP", 8080)
            for i in range(count)
        ]
        text = render_or_merge(
            None, name="cpg-x", namespace="shop", selector=SELECTOR, rules=rules_from_atoms(old)
        )
        start = time.perf_counter()
        render_or_merge(
            None,
            name="cpg-x",
            namespace="shop",
            selector=SELECTOR,
            rules=rules_from_atoms(old + new),
        )
        first = time.perf_counter() - start
        start = time.perf_counter()
        warm = render_or_merge(
            text, name="cpg-x", namespace="shop", selector=SELECTOR, rules=rules_from_atoms(new)
        )
        merged = time.perf_counter() - start
        _forget_renderings()  # a file another process wrote: read as YAML
        start = time.perf_counter()
        cold = render_or_merge(
            text, name="cpg-x", namespace="shop", selector=SELECTOR, rules=rules_from_atoms(new)
        )
        read = time.perf_counter() - start
        assert cold == warm
        print(
            f"{count:>6,} new peers: merge {merged:6.2f} s (file read from disk: {read:5.2f} s), "
            f"first write of all {first:5.2f} s, ratio {merged / first:5.1f} ({read / first:4.1f})"
        )


def _forget_renderings() -> None:
    """Empty the memory of renderings a live session's flushes rely on (absent before it)."""
    try:
        from cpg_core._synthesis import merge as _merge
    except ImportError:  # pragma: no cover
        return
    rendered = getattr(_merge, "_RENDERED", None)
    if rendered is not None:
        rendered.clear()


def main() -> None:
    if sys.argv[1:] == ["peers"]:
        peers()
        return
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
