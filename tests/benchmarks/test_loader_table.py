"""The loader table covers every bench format, and every loader it names imports."""

from medexp.benchmarks import LOADERS
from medexp.config.schemas import BenchFormat
from medexp.kernel.registry import import_object


def test_every_bench_format_has_a_loader_and_no_loader_lacks_a_format():
    assert set(LOADERS) == {fmt.value for fmt in BenchFormat}


def test_every_loader_imports():
    for fmt, spec in LOADERS.items():
        assert callable(import_object(spec)), f"{fmt}: {spec}"
