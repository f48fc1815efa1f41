"""Simulated MDEs (and the n a target effect needs), cached as JSON under ``<cache_dir>/power``.

The simulations are ``medexp.detectors.power_simulation``'s; a cold answer takes seconds, so
each result is stored under a stable hash of everything it depends on (kind, sizes, alpha,
power, draws, assumptions, ``SIMULATION_VERSION``) and read back by cells and by
``python -m medexp.power``. A file is written atomically and carries a digest of its request
and result; one that does not parse, answers another request or fails its digest is recomputed,
never trusted.

``MEDEXP_POWER_SIMULATIONS`` sets the draws per rejection rate (default
``power_simulation.DEFAULT_SIMULATIONS``): the test suite sets it small, so that the cells it
runs on fresh caches do not each spend seconds simulating.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Mapping

from medexp.kernel.atomic import atomic_write_bytes
from medexp.detectors.power_simulation import SIMULATION_VERSION, SimulatedMDE, assumptions_of

log = logging.getLogger("medexp")

SIMULATIONS_VARIABLE = "MEDEXP_POWER_SIMULATIONS"


def simulation_draws() -> int:
    """Draws per rejection rate: ``MEDEXP_POWER_SIMULATIONS`` when set, else the module default."""
    from medexp.detectors.power_simulation import DEFAULT_SIMULATIONS

    value = os.environ.get(SIMULATIONS_VARIABLE)
    if value is None:
        return DEFAULT_SIMULATIONS
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{SIMULATIONS_VARIABLE} must be a positive whole number, got {value!r}")
    return int(value)


def cached_simulated_mde(kind: str, sizes: Mapping[str, float], alpha: float, power: float, cache_dir,
                         assumptions: Mapping[str, float] | None = None, n_sim: int | None = None) -> SimulatedMDE:
    """:func:`medexp.detectors.power_simulation.simulated_mde`, computed once per request."""
    from medexp.detectors.power_simulation import simulated_mde

    n_sim = simulation_draws() if n_sim is None else n_sim
    values = assumptions_of(kind, assumptions)
    request = _request("mde", kind, sizes, alpha, power, n_sim, values)
    result = _cached(request, cache_dir,
                     lambda: asdict(simulated_mde(kind, sizes, alpha, power, n_sim, values)))
    return SimulatedMDE(**result)


def cached_simulated_n(kind: str, sizes: Mapping[str, float], effect: float, alpha: float, power: float, cache_dir,
                       assumptions: Mapping[str, float] | None = None, n_sim: int | None = None) -> int | None:
    """:func:`medexp.detectors.power_simulation.simulated_n`, computed once per request."""
    from medexp.detectors.power_simulation import simulated_n

    n_sim = simulation_draws() if n_sim is None else n_sim
    values = assumptions_of(kind, assumptions)
    request = {**_request("n", kind, sizes, alpha, power, n_sim, values), "effect": float(effect)}
    return _cached(request, cache_dir,
                   lambda: {"n": simulated_n(kind, sizes, effect, alpha, power, n_sim, values)})["n"]


def cache_path(request: Mapping, cache_dir) -> Path:
    from medexp.kernel.hashing import stable_hash

    return Path(cache_dir) / "power" / f"{stable_hash(request)}.json"


def _request(what: str, kind: str, sizes, alpha: float, power: float, n_sim: int, assumptions) -> dict:
    return {"what": what, "kind": kind, "sizes": {name: float(value) for name, value in sizes.items()},
            "alpha": float(alpha), "power": float(power), "n_sim": int(n_sim),
            "assumptions": {name: float(value) for name, value in assumptions.items()},
            "version": SIMULATION_VERSION}


def _cached(request: dict, cache_dir, compute: Callable[[], dict]) -> dict:
    from medexp.kernel.hashing import stable_hash

    path = cache_path(request, cache_dir)
    stored = _read(path, request)
    if stored is not None:
        return stored
    result = compute()
    record = {"request": request, "result": result, "digest": stable_hash([request, result])}
    atomic_write_bytes(path, json.dumps(record, indent=1).encode("utf-8"))
    return result


def _read(path: Path, request: dict) -> dict | None:
    """The stored result when ``path`` holds this request's intact record; None (recompute) otherwise."""
    from medexp.kernel.hashing import stable_hash

    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        intact = record["request"] == request and record["digest"] == stable_hash([request, record["result"]])
    except (ValueError, KeyError, TypeError):
        intact = False
    if not intact:
        log.warning("simulated power cache %s is corrupt or answers another request: recomputing it", path)
        return None
    return record["result"]


def with_simulated_mde(result, kind: str, sizes: Mapping[str, float], alpha: float, cache_dir):
    """``result`` with the metric ``mde``: the kind's simulated MDE at the cell's sizes and alpha,
    power 0.8 (``detector_power.MDE_POWER``, as the formula kinds log theirs), in its effect unit."""
    from medexp.stats.detector_power import MDE_POWER

    result.metrics["mde"] = cached_simulated_mde(kind, sizes, alpha, MDE_POWER, cache_dir).mde
    return result
