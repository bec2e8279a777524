"""On the file log a work unit writes all its tasks' outputs and changelogs as two shared
files per stage; changelog truncation after snapshots deletes those files once no partition
holds a slice of them, and a task restored elsewhere reads its changelog from them."""

from __future__ import annotations

from pathlib import Path

from streamtide.log import open_log
from streamtide.log.shared_segments import SHARED_DIR, parse_slice
from tests.engine.crash_points import (
    check_counts,
    counting_topology,
    expected_counts,
    outcome,
    setup,
)
from tests.engine.local_driver import LocalDriver
from tests.engine.scenarios import make_events, write_events


def own_segment_files(root: Path, topics: list[str]) -> list[Path]:
    return [f for t in topics for f in (root / t).glob("*/segments/*.arrow")]


def test_batches_write_shared_files_and_truncation_deletes_them(tmp_path: Path) -> None:
    config = setup(tmp_path, events=240).with_overrides(snapshot_interval=2)
    driver = LocalDriver(counting_topology(), config)
    driver.run_until_caught_up()
    log = open_log(config.log)
    root = Path(log.root)
    changelog = next(t for t in log.list_topics() if t.endswith("-changelog"))
    assert driver.batch >= 4
    # every output and changelog record of the engine went into shared files
    assert own_segment_files(root, ["out", changelog]) == []
    for partition in range(log.partitions(changelog)):
        assert log.begin_offset(changelog, partition) > 0  # truncated after snapshots
    files = {p.name for p in (root / SHARED_DIR).iterdir() if not p.name.startswith(".")}
    held = set()
    for topic in log.list_topics():
        for partition in range(log.partitions(topic)):
            held |= {
                parse_slice(seg.name)[0]  # type: ignore[index]
                for seg in log._partition(topic, partition).refresh().segments
                if parse_slice(seg.name)
            }
    assert held <= files
    assert len(files - held) == 0  # nothing kept that no partition holds (swept, truncated)
    assert log.list_unsealed_shared() == []
    # the changelog files of the truncated batches are gone; the outputs' stay
    per_stage_and_unit = 2 * driver.batch * 2
    assert len(files) < per_stage_and_unit
    check_counts(outcome(driver, "crash"), expected_counts(make_events(240, seed=11)))
    log.close()


def test_a_task_restored_from_snapshot_and_shared_changelog_slices_counts_on(
    tmp_path: Path,
) -> None:
    config = setup(tmp_path, events=120).with_overrides(snapshot_interval=2)
    LocalDriver(counting_topology(), config).run_until_caught_up()
    more = make_events(240, seed=11)[120:]
    write_events(config.log, more)
    moved = config.with_overrides(state_dir=str(tmp_path / "elsewhere"))  # no local state
    driver = LocalDriver(counting_topology(), moved)
    driver.run_until_caught_up()
    events = make_events(120, seed=11) + more
    check_counts(outcome(driver, "crash"), expected_counts(events))
