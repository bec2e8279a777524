"""In-process testing of topologies."""

from streamtide.testing.driver import TopologyTestDriver
from streamtide.testing.topics import TestInputTopic, TestOutputTopic

__all__ = ["TestInputTopic", "TestOutputTopic", "TopologyTestDriver"]
