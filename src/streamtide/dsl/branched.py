"""``KStream.split()``: route records to named branches by predicates."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamtide.dsl.params import ensure_callable
from streamtide.dsl.processors import BranchOperator, PassThroughOperator
from streamtide.errors import TopologyError

if TYPE_CHECKING:
    from streamtide.dsl.kstream import KStream


class BranchedKStream:
    """Collects branches; ``default_branch``/``no_default_branch`` return them by name.

    Branch names are ``<split name><branch name>``; unnamed branches are numbered from 1,
    the default branch is ``<split name>0`` unless named.
    """

    def __init__(self, stream: KStream, prefix: str) -> None:
        self.stream = stream
        self.prefix = prefix
        self._branches: list[tuple[Callable[[Any, Any], bool], str]] = []
        self._done = False

    def branch(
        self, predicate: Callable[[Any, Any], bool], name: str | None = None
    ) -> BranchedKStream:
        """Records for which ``predicate(key, value)`` holds (and no earlier one did)."""
        if self._done:
            raise TopologyError("split() is already finished; no more branches can be added")
        ensure_callable(predicate, "branch predicate")
        branch_name = self.prefix + (name if name is not None else str(len(self._branches) + 1))
        if any(existing == branch_name for _, existing in self._branches):
            raise TopologyError(f"split() already has a branch named {branch_name!r}")
        self._branches.append((predicate, branch_name))
        return self

    def default_branch(self, name: str | None = None) -> dict[str, KStream]:
        """Finish with a branch for records that matched no predicate."""
        return self._finish(self.prefix + (name if name is not None else "0"))

    def no_default_branch(self) -> dict[str, KStream]:
        """Finish; records that match no predicate are dropped."""
        return self._finish(None)

    def _finish(self, default: str | None) -> dict[str, KStream]:
        from streamtide.dsl.kstream import KStream

        if self._done:
            raise TopologyError("split() is already finished")
        self._done = True
        builder = self.stream.builder
        topology = builder.topology
        split_name = builder.new_name("KSTREAM-BRANCH-")
        children = {name: builder.new_name("KSTREAM-BRANCHCHILD-") for _, name in self._branches}
        if default is not None:
            children[default] = builder.new_name("KSTREAM-BRANCHCHILD-")
        routes = [(predicate, children[name]) for predicate, name in self._branches]
        default_child = children.get(default) if default is not None else None
        topology.add_processor(
            split_name, lambda: BranchOperator(routes, default_child), self.stream.node
        )
        result = {}
        for branch_name, child in children.items():
            topology.add_processor(child, PassThroughOperator, split_name)
            result[branch_name] = KStream(
                builder,
                child,
                self.stream.key_serde,
                self.stream.value_serde,
                self.stream.repartition_required,
            )
        return result
