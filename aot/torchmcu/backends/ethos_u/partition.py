"""Grouping the NPU-capable ops of a program graph into partitions.

A partition is a set of ops the NPU runs as one command stream, called once.
Two rules make that possible:

- convex: no path leaves the set through a CPU op and comes back into it
  (else the CPU op would have to run in the middle of the command stream);
- connected: ops are merged along data edges (a producer and its consumer)
  and between ops reading the same tensor, each merge kept convex, so every
  partition is a maximal connected set under that rule.

`schedule` then orders the CPU ops and the partitions (one call each) in a
topological order that keeps the program's order wherever it can.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import PGraph, POp
from .tosa_lower import DATA_INPUTS


def data_inputs(op: POp) -> list[int]:
    """Tensor ids of the op's activation operands (no constants, no
    CMSIS-NN scratch); every non-constant operand for ops the NPU does not
    take, so that the dependencies of CPU ops are complete."""
    if op.code in DATA_INPUTS:
        return [op.inputs[k] for k in DATA_INPUTS[op.code] if k < len(op.inputs) and op.inputs[k] >= 0]
    return [t for t in op.inputs if t >= 0]


@dataclass
class Group:
    ops: list[int]  # op indices, program order
    inputs: list[int]  # tensor ids read from outside (one per buffer), first-use order
    outputs: list[int]  # tensor ids produced inside and read outside or returned by the graph


class Dependencies:
    def __init__(self, pg: PGraph) -> None:
        self.pg = pg
        self.producer: dict[int, int] = {}  # buffer -> op writing it
        for i, op in enumerate(pg.ops):
            for t in op.outputs:
                b = pg.tensors[t].buffer
                if b is not None:
                    self.producer[b] = i
        self.preds: list[set[int]] = []
        self.succs: list[set[int]] = [set() for _ in pg.ops]
        for i, op in enumerate(pg.ops):
            ps = {self.producer[b] for b in (self._buffer(t) for t in op.inputs if t >= 0)
                  if b is not None and b in self.producer and self.producer[b] != i}
            self.preds.append(ps)
            for p in ps:
                self.succs[p].add(i)

    def _buffer(self, tid: int) -> int | None:
        t = self.pg.tensors[tid]
        return None if t.const is not None else t.buffer

    def closes_a_cycle(self, members: set[int]) -> bool:
        """Whether some path leaves `members` and comes back into it."""
        frontier = [s for m in members for s in self.succs[m] if s not in members]
        seen = set(frontier)
        while frontier:
            n = frontier.pop()
            for s in self.succs[n]:
                if s in members:
                    return True
                if s not in seen:
                    seen.add(s)
                    frontier.append(s)
        return False


def group_ops(pg: PGraph, npu_ops: set[int]) -> list[Group]:
    """Maximal connected convex groups of `npu_ops`, ordered by first op."""
    deps = Dependencies(pg)
    group_of = {i: i for i in npu_ops}
    members: dict[int, set[int]] = {i: {i} for i in npu_ops}
    readers: dict[int, list[int]] = {}  # buffer -> the NPU ops reading it
    for i in sorted(npu_ops):
        for t in data_inputs(pg.ops[i]):
            b = pg.tensors[t].buffer
            if b is not None and i not in readers.setdefault(b, []):
                readers[b].append(i)
    pairs = [(u, v) for v in sorted(npu_ops) for u in sorted(deps.preds[v]) if u in npu_ops]
    pairs += [(ops[0], v) for ops in readers.values() for v in ops[1:]]
    for u, v in pairs:
        if group_of[u] != group_of[v]:
            a, b = group_of[u], group_of[v]
            merged = members[a] | members[b]
            if deps.closes_a_cycle(merged):
                continue
            keep, drop = min(a, b), max(a, b)
            members[keep] = merged
            del members[drop]
            for m in merged:
                group_of[m] = keep
    groups = []
    for key in sorted(members, key=lambda k: min(members[k])):
        ops = sorted(members[key])
        groups.append(Group(ops, *_boundary(pg, deps, set(ops))))
    return groups


def _boundary(pg: PGraph, deps: Dependencies, ops: set[int]) -> tuple[list[int], list[int]]:
    inside = {pg.tensors[t].buffer for i in ops for t in pg.ops[i].outputs}
    inputs: list[int] = []
    seen: set[int | None] = set()
    for i in sorted(ops):
        for t in data_inputs(pg.ops[i]):
            b = pg.tensors[t].buffer
            if b not in inside and b not in seen:
                seen.add(b)
                inputs.append(t)
    read_outside = {pg.tensors[t].buffer for j, op in enumerate(pg.ops) if j not in ops for t in op.inputs if t >= 0}
    returned = {pg.tensors[t].buffer for t in pg.outputs}
    outputs = [t for i in sorted(ops) for t in pg.ops[i].outputs
               if pg.tensors[t].buffer in read_outside or pg.tensors[t].buffer in returned]
    return inputs, outputs


def schedule(pg: PGraph, groups: list[Group]) -> list[tuple[str, int]]:
    """The order to run things in: ("op", index) for a CPU op, ("npu",
    partition) for a partition's one call. A topological order of the graph
    with each partition contracted to one node; among ready nodes the one
    earliest in the program goes first."""
    deps = Dependencies(pg)
    node_of: dict[int, tuple[str, int]] = {i: ("op", i) for i in range(len(pg.ops))}
    for k, g in enumerate(groups):
        for i in g.ops:
            node_of[i] = ("npu", k)
    nodes = sorted(set(node_of.values()), key=lambda n: n[1] if n[0] == "op" else groups[n[1]].ops[0])
    preds: dict[tuple[str, int], set[tuple[str, int]]] = {n: set() for n in nodes}
    for i in range(len(pg.ops)):
        for p in deps.preds[i]:
            if node_of[p] != node_of[i]:
                preds[node_of[i]].add(node_of[p])
    first = {n: (n[1] if n[0] == "op" else groups[n[1]].ops[0]) for n in nodes}
    order: list[tuple[str, int]] = []
    done: set[tuple[str, int]] = set()
    while len(order) < len(nodes):
        ready = [n for n in nodes if n not in done and preds[n] <= done]
        if not ready:  # cannot happen for convex groups
            raise RuntimeError("partitions form a cycle")
        n = min(ready, key=lambda n: first[n])
        order.append(n)
        done.add(n)
    return order
