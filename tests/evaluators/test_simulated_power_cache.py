"""The simulated-MDE cache (medexp.evaluators.simulated_power_cache): a hit is read back without
simulating, a corrupt or tampered file is recomputed, and the request decides the file."""

from __future__ import annotations

import json

import pytest

from medexp.detectors import power_simulation
from medexp.evaluators import simulated_power_cache as sp

SIZES = {"examples": 60, "models": 4}


@pytest.fixture()
def counted(monkeypatch):
    """Counts the simulations run (the wrapper imports simulated_mde from its module at call time)."""
    calls = []
    real = power_simulation.simulated_mde

    def simulated_mde(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(power_simulation, "simulated_mde", simulated_mde)
    return calls


def only_file(cache_dir):
    files = list((cache_dir / "power").glob("*.json"))
    assert len(files) == 1
    return files[0]


def test_a_cache_hit_returns_the_same_mde_without_simulating(tmp_path, counted):
    first = sp.cached_simulated_mde("loss", SIZES, 0.05, 0.8, tmp_path, n_sim=20)
    again = sp.cached_simulated_mde("loss", SIZES, 0.05, 0.8, tmp_path, n_sim=20)
    assert again == first and len(counted) == 1
    # another request (alpha, draws or an assumption) is another file
    sp.cached_simulated_mde("loss", SIZES, 0.01, 0.8, tmp_path, n_sim=20)
    sp.cached_simulated_mde("mink_tail", SIZES, 0.05, 0.8, tmp_path, {"tail_rate": 0.02}, n_sim=20)
    assert len(counted) == 3 and len(list((tmp_path / "power").glob("*.json"))) == 3


@pytest.mark.parametrize("damage", ["truncated", "tampered"])
def test_a_corrupt_cache_file_is_recomputed(tmp_path, counted, damage):
    first = sp.cached_simulated_mde("loss", SIZES, 0.05, 0.8, tmp_path, n_sim=20)
    path = only_file(tmp_path)
    if damage == "truncated":
        path.write_text(path.read_text()[:40])
    else:  # a plausible but wrong result: its digest no longer matches
        record = json.loads(path.read_text())
        record["result"]["mde"] = 0.001
        path.write_text(json.dumps(record))
    again = sp.cached_simulated_mde("loss", SIZES, 0.05, 0.8, tmp_path, n_sim=20)
    assert again == first and len(counted) == 2
    assert json.loads(path.read_text())["result"]["mde"] == first.mde  # rewritten whole


def test_the_draws_come_from_the_environment(monkeypatch):
    monkeypatch.setenv(sp.SIMULATIONS_VARIABLE, "37")
    assert sp.simulation_draws() == 37
    monkeypatch.setenv(sp.SIMULATIONS_VARIABLE, "many")
    with pytest.raises(ValueError, match="positive whole number"):
        sp.simulation_draws()
    monkeypatch.delenv(sp.SIMULATIONS_VARIABLE)
    assert sp.simulation_draws() == power_simulation.DEFAULT_SIMULATIONS


def test_the_n_an_effect_needs_is_cached_too(tmp_path, monkeypatch):
    needed = sp.cached_simulated_n("loss", SIZES, 0.6, 0.05, 0.8, tmp_path, n_sim=20)
    monkeypatch.setattr(power_simulation, "simulated_n", lambda *args, **kwargs: pytest.fail("simulated again"))
    assert sp.cached_simulated_n("loss", SIZES, 0.6, 0.05, 0.8, tmp_path, n_sim=20) == needed
