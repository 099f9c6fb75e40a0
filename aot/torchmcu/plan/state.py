"""Streaming state: tensors a model carries from one invocation to the next.

A model whose forward takes its state and returns the next one
(`forward(x_frame, h, c) -> (y, h, c)`) compiles, with compile(...,
state=...), into a program that keeps that state itself: each state input
and its output become one tensor in a persistent arena, apart from the
activation arenas:

- the state input is no longer a model input: the ops read it where it
  lives; at the end of each execution a COPY writes the new state over it
  (the state output is no longer a model output);
- the planner places state tensors in their own region (the fastest memory
  with room beside the activations), never shared with anything, so their
  bytes survive between executions (and the activation arenas can be shared
  with other models);
- Method::load sets them (an init copy from the constant segment: zeros,
  or the zero point of an integer state), so loading the method again resets
  them; the application then invokes frame by frame.
"""

from __future__ import annotations

import numpy as np

from ..errors import CompileError
from ..ir import NP_DTYPES, PGraph, POp
from .lifetimes import _align
from .result import RegionPlan, RegionSpec


def make_state(p: PGraph, pairs: list[tuple[int, int]]) -> None:
    """pairs: (index in p.inputs, index in p.outputs). The input's tensor
    becomes the state; a COPY from the output's tensor updates it last."""
    if not pairs:
        return
    states, dropped_in, dropped_out = [], set(), set()
    for k, (i, j) in enumerate(pairs):
        tin, tout = p.inputs[i], p.outputs[j]
        a, b = p.tensors[tin], p.tensors[tout]
        if (a.dims, a.dtype) != (b.dims, b.dtype) or (a.dtype != "F32" and (a.scale, a.zero_point) != (
                b.scale, b.zero_point)):
            raise CompileError(f"state {k}: input {a.name} is {a.dtype} {list(a.dims)} but output {j} is {b.dtype} "
                               f"{list(b.dims)}" + (f" (quantization {a.scale:g}/{a.zero_point} against "
                                                    f"{b.scale:g}/{b.zero_point})" if a.dtype != "F32" else "")
                               + ": a state input and the output that updates it must have one shape and type")
        p.ops.append(POp("COPY", [tout], [tin], None, f"state_{k}_update", None, "state"))
        states.append(tin)
        dropped_in.add(i)
        dropped_out.add(j)
    p.inputs[:] = [t for k, t in enumerate(p.inputs) if k not in dropped_in]
    p.outputs[:] = [t for k, t in enumerate(p.outputs) if k not in dropped_out]
    p.state[:] = states


def state_buffers(p: PGraph) -> set[int]:
    return {p.tensors[t].buffer for t in p.state if p.tensors[t].buffer is not None}


def initial_bytes(p: PGraph, tid: int) -> bytes:
    """A state tensor's value when the method loads: real zero (an integer
    state's zero point)."""
    t = p.tensors[tid]
    value = t.zero_point if t.dtype in ("I8", "I16") else 0
    return np.full(t.dims, value, NP_DTYPES[t.dtype]).tobytes()


def place_state(p: PGraph, regions: list[RegionSpec], used: dict[str, int]) -> RegionPlan | None:
    """The persistent region: the state buffers one after the other in the
    fastest memory with room left beside `used` (memory -> arena bytes)."""
    bufs = sorted(state_buffers(p))
    if not bufs:
        return None
    total = sum(_align(p.buffers[b]) for b in bufs)
    for r in regions:
        if r.capacity - _align(used.get(r.name, 0)) >= total:
            plan = RegionPlan(r.name, r.speed, r.capacity - _align(used.get(r.name, 0)), total, total, bufs,
                              persistent=True)
            return plan
    raise CompileError(f"no memory has room for the model's {total:,} B of state beside its activations: "
                       + ", ".join(f"{r.name} {r.capacity - used.get(r.name, 0):,} B free" for r in regions))


def offsets(p: PGraph, plan: RegionPlan) -> dict[int, int]:
    out, at = {}, 0
    for b in plan.buffers:
        out[b] = at
        at += _align(p.buffers[b])
    return out
