"""Cilium's policy grammar and semantics: the bounded YAML reader, what Cilium accepts, the matcher and its index, tiers, equivalence.

A layer of cpg_core (docs/ARCHITECTURE.md, "The core's layers"): it imports only the layers
below it, and nothing private crosses into another layer: what the other folders take from
it, they take from this package (the table below, loaded on first use), never from its
private modules."""
