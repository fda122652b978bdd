"""Cilium's policy grammar and semantics: the bounded YAML reader, what Cilium accepts, the matcher and its index, tiers, equivalence.

A layer of cpg_core (docs/ARCHITECTURE.md, "The core's layers"): it imports only the layers
below it, and no name starting with an underscore crosses into another layer."""
