"""What a run is asked to do: the option table, the typed requests built from it, sessions and the live generator.

A layer of cpg_core (docs/ARCHITECTURE.md, "The core's layers"): it imports only the layers
below it, and no name starting with an underscore crosses into another layer."""
