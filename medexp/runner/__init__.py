"""A cell's life: the reuse check, evaluation, the tracked run and its signals (cell_run), the
``python -m medexp`` entry (entry), and the sweep's parent run and summary (sweep)."""
