"""Which int8 ops of a program run on the HiFi 4 through nnlib, how, and at
what estimated cost.

The hifi backend is a kernel library (as CMSIS-NN's): the program keeps its op
codes, and the firmware's kernel table for the hifi kernel set
(firmware/delegates/hifi/) implements CONV2D_S8, DEPTHWISE_CONV2D_S8 and
LINEAR_S8 with nnlib calls. An op is claimed when nnlib computes exactly the
reference's bits for it (nnlib.py: batch 1, no dilation, requantization values
in the reference's range); the firmware kernel applies the same rule (the
shape when the program loads, the requantization values each run, as the
portable kernels read values) and runs any other op of those codes on the
portable kernel. Every convolution whose shape nnlib may run gets a planned scratch
operand at least as large as nnlib's getsize functions ask for on any HiFi 4
configuration; the device checks it against the library's own getsize when
the program loads.

Not claimed, with the reason recorded per op: the other nnlib functions the
issue lists (pooling, element-wise add/mul, activations, softmax, matmul)
have no model in nnlib.py yet, so nothing shows that their arithmetic equals
the reference's; those ops stay on the portable kernels.

Cost: an estimate, not a measurement. The RT600 data sheet gives the HiFi 4
four 32x32-bit MACs per cycle and, in part of its instructions, eight
32x16-bit ones; nnlib's 8-bit kernels widen int8 operands to 16 bits, so the
peak is 8 int8 MACs per cycle. The estimate is MACs / 8 cycles:
a lower bound (full MAC-slot use, no load stalls, no edge handling), turned
into time at the board's clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...boards import Board
from ...ir import PGraph, POp, PTensor
from . import nnlib

MACS_PER_CYCLE = 8
ESTIMATE_BASIS = ("MACs / 8: the HiFi 4 issues up to eight 32x16-bit MACs per cycle (NXP RT600 data sheet), "
                  "nnlib's 8-bit kernels widen int8 operands to 16 bits; a lower bound at full MAC use, not a "
                  "measurement")
BACKEND = "hifi"

# Op codes the hifi kernel set implements (firmware/delegates/hifi/kernels.h).
CODES = ("CONV2D_S8", "DEPTHWISE_CONV2D_S8", "LINEAR_S8")
_CONV_SCRATCH = 5

# The int8 ops nnlib has functions for that the backend does not claim yet, and why.
_NOT_MODELLED = {
    "AVG_POOL2D_S8": "xa_nn_avgpool_8 divides through a reciprocal table; its rounding is not modelled",
    "MAX_POOL2D_S8": "xa_nn_maxpool_8 is not modelled (its padding and clamp semantics unchecked)",
    "ADD_S8": "xa_nn_elm_add_asym8sxasym8s_asym8s is not modelled",
    "MUL_S8": "xa_nn_elm_mul_asym8sxasym8s_asym8s is not modelled",
    "SOFTMAX_S8": "xa_nn_vec_softmax_asym8s_asym8s uses its own exp approximation; not modelled",
    "BATCH_MATMUL_S8": "xa_nn_matmul_asym8sxasym8s_asym8s is not modelled",
    "CLAMP_S8": "xa_nn_vec_activation_min_max_8_8 cannot run in place (restrict operands); not claimed",
    "LUT_S8": "nnlib's sigmoid/tanh/hard-swish compute their own curves, not the program's table",
}


@dataclass
class Claim:
    index: int
    name: str
    code: str
    call: str  # the nnlib function
    args: dict[str, Any]  # its scalar arguments as the firmware passes them
    macs: int
    scratch_bytes: int

    @property
    def est_cycles(self) -> int:
        return math.ceil(self.macs / MACS_PER_CYCLE)


@dataclass
class HifiPlan:
    claims: list[Claim] = field(default_factory=list)
    rejected: list[tuple[int, str, str, str]] = field(default_factory=list)  # index, name, code, reason


def _const(pg: PGraph, tid: int) -> np.ndarray:
    c = pg.tensors[tid].const
    if c is None:
        raise ValueError(f"operand {pg.tensors[tid].name} is not a constant")
    return c


def _shift_reason(shift: np.ndarray) -> str | None:
    """Shifts outside [-31, 30] (the reference's range: the portable kernels
    output zeros for them, nnlib would compute something else; the compiler
    never emits them) keep the op off nnlib."""
    if shift.size and (shift.min() < -31 or shift.max() > 30):
        return f"a shift outside [-31, 30] ({int(shift.min())}..{int(shift.max())})"
    return None


def _conv_shape_reason(pg: PGraph, op: POp) -> str | None:
    """Why nnlib is never called for this convolution's shape (None: it may
    be; the firmware kernel's load-time rule, firmware/delegates/hifi/conv_s8.cc)."""
    p = op.params[1] if op.params else {}
    if pg.tensors[op.inputs[0]].dims[0] != 1:
        return "batch > 1 (nnlib convolves one image per call)"
    if p.get("dilation_h", 1) != 1 or p.get("dilation_w", 1) != 1:
        return "dilation is not modelled"
    if op.code == "CONV2D_S8" and pg.tensors[op.inputs[1]].dims[3] != pg.tensors[op.inputs[0]].dims[3]:
        return "grouped convolution (the delegate calls nnlib with one group)"
    return None


def _conv(pg: PGraph, i: int, op: POp) -> Claim | str:
    p = op.params[1] if op.params else {}
    x, w, y = (pg.tensors[t].dims for t in (op.inputs[0], op.inputs[1], op.outputs[0]))
    reason = _conv_shape_reason(pg, op) or _shift_reason(_const(pg, op.inputs[4]))
    if reason:
        return reason
    input_zero_bias, out_zero_bias = int(p["input_offset"]), int(p["output_offset"])
    if not (-127 <= input_zero_bias <= 128 and -128 <= out_zero_bias <= 127):
        return "zero points outside nnlib's ranges"
    _, h, wd, c = x
    _, oh, ow, oc = y
    common = {"input_height": h, "input_width": wd, "input_channels": c, "x_stride": p.get("stride_w", 1),
              "y_stride": p.get("stride_h", 1), "x_padding": p["pad_left"], "y_padding": p["pad_top"],
              "out_height": oh, "out_width": ow, "input_zero_bias": input_zero_bias, "out_zero_bias": out_zero_bias,
              "activation_min": int(p["act_min"]), "activation_max": int(p["act_max"])}
    if op.code == "CONV2D_S8":
        _, kh, kw, _ = w
        args = {**common, "kernel_height": kh, "kernel_width": kw, "kernel_channels": c, "out_channels": oc,
                "dilation_height": 1, "dilation_width": 1, "out_data_format": 0}
        call = "xa_nn_conv2d_per_chan_sym8sxasym8s"
        if c == 1:  # one input channel: nnlib runs it as a depthwise convolution (multiplier oc) itself
            args["runs_as"] = "xa_nn_conv2d_depthwise_per_chan_sym8sxasym8s"
    else:
        _, kh, kw, _ = w
        m = int(p.get("multiplier", 1))
        args = {**common, "kernel_height": kh, "kernel_width": kw, "channels_multiplier": m,
                "inp_data_format": 0, "out_data_format": 0}
        call = "xa_nn_conv2d_depthwise_per_chan_sym8sxasym8s"
    return Claim(i, op.name, op.code, call, args, op.macs, _conv_scratch_bytes(pg, op))


def _conv_scratch_bytes(pg: PGraph, op: POp) -> int:
    p = op.params[1] if op.params else {}
    _, h, wd, c = pg.tensors[op.inputs[0]].dims
    _, kh, kw, _ = pg.tensors[op.inputs[1]].dims
    _, oh, ow, oc = pg.tensors[op.outputs[0]].dims
    sh, sw, pt, pl = p.get("stride_h", 1), p.get("stride_w", 1), p["pad_top"], p["pad_left"]
    if op.code == "CONV2D_S8":
        return nnlib.conv2d_scratch_bytes(h, wd, c, kh, kw, sh, pt, sw, pl, oh, ow, oc)
    return nnlib.conv2d_depthwise_getsize(h, wd, c, kh, kw, int(p.get("multiplier", 1)), sw, sh, pl, pt, oh, ow)


def _linear(pg: PGraph, i: int, op: POp) -> Claim | str:
    p = op.params[1] if op.params else {}
    w = pg.tensors[op.inputs[1]].dims
    x = pg.tensors[op.inputs[0]].dims
    shift = _const(pg, op.inputs[4])
    reason = _shift_reason(shift)
    if reason:
        return reason
    rows = int(np.prod(x[:-1])) if len(x) > 1 else 1
    out_zero_bias = int(p["output_offset"])
    if not -128 <= out_zero_bias <= 127:
        return "output zero point outside nnlib's range"
    base = {"out_zero_bias": out_zero_bias, "activation_min": int(p["act_min"]), "activation_max": int(p["act_max"])}
    if shift.size != w[0]:  # per-tensor (one multiplier for several outputs)
        if rows != 1:
            return "per-tensor requantization with more than one row (xa_nn_fully_connected takes one vector)"
        # The program's bias holds input_offset * sum(w): nnlib is called with input zero bias 0.
        args = {**base, "weight_depth": w[1], "out_depth": w[0], "input_zero_bias": 0}
        return Claim(i, op.name, op.code, "xa_nn_fully_connected_sym8sxasym8s_asym8s", args, op.macs, 0)
    args = {**base, "rows": w[0], "cols1": w[1], "row_stride1": w[1], "vec_count": rows, "vec_offset": w[1],
            "out_offset": w[0], "out_stride": 1, "vec1_zero_bias": 0}
    return Claim(i, op.name, op.code, "xa_nn_matmul_per_chan_sym8sxasym8s_asym8s", args, op.macs, 0)


def run_model(pg: PGraph, c: Claim, x: np.ndarray) -> np.ndarray:
    """What the firmware's nnlib call computes for claim `c` on input `x` (the
    op's first operand, physical layout), by nnlib.py's model, from the
    claim's own arguments and the program's constants; then the fused
    activation clamp the kernel applies. Returns the op's output."""
    op = pg.ops[c.index]
    w, bias, mult, shift = (_const(pg, t) for t in op.inputs[1:5])
    a = c.args
    if c.call == "xa_nn_conv2d_per_chan_sym8sxasym8s":
        y = nnlib.conv2d_per_chan_sym8sxasym8s(
            x[0], w, bias, x_stride=a["x_stride"], y_stride=a["y_stride"], x_padding=a["x_padding"],
            y_padding=a["y_padding"], out_height=a["out_height"], out_width=a["out_width"],
            input_zero_bias=a["input_zero_bias"], out_multiplier=mult, out_shift=shift,
            out_zero_bias=a["out_zero_bias"])[None]
    elif c.call == "xa_nn_conv2d_depthwise_per_chan_sym8sxasym8s":
        y = nnlib.conv2d_depthwise_per_chan_sym8sxasym8s(
            x[0], w.reshape(w.shape[-3:]), bias, channels_multiplier=a["channels_multiplier"],
            x_stride=a["x_stride"], y_stride=a["y_stride"], x_padding=a["x_padding"], y_padding=a["y_padding"],
            out_height=a["out_height"], out_width=a["out_width"], input_zero_bias=a["input_zero_bias"],
            out_multiplier=mult, out_shift=shift, out_zero_bias=a["out_zero_bias"])[None]
    elif c.call == "xa_nn_matmul_per_chan_sym8sxasym8s_asym8s":
        y = nnlib.matmul_per_chan_sym8sxasym8s_asym8s(
            w, x.reshape(a["vec_count"], a["cols1"]), bias, vec1_zero_bias=a["vec1_zero_bias"],
            out_multiplier=mult, out_shift=shift, out_zero_bias=a["out_zero_bias"])
    elif c.call == "xa_nn_fully_connected_sym8sxasym8s_asym8s":
        y = nnlib.fully_connected_sym8sxasym8s_asym8s(
            w, x.reshape(-1), bias, input_zero_bias=a["input_zero_bias"], out_multiplier=int(mult[0]),
            out_shift=int(shift[0]), out_zero_bias=a["out_zero_bias"])
    else:
        raise ValueError(f"no model of {c.call}")
    y = np.clip(y, a["activation_min"], a["activation_max"]).astype(np.int8)  # the kernel's clamp pass
    return y.reshape(pg.tensors[op.outputs[0]].dims)


def _plan_scratch(pg: PGraph, op: POp, nbytes: int) -> None:
    """Give the op a scratch operand of at least nbytes: grow the one the
    layout planned (for CMSIS-NN), or add one. Scratch is int8 activation
    memory live during this op only (the planner gives it its own buffer)."""
    if len(op.inputs) > _CONV_SCRATCH and op.inputs[_CONV_SCRATCH] >= 0:
        t = pg.tensors[op.inputs[_CONV_SCRATCH]]
        if t.nbytes < nbytes:
            assert t.buffer is not None
            t.dims = (nbytes,)
            pg.buffers[t.buffer] = nbytes
        return
    t = PTensor(f"{op.name}_scratch", (nbytes,), "I8", buffer=len(pg.buffers))
    pg.buffers.append(nbytes)
    pg.tensors.append(t)
    while len(op.inputs) < _CONV_SCRATCH:
        op.inputs.append(-1)
    op.inputs.append(len(pg.tensors) - 1)


# The op codes nnlib may claim (the rest stay on the portable kernels).
CLAIMED_CODES = ("CONV2D_S8", "DEPTHWISE_CONV2D_S8", "LINEAR_S8")


def decide(pg: PGraph) -> list[tuple[int, Claim | str]]:
    """For each int8 op nnlib has a function for: its claim, or why it stays
    portable. Changes nothing."""
    out: list[tuple[int, Claim | str]] = []
    for i, op in enumerate(pg.ops):
        if op.code in ("CONV2D_S8", "DEPTHWISE_CONV2D_S8"):
            out.append((i, _conv(pg, i, op)))
        elif op.code == "LINEAR_S8":
            out.append((i, _linear(pg, i, op)))
        elif op.code in _NOT_MODELLED:
            out.append((i, _NOT_MODELLED[op.code]))
        # float ops, data movement, int4: nothing nnlib offers here
    return out


def apply(pg: PGraph, decisions: list[tuple[int, Claim | str]]) -> HifiPlan:
    """Mark the claimed ops (op.backend) and plan their scratch. Call before
    memory planning."""
    plan = HifiPlan()
    for i, got in decisions:
        op = pg.ops[i]
        if isinstance(got, str):
            if op.code in ("CONV2D_S8", "DEPTHWISE_CONV2D_S8") and _conv_shape_reason(pg, op) is None:
                # Refused for its values only: the firmware kernel still requires nnlib's scratch at
                # load for this shape (values are read at run), so plan it.
                _plan_scratch(pg, op, _conv_scratch_bytes(pg, op))
            plan.rejected.append((i, op.name, op.code, got))
            continue
        if got.scratch_bytes:
            _plan_scratch(pg, op, got.scratch_bytes)
        op.backend = BACKEND
        plan.claims.append(got)
    return plan


def claim(pg: PGraph) -> HifiPlan:
    """Claim the ops the hifi kernels run on nnlib (marking op.backend), and
    plan their scratch. Call before memory planning."""
    return apply(pg, decide(pg))


def report(plan: HifiPlan, board: Board) -> dict[str, Any]:
    """The report.json section: what runs on the DSP, each call, its estimate."""
    hz = board.clock_hz
    ops = [{"index": c.index, "name": c.name, "code": c.code, "call": c.call, "macs": c.macs,
            "scratch_bytes": c.scratch_bytes, "est_cycles": c.est_cycles,
            "est_us": round(c.est_cycles / hz * 1e6, 3), "args": c.args} for c in plan.claims]
    total = sum(c.est_cycles for c in plan.claims)
    return {
        "board": board.name,
        "library": "Cadence HiFi 4 NN library (nnlib), double-rounding build (TFLITE_SINGLE_ROUNDING=0)",
        "ops": ops,
        "not_claimed": [{"index": i, "name": n, "code": c, "reason": r} for i, n, c, r in plan.rejected],
        "macs": sum(c.macs for c in plan.claims),
        "est_cycles": total,
        "est_us": round(total / hz * 1e6, 3),
        "clock_hz": hz,
        "estimate_basis": ESTIMATE_BASIS,
        "run_on_target": False,
    }


def format_report(r: dict[str, Any]) -> str:
    lines = [(f"HiFi 4 (nnlib) on {r['board']}: {len(r['ops'])} ops on the DSP, {r['macs']:,} MACs, "
              f"estimated >= {r['est_cycles']:,} cycles ({r['est_us']:,} us at {r['clock_hz'] / 1e6:g} MHz)"),
             f"  estimate: {r['estimate_basis']}"]
    for o in r["ops"]:
        lines.append(f"  {o['index']:>3} {o['name'][:24]:<24} {o['call']:<46} {o['macs']:>10,} MACs "
                     f"~{o['est_cycles']:>9,} cycles  scratch {o['scratch_bytes']:,} B")
    for o in r["not_claimed"]:
        lines.append(f"  {o['index']:>3} {o['name'][:24]:<24} portable: {o['reason']}")
    lines.append("  not run on an Xtensa target: the figures are estimates")
    return "\n".join(lines) + "\n"
