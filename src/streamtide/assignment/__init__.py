"""Task assignment: the sticky, cooperative assignor and its versioned metadata records.

A pure layer: it depends on nothing in Streamtide but ``streamtide.errors`` and
``streamtide.task_id``.
"""

from streamtide.task_id import TaskId

from .assignor import assign
from .client_state import ClientState
from .codec import CorruptMetadataError, peek_versions
from .config import AssignorConfig
from .metadata import LATEST_VERSION, AssignmentInfo, SubscriptionInfo
from .result import Assignment

__all__ = [
    "LATEST_VERSION",
    "Assignment",
    "AssignmentInfo",
    "AssignorConfig",
    "ClientState",
    "CorruptMetadataError",
    "SubscriptionInfo",
    "TaskId",
    "assign",
    "peek_versions",
]
