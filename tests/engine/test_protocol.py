"""The protocol's records and decisions, without files or Spark."""

from __future__ import annotations

import json

import pytest

from streamtide.engine import protocol
from streamtide.engine.protocol import (
    CommitRecord,
    EpochRecord,
    OffsetsRecord,
    PreparedTask,
    PrepareRecord,
    SealRecord,
    StageStep,
    TaskReport,
    UnitReport,
)
from streamtide.errors import CorruptRecordError, UnsupportedVersionError
from streamtide.log.api import SegmentRef

REF = SegmentRef("out", 1, "w+0123.arrow", "app/b3/s0/0_1/x", 7)
PREPARE = PrepareRecord(
    batch=3,
    stage=0,
    epoch=2,
    attempt="e2-abcd",
    tasks={"0_1": PreparedTask("0_1", "exec-1", (REF,), {"offsets": {"events:1": 9}})},
    merged=(SegmentRef("app-r-repartition", 0, "m+1.arrow", "app/b3/s0/merged/e2-abcd/", 4),),
    reports=(UnitReport("exec-1", "1", (TaskReport("0_1", 5, {"out": 7}, 2, {"s": 4}),)),),
)
RECORDS = [
    EpochRecord(4, "host:12:ab", 1_700_000_000_000),
    OffsetsRecord(3, 0, 2, {"0_0": {"events": (0, 40)}, "0_1": {}}, {"events": "id1"}),
    PREPARE,
    SealRecord(3, 0, 2, "e2-abcd"),
    CommitRecord(3, 2, {"0_1": {"offsets": {"events:1": 9}}}, {"0_1": "exec-1"}, {"batch": 3}),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_every_record_round_trips_with_its_version_and_kind(record) -> None:
    data = protocol.encode(record)
    raw = json.loads(data)
    assert raw["v"] == protocol.PROTOCOL_VERSION
    assert protocol.decode(data, raw["kind"], "somewhere") == record


def test_unversioned_records_of_earlier_releases_decode_as_version_zero() -> None:
    ranges = protocol.decode(b'{"0_0": {"events": [3, 9]}}', "offsets", "f", batch=5, stage=1)
    assert ranges == OffsetsRecord(5, 1, 0, {"0_0": {"events": (3, 9)}})
    legacy_prepare = {
        "tasks": {"0_1": {"segments": [REF.as_dict()], "state": {}, "client": "driver"}},
        "merged": [],
        "reports": [],
    }
    prepare = protocol.decode(json.dumps(legacy_prepare).encode(), "prepare", "f", batch=5, stage=0)
    assert prepare.attempt is None and prepare.epoch == 0
    # the seal ids an earlier release used, so a roll-forward seals idempotently
    assert prepare.seals("app") == [(REF, "app/b5/0_1")]
    commit = protocol.decode(b'{"tasks": {}, "owners": {}}', "commit", "f", batch=5)
    assert commit.batch == 5 and commit.epoch == 0


def test_seal_ids_name_the_attempt() -> None:
    seals = dict((ref.name, sid) for ref, sid in PREPARE.seals("app"))
    assert seals == {"w+0123.arrow": "app/b3/0_1/e2-abcd", "m+1.arrow": "app/b3/s0/merged/e2-abcd"}
    other = PrepareRecord(3, 0, 3, "e3-ffff", PREPARE.tasks)
    assert other.seals("app")[0][1] != PREPARE.seals("app")[0][1]


def test_a_newer_version_is_refused_naming_both_versions() -> None:
    with pytest.raises(UnsupportedVersionError, match=r"version 9.*up to 1"):
        protocol.decode(b'{"v": 9, "kind": "commit"}', "commit", "/x/commit.json")


@pytest.mark.parametrize(
    "data", [b'{"tasks": {"0_0": {', b"", b"[1, 2]", b'{"v": 1, "kind": "commit", "batch": 1}']
)
def test_an_unreadable_record_names_its_path(data) -> None:
    with pytest.raises(CorruptRecordError, match=r"/apps/x/commit\.json"):
        protocol.decode(data, "commit", "/apps/x/commit.json", batch=1)


def test_a_record_of_another_kind_is_refused() -> None:
    with pytest.raises(CorruptRecordError, match="'seal' record, not 'commit'"):
        protocol.decode(protocol.encode(RECORDS[3]), "commit", "f")


def test_the_next_step_of_a_stage_follows_from_the_records_found() -> None:
    offsets, prepare, seal = RECORDS[1], PREPARE, RECORDS[3]
    assert protocol.stage_step(None, None, None) is StageStep.FIX_RANGES
    assert protocol.stage_step(offsets, None, None) is StageStep.RUN
    assert protocol.stage_step(offsets, prepare, None) is StageStep.SEAL
    assert protocol.stage_step(offsets, prepare, seal) is StageStep.DONE


def test_resume_and_epoch_decisions() -> None:
    assert protocol.resume_batch(None) == 0
    assert protocol.resume_batch(RECORDS[4]) == 4
    assert protocol.next_epoch([]) == 1 and protocol.next_epoch([1, 2, 5]) == 6
    assert protocol.fenced_by(3, [1, 2, 3]) is None
    assert protocol.fenced_by(3, [1, 3, 4]) == 4


def test_the_batch_of_a_segment_writer() -> None:
    assert protocol.batch_of_writer("app", "app/b12/s0/0_1/abc") == 12
    assert protocol.batch_of_writer("app", "app/b3/s1/merged/e2-x/t/0") == 3
    assert protocol.batch_of_writer("app", "append") is None
    assert protocol.batch_of_writer("app", "app2/b3/s0/0_0/x") is None
    assert protocol.batch_of_writer("app", "app/bx/s0") is None
