"""puaudit_runtime: where work runs and how its results land, below both libraries.

Used alike by the solver (``puaudit_jax.ot``), the probes (``probes``), the command line, the
tests and the experiments; imports neither ``puaudit_jax`` nor ``probes``.

    mesh      device meshes (``make_mesh``, ``pad_to_multiple``, the axis names)
    cluster   joining a ``jax.distributed`` cluster; the rows each process loads
    flags     ``--devices`` / ``--mesh`` / cluster flags of every command line
    launch    fresh interpreters with forced host devices, and clusters of them on 127.0.0.1
    files     atomic result files (json, csv, parquet, text, figures)
    hlo       bytes a compiled sharded program exchanges between devices, from its HLO
    cache     the persistent compilation cache under ``$PUAUDIT_CACHE`` (``enable_compilation_cache``)
    jit       ``jax.jit`` with XLA:CPU's fast-compile options where compiling costs more than running
    checks    range checks of settings (``check_int``, ``check_fraction``, ...), a ValueError naming them
"""
