"""The executable section of a program (Program.exec), derived from its
description: each op's operands as fixed records, and its kernel arguments
(an *Args struct of program.fbs) filled from its operands' dims and its
params.

The derivation encodes what the description says, however wrong, so that
the runtime refuses a bad program for the reason it is bad: an operand
naming no tensor gets location NO_TENSOR, a tensor of an unknown region
UNKNOWN_REGION, dims are copied as they are (products saturate), a params
table of the wrong type leaves its defaults in the args and its own type in
ExecOp.params_type. Nothing here raises on a corrupted tree.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

from ... import ops
from . import Schema, load, pack_struct

ABSENT, CONSTANT, FIRST_ARENA = 0, 1, 2
UNKNOWN_REGION, NO_TENSOR = 254, 255
MAX_RANK = 6
INT32_MAX = 2**31 - 1

# op code -> (args struct, the params table its parameters come from, or None):
# the op table's (torchmcu/ops/), for the codes that have arguments.
ARGS: dict[str, tuple[str, str | None]] = ops.ARGS


def _i32(v: Any) -> int:
    """An int32 field's value: saturated, so nothing a tree holds fails to pack."""
    v = int(v) if isinstance(v, (bool, int)) or (isinstance(v, float) and math.isfinite(v)) else 0
    return max(-(2**31), min(INT32_MAX, v))


def _dims(t: dict | None, n: int) -> list[int]:
    dims = [_i32(d) for d in (t or {}).get("dims") or []][:n]
    return dims + [0] * (n - len(dims))


def _rows_cols(t: dict | None) -> tuple[int, int]:
    """(product of all dims but the last, the last dim), saturated."""
    dims = [_i32(d) for d in (t or {}).get("dims") or []]
    if not dims:
        return 0, 0
    rows = 1
    for d in dims[:-1]:
        rows = max(-(2**31), min(INT32_MAX, rows * d))
    return rows, dims[-1]


def _quant(t: dict | None) -> tuple[float, int]:
    t = t or {}
    scale = t.get("scale", 0.0)
    return (float(scale) if isinstance(scale, (int, float)) else 0.0), _i32(t.get("zero_point", 0))


# Shapes (and the quantization some kernels check) of an op's operands:
# ins/outs are the operand tensors (None where absent or named wrongly).
Shapes = Callable[[list, list], dict[str, Any]]


def _linear(ins: list, outs: list) -> dict[str, Any]:
    xr, xc = _rows_cols(ins[0] if ins else None)
    yr, yc = _rows_cols(outs[0] if outs else None)
    return {"x_rows": xr, "x_cols": xc, "w": _dims(ins[1] if len(ins) > 1 else None, 2), "y_rows": yr, "y_cols": yc}


def _nhwc(*names: str) -> Shapes:
    def shapes(ins: list, outs: list) -> dict[str, Any]:
        ops = {"x": ins[0] if ins else None, "w": ins[1] if len(ins) > 1 else None, "y": outs[0] if outs else None}
        return {n: _dims(ops[n], 4) for n in names}
    return shapes


def _binary(ins: list, outs: list) -> dict[str, Any]:
    return {"a": _dims(ins[0] if ins else None, MAX_RANK), "b": _dims(ins[1] if len(ins) > 1 else None, MAX_RANK),
                "y": _dims(outs[0] if outs else None, MAX_RANK)}


def _max_min(ins: list, outs: list) -> dict[str, Any]:
    out = _binary(ins, outs)
    for name, t in (("a", ins[0] if ins else None), ("b", ins[1] if len(ins) > 1 else None),
                    ("y", outs[0] if outs else None)):
        out[f"{name}_scale"], out[f"{name}_zero_point"] = _quant(t)
    return out


def _x_y(ins: list, outs: list) -> dict[str, Any]:
    return {"x": _dims(ins[0] if ins else None, MAX_RANK), "y": _dims(outs[0] if outs else None, MAX_RANK)}


def _quantize(index: int) -> Shapes:
    def shapes(ins: list, outs: list) -> dict[str, Any]:
        scale, zp = _quant((outs if index else ins)[0] if (outs if index else ins) else None)
        return {"scale": scale, "zero_point": zp}
    return shapes


def _pad(ins: list, outs: list) -> dict[str, Any]:
    out = _x_y(ins, outs)
    out["x_scale"], out["x_zero_point"] = _quant(ins[0] if ins else None)
    out["y_scale"], out["y_zero_point"] = _quant(outs[0] if outs else None)
    return out


def _requantize(ins: list, outs: list) -> dict[str, Any]:
    """TFLite's QUANTIZE Prepare for an integer input: QuantizeMultiplier(s_in / s_out)."""
    from ...reference import quantize_multiplier

    (s_in, zp_in), (s_out, zp_out) = _quant(ins[0] if ins else None), _quant(outs[0] if outs else None)
    try:
        m, s = quantize_multiplier(float(struct.unpack("<f", struct.pack("<f", s_in))[0]) /
                                   float(struct.unpack("<f", struct.pack("<f", s_out))[0]))
    except (ValueError, ZeroDivisionError, OverflowError):
        m, s = 0, 0  # a scale the runtime refuses anyway (or a zero multiplier: zeros out)
    return {"multiplier": m, "shift": s, "input_zero_point": zp_in, "output_zero_point": zp_out}


def _rows_cols_of_x(ins: list, outs: list) -> dict[str, Any]:
    rows, cols = _rows_cols(ins[0] if ins else None)
    return {"rows": rows, "cols": cols}


def _pixels(ins: list, outs: list) -> dict[str, Any]:
    """x [n, positions, channels] (channels last)."""
    n, positions, channels = _dims(ins[0] if ins else None, 3)
    return {"n": n, "positions": positions, "channels": channels}


def _masked_softmax(ins: list, outs: list) -> dict[str, Any]:
    """x and y; the mask: input 1 (int8: then an optional exp table) or 3
    (int16, after its two tables), whichever is the U8 one."""
    mask = next((t for t in ins[1:] if t and t.get("dtype") == "U8"), None)
    return dict(_x_y(ins, outs), mask=_dims(mask, 2))


def _recurrent(ins: list, outs: list) -> dict[str, Any]:
    """x [T, B, I] and y [T, B, H] of the recurrent ops."""
    x, y = _dims(ins[0] if ins else None, 3), _dims(outs[0] if outs else None, 3)
    return {"time_steps": x[0], "batch": x[1], "input_size": x[2], "hidden_size": y[2]}


def _gather(ins: list, outs: list) -> dict[str, Any]:
    rows, cols = _rows_cols(ins[0] if ins else None)
    count, _ = _rows_cols(outs[0] if outs else None)
    return {"rows": rows, "cols": cols, "count": count}


SHAPES: dict[str, Shapes] = {
    "LinearArgs": _linear, "QuantLinearArgs": _linear,
    "Conv2dArgs": _nhwc("x", "w", "y"), "QuantConv2dArgs": _nhwc("x", "w", "y"),
    "Pool2dArgs": _nhwc("x", "y"), "QuantPool2dArgs": _nhwc("x", "y"),
    "BinaryArgs": _binary, "QuantAddArgs": _binary, "QuantMulArgs": _binary, "QuantMaxMinArgs": _max_min,
    "BatchMatmulArgs": _binary, "QuantBatchMatmulArgs": _binary,
    "MeanArgs": lambda ins, outs: {"x": _dims(ins[0] if ins else None, MAX_RANK)},
    "SoftmaxArgs": _x_y, "QuantSoftmaxArgs": _x_y, "PermuteArgs": _x_y, "PadArgs": _pad,
    "ConcatArgs": lambda ins, outs: {"y": _dims(outs[0] if outs else None, MAX_RANK)},
    "ClampArgs": lambda ins, outs: {}, "QuantClampArgs": lambda ins, outs: {},
    "EthosUArgs": lambda ins, outs: {},
    "RequantizeArgs": _requantize,
    "ResizeArgs": _nhwc("x", "y"), "AdaptivePool2dArgs": _nhwc("x", "y"), "QuantAdaptivePool2dArgs": _nhwc("x", "y"),
    "SliceArgs": _x_y,
    # C: element-wise, reductions, normalisation and attention
    "ActivationArgs": lambda ins, outs: {}, "QuantPreluArgs": _binary, "QuantDivArgs": _binary,
    "QuantLogSoftmaxArgs": _x_y, "QuantMeanArgs": _x_y, "LayerNormArgs": _rows_cols_of_x,
    "QuantLayerNormArgs": _rows_cols_of_x, "GluArgs": _x_y, "QuantGluArgs": _x_y,
    "QuantMaskedSoftmaxArgs": _masked_softmax,
    "RecurrentArgs": _recurrent, "QuantLstmArgs": _recurrent, "QuantGruArgs": _recurrent,
    "QuantRnnArgs": _recurrent,
    "GroupNormArgs": _pixels, "QuantGroupNormArgs": _pixels,
    "MaskedFillArgs": lambda ins, outs: {"x": _dims(ins[0] if ins else None, MAX_RANK),
                                         "mask": _dims(ins[1] if len(ins) > 1 else None, MAX_RANK),
                                         "y": _dims(outs[0] if outs else None, MAX_RANK)},
    "CompareArgs": _binary,
    "GatherArgs": _gather,
}


def _vector(values: Any) -> tuple[list[int], int]:
    """A params vector as a fixed [int:6] and its real length."""
    values = [_i32(v) for v in values] if isinstance(values, (list, tuple)) else []
    return (values + [0] * MAX_RANK)[:MAX_RANK], len(values)


def _args(schema: Schema, code: str, params: Any, ins: list, outs: list) -> tuple[bytes, int]:
    """The op's args bytes and the OpParams type it carries."""
    members = schema.unions["OpParams"].members
    ptype, body = 0, {}
    if isinstance(params, (tuple, list)) and len(params) == 2 and params[0] in members:
        ptype, body = members.index(params[0]) + 1, dict(params[1] or {})
    if code not in ARGS:
        return b"", ptype
    struct_name, table = ARGS[code]
    st = schema.structs[struct_name]
    fields = {f.name: f for f in st.fields}
    values: dict[str, Any] = {}
    if table is not None:
        given = body if ptype and members[ptype - 1] == table else {}
        for f in schema.tables[table].fields:
            if f.name not in fields:
                continue
            if f.is_vector:
                values[f.name], values[f"{f.name}_size"] = _vector(given.get(f.name))
            else:
                v = given.get(f.name, f.default)
                values[f.name] = float(v) if fields[f.name].type == "float" and isinstance(v, (int, float)) else v
    if code in ("QUANTIZE_S8", "DEQUANTIZE_S8", "QUANTIZE_S16", "DEQUANTIZE_S16"):  # the integer side's
        values.update(_quantize(1 if code.startswith("QUANTIZE") else 0)(ins, outs))
    else:
        values.update(SHAPES[struct_name](ins, outs))
    for f in st.fields:  # anything still missing (or of the wrong kind) gets a neutral value
        v = values.get(f.name)
        if f.array_len:
            continue
        if f.type == "float":
            values[f.name] = float(v) if isinstance(v, (int, float)) else 0.0
        elif f.type == "uint":
            values[f.name] = _i32(v) & 0xFFFFFFFF
        else:
            values[f.name] = _i32(v)
    data = pack_struct(struct_name, values, schema)
    if code == "CONCAT":  # each input's dims follow
        data += b"".join(struct.pack(f"<{MAX_RANK}i", *_dims(t, MAX_RANK)) for t in ins)
    return data, ptype


def _location(t: dict) -> int:
    region = t.get("region", "CONSTANT")
    if region in ("CONSTANT", 0):
        return CONSTANT
    if region in ("ARENA", 1):
        arena = t.get("arena", 0)
        return FIRST_ARENA + arena if isinstance(arena, int) and 0 <= arena < UNKNOWN_REGION - FIRST_ARENA \
            else UNKNOWN_REGION
    return UNKNOWN_REGION


def _dtype(t: dict, schema: Schema) -> int:
    d = t.get("dtype", 0)
    values = schema.enums["DType"].values
    return values[d] if isinstance(d, str) and d in values else (_i32(d) & 0xFF if isinstance(d, int) else 0xFF)


def _u32(v: Any) -> int:
    """A uint32 field's value (offsets, sizes): saturated."""
    return max(0, min(0xFFFFFFFF, v)) if isinstance(v, int) else 0


def operand(tensors: list[dict], index: Any, schema: Schema) -> dict[str, Any]:
    if index == -1:
        return {"offset": 0, "nbytes": 0, "location": ABSENT, "dtype": 0, "rank": 0}
    if not isinstance(index, int) or not 0 <= index < len(tensors):
        return {"offset": 0, "nbytes": 0, "location": NO_TENSOR, "dtype": 0, "rank": 0}
    t = tensors[index]
    return {"offset": _u32(t.get("offset", 0)), "nbytes": _u32(t.get("nbytes", 0)), "location": _location(t),
                "dtype": _dtype(t, schema), "rank": min(len(t.get("dims") or []), 255)}


def io_tensor(tensors: list[dict], index: Any, schema: Schema) -> dict[str, Any]:
    o = operand(tensors, index, schema)
    if o["location"] == ABSENT:  # -1 is no tensor for a model input or output
        o["location"] = NO_TENSOR
    t = tensors[index] if o["location"] != NO_TENSOR else {}
    scale, zp = _quant(t)
    return dict(o, dims=_dims(t, MAX_RANK), scale=scale, zero_point=zp)


def derive(prog: dict[str, Any], schema: Schema | None = None) -> dict[str, Any]:
    """Program.exec for the program tree `prog`."""
    schema = schema or load()
    tensors = prog.get("tensors") or []
    codes = schema.enums["OpCode"].values
    ops: list[dict[str, Any]] = []
    operands: list[dict[str, Any]] = []
    words = bytearray()
    placed: dict[bytes, int] = {}  # args bytes -> word index: ops with equal args share one block
    for op in prog.get("ops") or []:
        ins, outs = list(op.get("inputs") or []), list(op.get("outputs") or [])
        first = len(operands)
        operands += [operand(tensors, i, schema) for i in ins + outs]

        def tensor(i: Any) -> dict | None:
            return tensors[i] if isinstance(i, int) and 0 <= i < len(tensors) else None

        code = op.get("code")
        name = code if isinstance(code, str) else next((k for k, v in codes.items() if v == code), None)
        data, ptype = _args(schema, name or "", op.get("params"), [tensor(i) for i in ins],
                            [tensor(i) for i in outs])
        value = codes[code] if isinstance(code, str) and code in codes else (
            code & 0xFFFF if isinstance(code, int) and code >= 0 else 0xFFFF)
        if data not in placed:
            placed[data] = len(words) // 4
            words += data
        ops.append({"code": value, "params_type": ptype, "num_inputs": min(len(ins), 255),
                        "num_outputs": min(len(outs), 255), "num_args": len(data) // 4, "operands": first,
                        "args": placed[data]})
    return {
        "ops": ops,
        "operands": operands,
        "args": list(struct.unpack(f"<{len(words) // 4}I", bytes(words))),
        "inputs": [io_tensor(tensors, i, schema) for i in prog.get("inputs") or []],
        "outputs": [io_tensor(tensors, i, schema) for i in prog.get("outputs") or []],
    }
