"""The project's reference: a compiled program executed in NumPy.

Int8 ops run through `reference.py` (the integer arithmetic of CMSIS-NN and
TFLite Micro, bit for bit), so an int8 program's outputs here are exactly
what the firmware must produce. Float ops (a float model, or a float
fallback inside an int8 one) run through PyTorch and match the firmware
within the float tolerance only. The arenas are simulated byte for byte, so
aliases (reshape, flatten), in-place ops and the program's init copies
behave as on the device, and operand overlaps the runtime refuses are
refused here too.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..reference import (activations, attention_norm, conv, elementwise, pool_resize, quant, recurrent, reduce,
                         shape_views)
from .. import ops
from . import schema

NP = {"F32": np.float32, "I8": np.int8, "I16": np.int16, "I32": np.int32, "U8": np.uint8, "I64": np.int64}

# Element-wise ops whose output may be an input's very bytes (the runtime's
# Kernel::inplace): the inputs by position, from the op table (torchmcu/ops/).
# A binary op's input must then also have the output's dims (not be broadcast).
INPLACE: dict[str, tuple[int, ...]] = ops.INPLACE


def _span(t: dict) -> tuple[object, int, int]:
    where = "CONSTANT" if t["region"] == "CONSTANT" else ("ARENA", t["arena"])
    return where, t["offset"], t["offset"] + t["nbytes"]


def check_overlaps(prog: dict) -> None:
    """Raise ValueError for an op whose output overlaps one of its inputs
    other than as the runtime allows (see INPLACE)."""
    tensors = prog["tensors"]
    for k, op in enumerate(prog["ops"]):
        for o in op["outputs"]:
            wo, lo, hi = _span(tensors[o])
            for pos, i in enumerate(op["inputs"]):
                if i < 0:
                    continue
                wi, li, ui = _span(tensors[i])
                if wi != wo or ui <= lo or hi <= li:
                    continue
                same = (li, ui) == (lo, hi)
                allowed = INPLACE.get(op["code"], ())
                binary = len(allowed) == 2  # then the aliased input is not broadcast
                if not (same and pos in allowed and (not binary or tensors[i]["dims"] == tensors[o]["dims"])):
                    raise ValueError(f"op {k} ({op['code']} {op['name']}): output t{o} overlaps input t{i} "
                                     f"{'in place, which this op does not allow' if same else 'partially'}")


class Interpreter:
    def __init__(self, pte: bytes) -> None:
        self.pte = pte
        self.prog = schema.decode(pte)
        self.seg = self.prog["constant_offset"]
        self.arenas = [bytearray(a["size"]) for a in self.prog["arenas"]]
        check_overlaps(self.prog)
        for c in self.prog.get("init_copies") or []:  # as Method::load, once
            src = self.seg + c["src"]
            self.arenas[c["arena"]][c["dst"]:c["dst"] + c["nbytes"]] = pte[src:src + c["nbytes"]]

    def tensor(self, index: int) -> np.ndarray:
        return _view(self.prog["tensors"][index], self.pte, self.seg, self.arenas)

    def write(self, index: int, value: np.ndarray) -> None:
        _store(self.prog["tensors"][index], value, self.arenas)

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        for index, x in zip(self.prog["inputs"], inputs):
            self.write(index, np.asarray(x).reshape(self.prog["tensors"][index]["dims"]))
        _execute(self.prog["ops"], self.prog["tensors"], self.pte, self.seg, self.arenas)
        return [self.tensor(i).copy() for i in self.prog["outputs"]]


def _view(t: dict, constants: bytes, base: int, arenas: list[bytearray]) -> np.ndarray:
    """A tensor's bytes as an array: constants at `base` + offset in `constants`
    (packed int4 weights, I4, unpacked to int8 values)."""
    if t["dtype"] == "I4":
        start = base + t["offset"] if t["region"] == "CONSTANT" else t["offset"]
        data = constants if t["region"] == "CONSTANT" else arenas[t["arena"]]
        count = int(np.prod(t["dims"], dtype=np.int64))
        return quant.unpack_int4(bytes(data[start:start + t["nbytes"]]), count).reshape(t["dims"])
    dtype = NP[t["dtype"]]
    count = t["nbytes"] // np.dtype(dtype).itemsize
    if t["region"] == "CONSTANT":
        arr = np.frombuffer(constants, dtype=dtype, count=count, offset=base + t["offset"])
    else:
        arr = np.frombuffer(arenas[t["arena"]], dtype=dtype, count=count, offset=t["offset"])
    return arr.reshape(t["dims"])


def _store(t: dict, value: np.ndarray, arenas: list[bytearray]) -> None:
    data = np.ascontiguousarray(value, dtype=NP[t["dtype"]]).tobytes()
    assert len(data) == t["nbytes"], (t["name"], len(data), t["nbytes"])
    arenas[t["arena"]][t["offset"]:t["offset"] + len(data)] = data


def _execute(ops: list[dict], tensors: list[dict], constants: bytes, base: int, arenas: list[bytearray]) -> None:
    for op in ops:
        args = [None if i < 0 else _view(tensors[i], constants, base, arenas).copy() for i in op["inputs"]]
        outs = [tensors[i] for i in op["outputs"]]
        params = op["params"][1] if op["params"] else {}
        if op["code"] == "REQUANTIZE":  # from the two tensors' quantization
            results = [quant.requantize_tensor(args[0], tensors[op["inputs"][0]], outs[0])]
        elif op["code"] in ("DEQUANTIZE_S8", "DEQUANTIZE_S16"):  # its quantization is the input's
            src = tensors[op["inputs"][0]]
            results = [quant.dequantize(args[0], src["scale"], src["zero_point"])]
        else:
            result = _runner(op["code"], params)(args, params, outs)
            results = list(result) if isinstance(result, tuple) else [result]  # a tuple: one per output
        for t, result in zip(outs, results):
            _store(t, np.asarray(result).reshape(t["dims"]), arenas)


def _runner(code: str, params: dict) -> Callable[[list, dict, list], Any]:
    """An op's runner: a delegate call that carries its sub-program runs that; any other op its family's."""
    return delegate_call if SUB_PROGRAM <= params.keys() else OPS[code]


# The fields of a delegate call's params that carry the sub-program it replaces (e.g. EthosUParams).
SUB_PROGRAM = {"ops", "tensors", "constants", "arena_bytes", "inputs", "outputs"}


def delegate_call(args: list[np.ndarray | None], params: dict, outs: list[dict]) -> tuple[np.ndarray, ...]:
    """A delegate call as the reference computes it: the ops it replaces
    (its params' sub-program, written by the delegate's backend, e.g.
    torchmcu.backends.ethos_u.delegate) as the CPU runs them, over their own
    constants and arena. The call's last operands are the sub-program's
    inputs (the first ones are the delegate's own: its blob, its scratch)."""
    constants = bytes(params["constants"])
    tensors = params["tensors"]
    arenas = [bytearray(params["arena_bytes"])]
    for index, x in zip(params["inputs"], args[len(args) - len(params["inputs"]):]):
        _store(tensors[index], np.asarray(x).reshape(tensors[index]["dims"]), arenas)
    _execute(params["ops"], tensors, constants, 0, arenas)
    return tuple(_view(tensors[i], constants, 0, arenas).copy() for i in params["outputs"])


def run_reference(pte: bytes, samples: list[list[np.ndarray]]) -> list[np.ndarray]:
    """Outputs for each sample, stacked along a new first axis per output."""
    interp = Interpreter(pte)
    per_sample = [interp.run(s) for s in samples]
    return [np.stack([s[k] for s in per_sample]) for k in range(len(per_sample[0]))]


# Op code -> its runner (args, params, output tensors) -> output, from each family.
OPS: dict[str, Callable[[list, dict, list], Any]] = {
    **conv.OPS, **pool_resize.OPS, **elementwise.OPS, **reduce.OPS, **shape_views.OPS,
    **activations.OPS, **attention_norm.OPS, **recurrent.OPS,
}
