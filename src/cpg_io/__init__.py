"""cpg_io: the adapters that touch the world — flow files, atomic stores, the replay pipeline."""
