"""The value types of ``log/api.py``."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from streamtide.log import LogRecord, SegmentRef, TopicDescription


def test_log_record_defaults_and_immutability() -> None:
    r = LogRecord(b"k", b"v", 5)
    assert r.headers == () and r.offset is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.key = b"x"  # type: ignore[misc]
    assert dataclasses.replace(r, offset=3) == LogRecord(b"k", b"v", 5, (), 3)


def test_segment_ref_round_trips_through_dict_and_pickle() -> None:
    ref = SegmentRef("t", 2, "w+0123.arrow", "batch-1/0_2", 7)
    assert SegmentRef.from_dict(ref.as_dict()) == ref
    assert pickle.loads(pickle.dumps(ref)) == ref


def test_topic_description_fields() -> None:
    assert TopicDescription("t", 3).partitions == 3
