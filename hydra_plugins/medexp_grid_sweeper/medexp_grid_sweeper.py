"""``hydra/sweeper=medexp_grid``: Hydra's basic sweeper plus declared grids.

Without ``grid`` it is exactly the basic sweeper: ``-m model=a,b bench=x,y`` runs the
cartesian product of the command-line sweeps. With ``grid`` (a list of blocks, usually set by
an experiment preset), the jobs are the union over blocks of each block's cartesian product:

    hydra:
      mode: MULTIRUN
      sweeper:
        grid:
          - {model: [demo_clean, demo_leaky], detector: exch_rank, control: [none, order_hash]}
          - {model: demo_leaky, detector: mink_tail, detector.cohort: "[demo_clean,demo_leaky]"}

A block maps an override key to a value: a scalar is one value, a list is a sweep over its
items. A value is written exactly as after ``key=`` on the command line (a string is used
verbatim, so ``"[a,b]"`` sets a list and ``"a,b"`` sweeps like ``key=a,b`` would).

Each block is combined with the command-line overrides: a command-line sweep multiplies every
block, and a command-line value replaces a block's value for the same key (the command line
is the most specific, so ``experiment=<grid> model=demo_clean`` runs only demo_clean's cells of
the preset). A job produced by several blocks is launched once.

Every launched job (its number and overrides) is recorded in ``<sweep dir>/medexp_jobs.json``
so that a sweep callback can tell which jobs never reported back.
"""

# No ``from __future__ import annotations``: Hydra's plugin scan executes this module before it
# is in sys.modules, where dataclasses cannot resolve string annotations.
import itertools
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import CompactHydraException, OverrideParseException
from omegaconf import OmegaConf

from medexp.kernel.atomic import atomic_write_bytes

log = logging.getLogger(__name__)

JOBS_FILE = "medexp_jobs.json"  # written in the sweep dir: [{"num": int, "overrides": [str]}]

_SCALARS = (str, int, float, bool, type(None))


@dataclass
class MedexpGridSweeperConf:
    _target_: str = "hydra_plugins.medexp_grid_sweeper.medexp_grid_sweeper.MedexpGridSweeper"
    max_batch_size: int | None = None  # jobs handed to the launcher at once (None: all)
    params: dict[str, str] | None = None  # extra sweep overrides, as in the basic sweeper
    grid: list[dict[str, Any]] | None = None  # blocks; their union is the sweep


ConfigStore.instance().store(group="hydra/sweeper", name="medexp_grid", node=MedexpGridSweeperConf, provider="medexp")


class GridError(CompactHydraException):
    """A grid block that cannot be expanded (Hydra prints the message without a traceback)."""


class MedexpGridSweeper(BasicSweeper):
    """The basic sweeper, with jobs taken from ``grid`` blocks when the config declares them."""

    def __init__(
        self,
        max_batch_size: int | None,
        params: dict[str, str] | None = None,
        grid: Sequence[Any] | None = None,
    ) -> None:
        super().__init__(max_batch_size=max_batch_size, params=params)
        self.grid = OmegaConf.to_container(grid, resolve=True) if OmegaConf.is_config(grid) else grid
        self._launched: list[dict[str, Any]] = []

    def split_arguments(self, overrides: list[Override], max_batch_size: int | None) -> list[list[list[str]]]:
        """Jobs in batches: the basic sweeper's product, or the grid's union merged with ``overrides``."""
        if self.grid is None:
            batches = BasicSweeper.split_arguments(overrides, max_batch_size)
        else:
            loader = self.hydra_context.config_loader if self.hydra_context is not None else None
            jobs = expand_grid(self.grid, overrides, OverridesParser.create(config_loader=loader))
            log.info("medexp_grid: %d blocks give %d distinct jobs", len(self.grid), len(jobs))
            batches = list(self.split_overrides_to_chunks(jobs, max_batch_size))
        self._check_values([job for batch in batches for job in batch])
        return batches

    def _check_values(self, jobs: Sequence[Sequence[str]]) -> None:
        """Compose every job and check its values before any job runs: a bad value in one cell
        stops the sweep with the cell named, instead of failing that cell after the others ran."""
        from medexp.config.ranges import ConfigRangeError, validate

        if self.hydra_context is None or self.config is None:
            return
        for job in jobs:
            cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(job))
            try:
                validate(cfg)
            except ConfigRangeError as error:
                raise GridError(f"job {' '.join(job)}: {error}") from error

    def get_job_batch(self) -> Sequence[Sequence[str]]:
        """The next batch, added to the sweep dir's job list before the launcher gets it."""
        batch = super().get_job_batch()
        first = len(self._launched)
        self._launched.extend({"num": first + i, "overrides": list(job)} for i, job in enumerate(batch))
        assert self.config is not None
        path = Path(str(self.config.hydra.sweep.dir)) / JOBS_FILE
        atomic_write_bytes(path, json.dumps(self._launched, indent=1).encode("utf-8"))
        return batch


def expand_grid(blocks: Sequence[Any], command_line: Sequence[Override], parser: OverridesParser) -> list[list[str]]:
    """The jobs (override lists) of ``blocks`` combined with the parsed command-line overrides."""
    if not isinstance(blocks, (list, tuple)) or not blocks:
        raise GridError(f"hydra.sweeper.grid must be a non-empty list of blocks, got {blocks!r}")
    fixed = _axes(command_line)
    jobs: list[list[str]] = []
    seen = set()
    for index, block in enumerate(blocks):
        axes = _block_axes(index, block, parser)
        axes.update(fixed)  # the command line wins over the block for the same key
        for job in itertools.product(*axes.values()):
            identity = frozenset(job)  # override order does not change the composed config
            if identity not in seen:
                seen.add(identity)
                jobs.append(list(job))
    return jobs


def read_launched_jobs(sweep_dir: Path) -> list[dict[str, Any]] | None:
    """The jobs this sweeper launched in ``sweep_dir`` (None when it recorded none there)."""
    path = Path(sweep_dir) / JOBS_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def _block_axes(index: int, block: Any, parser: OverridesParser) -> dict[str, list[str]]:
    where = f"hydra.sweeper.grid[{index}]"
    if not isinstance(block, dict) or not block:
        raise GridError(f"{where} must be a non-empty mapping of override key to value(s), got {block!r}")
    axes: dict[str, list[str]] = {}
    for key, value in block.items():
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        if not values:
            raise GridError(f"{where}.{key} is an empty list: a sweep needs at least one value")
        choices: list[str] = []
        for item in values:
            if not isinstance(item, _SCALARS):
                raise GridError(
                    f"{where}.{key}: {item!r} is not a scalar. Use a scalar, a list of scalars (a sweep) "
                    f'or a string written as on the command line (e.g. "[a,b]" for a list value)'
                )
            try:
                (override,) = parser.parse_overrides([f"{key}={_override_text(item)}"])
            except OverrideParseException as error:
                raise GridError(f"{where}.{key}: {item!r} is not a valid override value: {error}") from error
            identity, strings = _choices(override)
            choices.extend(strings)
        axes[identity] = choices
    return axes


def _axes(overrides: Sequence[Override]) -> dict[str, list[str]]:
    axes: dict[str, list[str]] = {}
    for override in overrides:
        identity, strings = _choices(override)
        axes[identity] = strings  # a repeated key: the last one counts, as in the basic sweeper
    return axes


def _choices(override: Override) -> tuple[str, list[str]]:
    """(identity of the overridden key, its ``key=value`` strings: several for a sweep)."""
    identity = override.key_or_group + (f"@{override.package}" if override.package else "")
    key = override.get_key_element()
    if not override.is_sweep_override():
        return identity, [f"{key}={override.get_value_element_as_str()}"]
    if not override.is_discrete_sweep():
        raise GridError(f"{override.input_line}: only discrete sweeps (a,b or range or choice) can be gridded")
    return identity, [f"{key}={value}" for value in override.sweep_string_iterator()]


def _override_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)
