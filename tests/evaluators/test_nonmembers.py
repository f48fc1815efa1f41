"""CellContext.nonmember_examples: the non-members of membership, dataset_inference and codec
come from another split of the cell's benchmark, never the cell's own."""

from __future__ import annotations

import pytest

from medexp.config import compose
from medexp.evaluators.context import CellContext


@pytest.mark.parametrize("detector", ["membership", "dataset_inference", "codec"])
def test_the_cells_own_split_is_refused_before_anything_loads(detector, tmp_path):
    cfg = compose([f"detector={detector}", f"paths.cache_dir={tmp_path}"])
    ctx = CellContext(cfg, 0, None, [], tmp_path)
    with pytest.raises(ValueError, match=f"detector.nonmember_split={cfg.bench.split} is the cell's own split"):
        ctx.nonmember_examples(str(cfg.bench.split))
    assert not any(tmp_path.iterdir())  # no benchmark generated
