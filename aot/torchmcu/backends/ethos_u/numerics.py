"""The two executions the Ethos-U backend compares, bit for bit:

- the project's reference (`torchmcu.program.interpret`'s kernels, i.e.
  `torchmcu.reference`) over the program graph, before memory planning: every
  activation buffer simulated as bytes, so aliases read what their producer
  wrote;
- `tosa_reference_model` (from the tosa-tools package) over a partition's TOSA
  graph, fed the reference's values of the partition's inputs.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import reference as ref
from ...ir import PGraph, PTensor
from ...program.interpret import NP, OPS


def _meta(t: PTensor) -> dict[str, Any]:
    return {"dims": list(t.dims), "scale": t.scale, "zero_point": t.zero_point, "dtype": t.dtype, "name": t.name}


class GraphValues:
    """Every tensor's value after running the program graph on one sample."""

    def __init__(self, pg: PGraph, inputs: list[np.ndarray]) -> None:
        self.pg = pg
        self.buffers = [bytearray(n) for n in pg.buffers]
        if len(inputs) != len(pg.inputs):
            raise ValueError(f"the graph takes {len(pg.inputs)} input(s), got {len(inputs)}")
        for tid, x in zip(pg.inputs, inputs):
            self.write(tid, np.asarray(x).reshape(pg.tensors[tid].dims))
        for op in pg.ops:
            args = [None if i < 0 else self.get(i) for i in op.inputs]
            params = op.params[1] if op.params else {}
            outs = [_meta(pg.tensors[i]) for i in op.outputs]
            if op.code == "DEQUANTIZE_S8":  # its quantization is the input's
                src = pg.tensors[op.inputs[0]]
                result = ref.dequantize(self.get(op.inputs[0]), src.scale, src.zero_point)
            else:
                result = OPS[op.code](args, params, outs)
            self.write(op.outputs[0], np.asarray(result).reshape(pg.tensors[op.outputs[0]].dims))

    def get(self, tid: int) -> np.ndarray:
        t = self.pg.tensors[tid]
        if t.const is not None:
            return np.asarray(t.const, NP[t.dtype]).reshape(t.dims)
        assert t.buffer is not None
        dtype = np.dtype(NP[t.dtype])
        count = int(np.prod(t.dims))
        return np.frombuffer(self.buffers[t.buffer], dtype, count, t.offset).reshape(t.dims).copy()

    def write(self, tid: int, value: np.ndarray) -> None:
        t = self.pg.tensors[tid]
        assert t.buffer is not None
        data = np.ascontiguousarray(value, NP[t.dtype]).tobytes()
        self.buffers[t.buffer][t.offset:t.offset + len(data)] = data


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """The reference model's C++ prints a serializer-version notice on
    stdout; keep it out of the caller's output."""
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 1)
        try:
            yield
        finally:
            os.dup2(saved, 1)
            os.close(saved)


class TosaRunError(RuntimeError):
    """tosa_reference_model refused the graph or the inputs."""


def run_tosa(graph: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Outputs of a TOSA flatbuffer on `inputs` (in placeholder order), as
    computed by tosa_reference_model."""
    try:
        import tosa_reference_model as trm
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise ImportError(f"the TOSA reference model comes with the tosa-tools package: {e}") from e
    try:
        with _quiet_stdout():
            outs, status = trm.run(graph, [np.ascontiguousarray(x) for x in inputs])
    except ValueError as e:
        raise TosaRunError(str(e)) from None
    if status != trm.GraphStatus.TOSA_VALID:
        raise TosaRunError(f"tosa_reference_model: graph status {status.name}")
    return [np.asarray(o) for o in outs]


@dataclass
class Mismatch:
    output: int  # position in the graph's outputs
    index: tuple[int, ...]
    tosa: int
    reference: int

    def __str__(self) -> str:
        return (f"output {self.output} element {list(self.index)}: TOSA reference model {self.tosa}, "
                f"torchmcu reference {self.reference}")


def compare(got: list[np.ndarray], want: list[np.ndarray]) -> Mismatch | None:
    """The first element where the TOSA outputs differ from the reference's
    (shapes compared by element order: TOSA keeps the tensors' dims)."""
    for k, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g).reshape(w.shape).astype(np.int64)
        bad = np.argwhere(g != w.astype(np.int64))
        if len(bad):
            idx = tuple(int(i) for i in bad[0])
            return Mismatch(k, idx, int(g[idx]), int(w[idx]))
    return None
