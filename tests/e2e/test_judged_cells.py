"""A cell judged another way is another computation, and re-judging one is cheap: the same
answering cell under ``judge=exact`` after ``judge=read`` is a new run with its own ``medexp.judge``
tag and inputs hash, asks the server nothing (the replies come from the answer cache), and is
reused when asked again; a detector that reads no replies is reused whatever the judge."""

from __future__ import annotations

from tests.answers.server import ChatServer
from tests.e2e.test_answer_faults import served
from tests.e2e.test_answer_faults import mc, store  # noqa: F401  (the fixtures these tests use)
from tests.e2e.test_mmdetect_cells import honest


def test_a_cell_judged_another_way_is_a_new_run_that_asks_nothing_again(mc):  # noqa: F811
    with ChatServer(answer=honest(mc.truth)) as server:
        read = mc(*served(server, "judged_twice"), "detector=option_order")
        asked = len(server.requests)
        exact = mc(*served(server, "judged_twice"), "detector=option_order", "judge=exact")
        again = mc(*served(server, "judged_twice"), "detector=option_order", "judge=exact")
        assert len(server.requests) == asked  # re-judged from the cached replies
    assert read.status == exact.status == "FINISHED" and exact.run_id != read.run_id
    assert again.status == "CACHED" and again.run_id == exact.run_id
    tags = {outcome.run_id: _tags(mc.uri, outcome.run_id) for outcome in (read, exact)}
    assert tags[read.run_id]["medexp.judge"].startswith("read ")
    assert tags[exact.run_id]["medexp.judge"].startswith("exact ")
    assert tags[read.run_id]["medexp.inputs_hash"] != tags[exact.run_id]["medexp.inputs_hash"]
    # the honest server answers a bare letter: both judges read it alike
    assert read.metrics["n_verdict.correct"] == exact.metrics["n_verdict.correct"] > 0


def test_a_detector_that_reads_no_replies_is_reused_whatever_the_judge(mc):  # noqa: F811
    first = mc("model=demo_leaky_mc", "detector=exch", "detector.shards=4", "detector.permutations=9")
    second = mc("model=demo_leaky_mc", "detector=exch", "detector.shards=4", "detector.permutations=9", "judge=exact")
    assert first.status == "FINISHED" and second.status == "CACHED" and second.run_id == first.run_id


def _tags(uri: str, run_id: str) -> dict:
    from mlflow.tracking import MlflowClient

    return MlflowClient(uri).get_run(run_id).data.tags
