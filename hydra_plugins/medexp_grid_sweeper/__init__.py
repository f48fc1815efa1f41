"""The ``medexp_grid`` Hydra sweeper (see :mod:`.medexp_grid_sweeper`)."""
