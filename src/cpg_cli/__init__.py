"""cpg_cli: the ``cpg`` command line, a composition root over cpg_core and cpg_io."""
