"""External per-item tables joined to the tracked cells (the report's ``external_tables``).

A table another tool published about a benchmark's items (the controlled audit's top-K lists,
``outputs/tail_enrichment_topk/<model>__pathvqa.json``) names items in that tool's scheme; the
benchmark's ``external_ids`` (:mod:`medexp.benchmarks.external_ids`) maps them to medexp's ids.
The report writes, per table, ``external/<name>.csv``: every row of the table with its medexp
``example_id`` (empty where it names no item), joined with the per-example table
(``per_example.parquet``) of every finished cell of that benchmark, one block of rows per cell
(``cell_key``, ``run_id`` and the cell's columns prefixed ``cell.``). A table whose ids match no
cell is still written, with its ids resolved.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Iterable, Sequence

from medexp.report.cells import CellRun

log = logging.getLogger("medexp")

PER_EXAMPLE = "per_example.parquet"
EXTERNAL_DIR = "external"


def table_name(table_cfg) -> str:
    """The output name of an external table: ``name`` or the file's stem, as a safe file name."""
    name = table_cfg.get("name") or Path(str(table_cfg.path)).stem
    return re.sub(r"[^0-9A-Za-z_.-]+", "_", name)


def joined_external_tables(tables_cfg: Sequence, tracker, cells: Iterable[CellRun]) -> dict[str, object]:
    """Output name -> the joined DataFrame, for every configured external table."""
    import pandas as pd

    from medexp.benchmarks.external_ids import IdScheme, join_table, read_table
    from medexp.config import bench_config

    cells = list(cells)
    joined_tables = {}
    for table_cfg in tables_cfg:
        scheme = IdScheme.from_config(bench_config(str(table_cfg.bench)))
        joined = join_table(read_table(table_cfg.path), scheme, None, str(table_cfg.id_column), str(table_cfg.path))
        blocks = []
        for cell in (cell for cell in cells if cell.bench == table_cfg.bench):
            try:
                per_example = tracker.read_table(cell.run_id, PER_EXAMPLE)
            except ValueError as error:
                log.info("external table %s: cell %s has no per-example table (%s)", table_cfg.path, cell.key, error)
                continue
            if "example_id" not in per_example.columns:
                continue
            cell_columns = per_example.rename(columns={c: f"cell.{c}" for c in per_example.columns if c != "example_id"})
            block = joined.frame.merge(cell_columns, on="example_id", how="left")
            block.insert(0, "cell_key", cell.key)
            block.insert(1, "run_id", cell.run_id)
            blocks.append(block)
        frame = pd.concat(blocks, ignore_index=True) if blocks else joined.frame
        log.info("external table %s: %d rows, %d name an item of bench=%s (scheme %s), joined with %d cell(s)%s",
                 table_cfg.path, len(joined.frame), joined.n_matched, table_cfg.bench, scheme.prefix, len(blocks),
                 f"; unmatched ids, e.g. {joined.unmatched[:3]}" if joined.unmatched else "")
        joined_tables[table_name(table_cfg)] = frame
    return joined_tables


def write_external_tables(tables_cfg: Sequence, tracker, cells: Iterable[CellRun], output_dir: Path) -> list[str]:
    """Write ``external/<name>.csv`` for every configured table; returns the relative paths."""
    from medexp.kernel.atomic import atomic_path

    written = []
    for name, frame in joined_external_tables(tables_cfg, tracker, cells).items():
        relative = f"{EXTERNAL_DIR}/{name}.csv"
        with atomic_path(Path(output_dir) / relative) as tmp:
            frame.to_csv(tmp, index=False)
        written.append(relative)
    return written
