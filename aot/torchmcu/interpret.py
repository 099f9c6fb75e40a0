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
import torch
import torch.nn.functional as F

from . import reference as ref
from . import schema

NP = {"F32": np.float32, "I8": np.int8, "I16": np.int16, "I32": np.int32, "U8": np.uint8, "I64": np.int64}

# Element-wise ops whose output may be an input's very bytes (the runtime's
# Kernel::inplace): the inputs by position. A binary op's input must then
# also have the output's dims (not be broadcast).
INPLACE: dict[str, tuple[int, ...]] = {
    **{c: (0,) for c in ("CLAMP_F32", "SIGMOID_F32", "TANH_F32", "HARDSWISH_F32", "CLAMP_S8", "LUT_S8", "COPY")},
    **{c: (0, 1) for c in ("ADD_F32", "MUL_F32", "MAXIMUM_F32", "MINIMUM_F32", "ADD_S8", "MUL_S8", "MAXIMUM_S8",
                           "MINIMUM_S8")},
}


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
        return ref.unpack_int4(bytes(data[start:start + t["nbytes"]]), count).reshape(t["dims"])
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
        if op["code"] == "ETHOS_U":
            results = ethos_u_call(params, args[3:])
        elif op["code"] == "REQUANTIZE":  # from the two tensors' quantization
            results = [ref.requantize_tensor(args[0], tensors[op["inputs"][0]], outs[0])]
        elif op["code"] in ("DEQUANTIZE_S8", "DEQUANTIZE_S16"):  # its quantization is the input's
            src = tensors[op["inputs"][0]]
            results = [ref.dequantize(args[0], src["scale"], src["zero_point"])]
        else:
            results = [OPS[op["code"]](args, params, outs)]
        for t, result in zip(outs, results):
            _store(t, np.asarray(result).reshape(t["dims"]), arenas)


def ethos_u_call(params: dict, inputs: list[np.ndarray | None]) -> list[np.ndarray]:
    """An Ethos-U delegate call as the reference computes it: the
    partition's ops as the CPU runs them (EthosUParams, written by
    torchmcu.ethos_u.delegate), over their own constants and arena."""
    constants = bytes(params["constants"])
    tensors = params["tensors"]
    arenas = [bytearray(params["arena_bytes"])]
    for index, x in zip(params["inputs"], inputs):
        _store(tensors[index], np.asarray(x).reshape(tensors[index]["dims"]), arenas)
    _execute(params["ops"], tensors, constants, 0, arenas)
    return [_view(tensors[i], constants, 0, arenas).copy() for i in params["outputs"]]


def run_reference(pte: bytes, samples: list[list[np.ndarray]]) -> list[np.ndarray]:
    """Outputs for each sample, stacked along a new first axis per output."""
    interp = Interpreter(pte)
    per_sample = [interp.run(s) for s in samples]
    return [np.stack([s[k] for s in per_sample]) for k in range(len(per_sample[0]))]


# ---- int8 ------------------------------------------------------------------------------------

def _conv_common(p: dict, out: dict) -> dict:
    return dict(stride=(p["stride_h"], p["stride_w"]), pad=(p["pad_top"], p["pad_left"]),
                dilation=(p["dilation_h"], p["dilation_w"]), input_offset=p["input_offset"],
                output_offset=p["output_offset"], act_min=p["act_min"], act_max=p["act_max"],
                out_hw=tuple(out["dims"][1:3]))


def _conv2d_s8(a, p, outs):
    return ref.conv2d(a[0], a[1], a[2], a[3], a[4], **_conv_common(p, outs[0]))


def _depthwise_s8(a, p, outs):
    return ref.depthwise_conv2d(a[0], a[1], a[2], a[3], a[4], depth_multiplier=p["multiplier"],
                                **_conv_common(p, outs[0]))


def _linear_s8(a, p, outs):
    x = a[0].reshape(-1, a[0].shape[-1])
    return ref.linear(x, a[1], a[2], a[3], a[4], output_offset=p["output_offset"], act_min=p["act_min"],
                      act_max=p["act_max"])


def _pool_s8(fn: Callable) -> Callable:
    def run(a, p, outs):
        return fn(a[0], (p["kernel_h"], p["kernel_w"]), (p["stride_h"], p["stride_w"]),
                  (p["pad_top"], p["pad_left"]), act_min=p["act_min"], act_max=p["act_max"],
                  out_hw=tuple(outs[0]["dims"][1:3]))
    return run


def _conv_s16(p: dict, out: dict) -> dict:
    c = _conv_common(p, out)
    del c["input_offset"], c["output_offset"]  # int16: zero points are 0
    return c


def _quantize(a, p, outs):
    return ref.quantize(a[0], outs[0]["scale"], outs[0]["zero_point"])


# ---- float (PyTorch on NHWC data) -----------------------------------------------------------

def _t(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))


def _nchw(x: np.ndarray) -> torch.Tensor:
    return _t(x).permute(0, 3, 1, 2)


def _nhwc(y: torch.Tensor) -> np.ndarray:
    return y.permute(0, 2, 3, 1).numpy()


def _act(y: torch.Tensor, p: dict) -> torch.Tensor:
    return y.clamp(p.get("act_min", -np.inf), p.get("act_max", np.inf))


def _conv2d_f32(a, p, outs):
    w = _t(a[1]).permute(0, 3, 1, 2)
    y = F.conv2d(_nchw(a[0]), w, None if a[2] is None else _t(a[2]), (p["stride_h"], p["stride_w"]),
                 (p["pad_top"], p["pad_left"]), (p["dilation_h"], p["dilation_w"]), p["groups"])
    return _nhwc(_act(y, p))


def _depthwise_f32(a, p, outs):
    w = _t(a[1]).permute(3, 0, 1, 2)  # [1, kh, kw, C*m] -> [C*m, 1, kh, kw]
    c = a[0].shape[3]
    y = F.conv2d(_nchw(a[0]), w, None if a[2] is None else _t(a[2]), (p["stride_h"], p["stride_w"]),
                 (p["pad_top"], p["pad_left"]), (p["dilation_h"], p["dilation_w"]), c)
    return _nhwc(_act(y, p))


def _pool_f32(a, p, outs, fn):
    oh, ow = outs[0]["dims"][1:3]
    x = _nchw(a[0])
    k, s, pad = (p["kernel_h"], p["kernel_w"]), (p["stride_h"], p["stride_w"]), (p["pad_top"], p["pad_left"])
    if fn == "max":
        floor_h = (x.shape[2] + 2 * pad[0] - p["dilation_h"] * (k[0] - 1) - 1) // s[0] + 1
        y = F.max_pool2d(x, k, s, pad, (p["dilation_h"], p["dilation_w"]), ceil_mode=oh != floor_h)
    else:
        floor_h = (x.shape[2] + 2 * pad[0] - k[0]) // s[0] + 1
        y = F.avg_pool2d(x, k, s, pad, ceil_mode=oh != floor_h, count_include_pad=p["count_include_pad"],
                         divisor_override=p["divisor_override"] or None)
    return _nhwc(_act(y, p))


def _mean_f32(a, p, outs):
    axes = tuple(d for d in range(a[0].ndim) if p["axis_mask"] >> d & 1)
    return _t(a[0]).mean(axes).numpy()


OPS: dict[str, Callable[[list, dict, list], Any]] = {
    "QUANTIZE_S8": _quantize,
    "CONV2D_S8": _conv2d_s8,
    "DEPTHWISE_CONV2D_S8": _depthwise_s8,
    "LINEAR_S8": _linear_s8,
    # W4A8: the same integer math on the unpacked int4 weights
    "CONV2D_S4": _conv2d_s8,
    "DEPTHWISE_CONV2D_S4": _depthwise_s8,
    "LINEAR_S4": _linear_s8,
    "ADD_S8": lambda a, p, outs: ref.add(a[0], a[1], p),
    "MUL_S8": lambda a, p, outs: ref.mul(a[0], a[1], p),
    "MAX_POOL2D_S8": _pool_s8(ref.max_pool2d),
    "AVG_POOL2D_S8": _pool_s8(ref.avg_pool2d),
    "SOFTMAX_S8": lambda a, p, outs: ref.softmax(a[0], p["input_multiplier"], p["input_left_shift"], p["diff_min"]),
    "CLAMP_S8": lambda a, p, outs: ref.clamp(a[0], p["min"], p["max"]),
    "LUT_S8": lambda a, p, outs: ref.lut(a[0], a[1]),
    "LINEAR_F32": lambda a, p, outs: _act(F.linear(_t(a[0]), _t(a[1]), None if a[2] is None else _t(a[2])),
                                          p).numpy(),
    "CONV2D_F32": _conv2d_f32,
    "DEPTHWISE_CONV2D_F32": _depthwise_f32,
    "CLAMP_F32": lambda a, p, outs: _t(a[0]).clamp(p.get("min", -np.inf), p.get("max", np.inf)).numpy(),
    "SIGMOID_F32": lambda a, p, outs: torch.sigmoid(_t(a[0])).numpy(),
    "TANH_F32": lambda a, p, outs: torch.tanh(_t(a[0])).numpy(),
    "ADD_F32": lambda a, p, outs: _act(_t(a[0]) + _t(a[1]), p).numpy(),
    "MUL_F32": lambda a, p, outs: _act(_t(a[0]) * _t(a[1]), p).numpy(),
    "MAX_POOL2D_F32": lambda a, p, outs: _pool_f32(a, p, outs, "max"),
    "AVG_POOL2D_F32": lambda a, p, outs: _pool_f32(a, p, outs, "avg"),
    "MEAN_F32": _mean_f32,
    "SOFTMAX_F32": lambda a, p, outs: torch.softmax(_t(a[0]), p["axis"]).numpy(),
    "PERMUTE": lambda a, p, outs: np.transpose(a[0], p["perm"]),
    "CONCAT": lambda a, p, outs: np.concatenate([x for x in a], p["axis"]),
    "COPY": lambda a, p, outs: a[0],
    "PAD": lambda a, p, outs: ref.pad(a[0], p["before"], p["after"],
                                      p.get("qvalue", 0) if outs[0]["dtype"] == "I8" else p.get("value", 0.0)),
    "MAXIMUM_F32": lambda a, p, outs: _act(torch.maximum(_t(a[0]), _t(a[1])), p).numpy(),
    "MINIMUM_F32": lambda a, p, outs: _act(torch.minimum(_t(a[0]), _t(a[1])), p).numpy(),
    "MAXIMUM_S8": lambda a, p, outs: ref.maximum(a[0], a[1]),
    "MINIMUM_S8": lambda a, p, outs: ref.minimum(a[0], a[1]),
    "HARDSWISH_F32": lambda a, p, outs: F.hardswish(_t(a[0])).numpy(),
    "BATCH_MATMUL_F32": lambda a, p, outs: torch.matmul(_t(a[0]), _t(a[1])).numpy(),
    "BATCH_MATMUL_S8": lambda a, p, outs: ref.batch_matmul(a[0], a[1], p),
    # a16w8 (int16 activations, zero point 0)
    "QUANTIZE_S16": lambda a, p, outs: ref.quantize_s16(a[0], outs[0]["scale"], outs[0]["zero_point"]),
    "CONV2D_S16": lambda a, p, outs: ref.conv2d_s16(a[0], a[1], a[2], a[3], a[4], **_conv_s16(p, outs[0])),
    "DEPTHWISE_CONV2D_S16": lambda a, p, outs: ref.depthwise_conv2d_s16(
        a[0], a[1], a[2], a[3], a[4], depth_multiplier=p["multiplier"], **_conv_s16(p, outs[0])),
    "LINEAR_S16": lambda a, p, outs: ref.linear_s16(a[0].reshape(-1, a[0].shape[-1]), a[1], a[2], a[3], a[4],
                                                    act_min=p["act_min"], act_max=p["act_max"]),
    "ADD_S16": lambda a, p, outs: ref.add_s16(a[0], a[1], p),
    "MUL_S16": lambda a, p, outs: ref.mul_s16(a[0], a[1], p),
    "MAX_POOL2D_S16": _pool_s8(ref.max_pool2d_s16),
    "AVG_POOL2D_S16": _pool_s8(ref.avg_pool2d_s16),
    "SOFTMAX_S16": lambda a, p, outs: ref.softmax_s16(a[0], p["input_multiplier"], p["input_left_shift"], a[1], a[2]),
}
