"""build_directory_once: one complete directory, and no staging left by builds that were killed."""

import json
import os

import pytest

from medexp.kernel.atomic import build_directory_once


def _writes(text):
    def build(staging):
        (staging / "weights.txt").write_text(text)
        return {"built": text}
    return build


def test_a_killed_builds_staging_is_removed_by_the_next_build(tmp_path):
    target = tmp_path / "model-abc"
    for pid in (4914, 30015):  # what two hard-killed builds left: partial files, no manifest
        leftover = tmp_path / f".model-abc.tmp-{pid}"
        leftover.mkdir()
        (leftover / "weights.txt").write_text("half")
    other = tmp_path / ".model-abd.tmp-77"  # another target's staging is not this build's business
    other.mkdir()

    build_directory_once(target, "manifest.json", _writes("full"))

    assert sorted(p.name for p in tmp_path.iterdir()) == [".model-abd.tmp-77", "model-abc", "model-abc.lock"]
    assert (target / "weights.txt").read_text() == "full"
    assert json.loads((target / "manifest.json").read_text()) == {"built": "full"}


def test_a_failed_build_leaves_neither_target_nor_staging(tmp_path):
    def fails(staging):
        (staging / "weights.txt").write_text("half")
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError):
        build_directory_once(tmp_path / "model-abc", "manifest.json", fails)
    assert [p.name for p in tmp_path.iterdir()] == ["model-abc.lock"]


def test_a_complete_target_is_returned_without_building(tmp_path):
    target = build_directory_once(tmp_path / "model-abc", "manifest.json", _writes("first"))
    assert build_directory_once(target, "manifest.json", _writes("second")) == target
    assert (target / "weights.txt").read_text() == "first"
    assert not list(tmp_path.glob(f".model-abc.tmp-{os.getpid()}"))


def test_a_process_waiting_for_a_build_says_so_with_its_progress(tmp_path, caplog):
    import logging
    import threading
    import time

    from filelock import FileLock

    from medexp.kernel.atomic import waiting_lock

    held = threading.Event()

    def build_elsewhere() -> None:  # another builder holding the lock for half a second
        with FileLock(str(tmp_path / "x.lock")):
            held.set()
            time.sleep(0.5)

    threading.Thread(target=build_elsewhere).start()
    held.wait()
    with caplog.at_level(logging.INFO, logger="medexp"):
        started = time.monotonic()
        with waiting_lock(str(tmp_path / "x.lock"), "another process building x", lambda: "3.0 MiB written so far",
                          every_s=0.1):
            waited = time.monotonic() - started
    assert waited >= 0.4
    notes = [record.getMessage() for record in caplog.records if "waiting for" in record.getMessage()]
    assert notes and notes[0].startswith(f"waiting for another process building x (lock {tmp_path / 'x.lock'}, ")
    assert notes[0].endswith("; 3.0 MiB written so far)")
