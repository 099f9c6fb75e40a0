"""Quantization: a backend-aware PT2E quantizer and the calibration driver.

The scheme is the one CMSIS-NN and TensorFlow Lite Micro run natively:
activations int8 asymmetric per tensor; weights int8 symmetric per output
channel (-127..127, zero point 0); bias int32 at s_in * s_w[c] (computed
when lowering, from the float bias, as TFLite's converter does); softmax
and sigmoid outputs at scale 1/256, zero point -128; tanh at 1/128, 0;
pass-through ops (pools, reshapes, permutes, concat, constant padding,
maximum/minimum) share their input's quantization, so they run on the int8
bytes with no requantization. hardswish's output is calibrated (an int8
table); a matmul of two activations is TFLite's int8 BATCH_MATMUL, and a
matmul by a 2-D parameter a linear layer (weights per output column).

W4A8 (weights="int4"): the weights of conv, depthwise conv and linear layers
are int4, symmetric per output channel in the narrow range -7..7 (zero point
0; -8 is left out as TFLite's converter does for its int4 weights, so the
grid stays symmetric and the .tflite export keeps the same values); they
are stored as int8 tensors holding values in that range, packed two per
byte when lowered. Activations and every other op stay int8.

A16W8 (activations="int16"): activations int16, symmetric (zero point 0,
-32767..32767, as CMSIS-NN's s16 kernels and TFLite's int16x8 scheme
require), weights int8 per output channel as at int8 (CMSIS-NN's
arm_fully_connected_s16 takes one multiplier: its wrapper runs one output
row at a time); softmax, sigmoid and tanh outputs at 1/32768. Ops without an int16 kernel run in float between
DEQUANTIZE_S16 / QUANTIZE_S16 (see lower_s16.py).

Mixed precision (precision={"conv1": "int16", "fc": "int4"}): per layer, by
module path (as in model.named_modules(), e.g. "blocks.0.conv") or graph
node name, one of int4 (W4A8), int8 or int16 (a16w8) for that op's weights
and output (a fused activation follows its conv/linear); every other op
takes the default scheme. Where a consumer's precision differs from its
producer's, PT2E quantizes the edge again; lowering makes that one integer
REQUANTIZE op (lower_s16.fold_requantize).

A conv or linear followed by ReLU/ReLU6/hardtanh is annotated as one
pattern (its output quantized after the activation), so the activation
fuses into the int8 kernel's clamp.
"""

from __future__ import annotations

import dataclasses
import operator
import sys
import time
from typing import Any

import numpy as np
import torch
from torch.fx import Node

from ..errors import TorchMCUError
from . import ranges, recurrent
from .attention import decompose_attention
from .reparam import META_KEY as REPARAM_KEY, PATHS_KEY as REPARAM_PATHS

aten = torch.ops.aten


def _quiet_torchao() -> None:
    """Import torchao without its notes about optional GPU extensions it
    cannot load on a CPU-only machine (they concern nothing torchmcu uses)."""
    import logging

    loggers = [logging.getLogger(n) for n in ("torchao", "torch.utils._pytree")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        import torchao.quantization.pt2e  # noqa: F401
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _specs(weights: str = "int8", activations: str = "int8"):
    _quiet_torchao()
    from torchao.quantization.pt2e import MinMaxObserver, PerChannelMinMaxObserver
    from torchao.quantization.pt2e.quantizer import FixedQParamsQuantizationSpec, QuantizationSpec

    eps = 2.0 ** -12  # keeps a constant tensor's scale finite
    qmax = WEIGHT_QMAX[weights]
    weight = QuantizationSpec(dtype=torch.int8, quant_min=-qmax, quant_max=qmax,
                              qscheme=torch.per_channel_symmetric, ch_axis=0, is_dynamic=False,
                              observer_or_fake_quant_ctr=PerChannelMinMaxObserver.with_args(eps=eps))
    if activations == "int16":  # symmetric, zero point 0 (CMSIS-NN s16, TFLite int16x8)
        act = QuantizationSpec(dtype=torch.int16, quant_min=-32767, quant_max=32767,
                               qscheme=torch.per_tensor_symmetric, is_dynamic=False,
                               observer_or_fake_quant_ctr=MinMaxObserver.with_args(eps=2.0 ** -20))

        def fixed16(scale: float, zero_point: int) -> Any:  # int8's (1/256, -128) or (1/128, 0): int16's 1/32768
            return FixedQParamsQuantizationSpec(dtype=torch.int16, scale=1 / 32768, zero_point=0, quant_min=-32767,
                                                quant_max=32767, qscheme=torch.per_tensor_affine)

        return act, weight, fixed16
    act = QuantizationSpec(dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=torch.per_tensor_affine,
                           is_dynamic=False, observer_or_fake_quant_ctr=MinMaxObserver.with_args(eps=eps))

    def fixed(scale: float, zero_point: int) -> Any:
        return FixedQParamsQuantizationSpec(dtype=torch.int8, scale=scale, zero_point=zero_point, quant_min=-128,
                                            quant_max=127, qscheme=torch.per_tensor_affine)

    return act, weight, fixed


WEIGHT_QMAX = {"int8": 127, "int4": 7}  # symmetric narrow range -qmax..qmax
PRECISIONS = {"int4": ("int4", "int8"), "int8": ("int8", "int8"), "int16": ("int8", "int16")}  # (weights, activations)


WEIGHTED = {aten.conv2d.default, aten.conv2d.padding, aten.linear.default, aten.conv1d.default, aten.conv1d.padding,
            aten.conv_transpose1d.default, aten.conv_transpose2d.input, aten.convolution.default}
# Transposed convolutions: weights [in, out, ...], per output channel along axis 1.
TRANSPOSED = {aten.conv_transpose1d.default, aten.conv_transpose2d.input}
ACTIVATIONS = {aten.relu.default, aten.relu6.default, aten.hardtanh.default, aten.clamp.default}
BINARY = {aten.add.Tensor, aten.mul.Tensor, aten.sub.Tensor, aten.div.Tensor}
# An activation and a constant (a Python scalar or a parameter): the activation
# and the output quantized, the constant by the lowering (TFLite's way).
WITH_CONSTANT = {aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar, aten.mul.Tensor,
                 aten.mul.Scalar, aten.div.Tensor, aten.div.Scalar, aten.rsub.Scalar, aten.rsub.Tensor}
SHARED = {
    aten.max_pool2d.default, aten.avg_pool2d.default, aten.adaptive_avg_pool2d.default, aten.mean.dim,
    aten.flatten.using_ints, aten.view.default, aten.reshape.default, aten._unsafe_view.default,
    aten.permute.default, aten.transpose.int, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default,
    aten.unsqueeze.default, aten.dropout.default, aten.clone.default, aten.contiguous.default,
    aten.pad.default, aten.constant_pad_nd.default,
    aten.max_pool1d.default, aten.avg_pool1d.default, aten.adaptive_avg_pool1d.default,
    aten._adaptive_avg_pool2d.default, aten.upsample_nearest1d.vec, aten.upsample_nearest2d.vec,
    aten.upsample_nearest1d.default, aten.upsample_nearest2d.default, aten._upsample_nearest_exact1d.vec,
    aten._upsample_nearest_exact2d.vec, aten._upsample_nearest_exact1d.default,
    aten._upsample_nearest_exact2d.default, aten.upsample_bilinear2d.vec, aten.upsample_linear1d.vec,
    aten.upsample_bilinear2d.default, aten.upsample_linear1d.default,
    # views (capture's split / chunk / unbind are slices)
    aten.slice.Tensor, aten.select.int, aten.narrow.default, aten.expand.default, aten.unflatten.int,
}
# Two inputs and the output at one quantization (int8 max/min of the raw values).
SHARED_BINARY = {aten.maximum.default, aten.minimum.default}
# x and the output at one quantization; the mask (bool) and the filled value as they are.
MASKED = {aten.masked_fill.Scalar, aten.masked_fill.Tensor}
WHERE = {aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther}  # (one of the two a scalar)
# Calibrated output, one activation input (int8 as a table lookup).
CALIBRATED_UNARY = {
    aten.hardswish.default,
    # element-wise tables, PReLU, GLU, and the normalisations (their constants
    # are quantized by the lowering)
    aten.gelu.default, aten.silu.default, aten.hardsigmoid.default, aten.elu.default, aten.leaky_relu.default,
    aten.exp.default, aten.rsqrt.default, aten.sqrt.default, aten.reciprocal.default, aten.neg.default, aten.prelu.default,
    aten.glu.default, aten.layer_norm.default, aten.group_norm.default, aten.batch_norm.default,
}
LOG_SOFTMAX = {aten.log_softmax.int, aten._log_softmax.default}  # TFLite's int8 output: 16/256, 127
MATMUL = {aten.bmm.default, aten.mm.default, aten.matmul.default}
FIXED_OUTPUT = {  # TFLite's fixed output quantization for these ops
    aten.softmax.int: (1 / 256, -128), aten._softmax.default: (1 / 256, -128),
    aten.sigmoid.default: (1 / 256, -128), aten.tanh.default: (1 / 128, 0),
    torch.ops.torchmcu.attention_softmax.default: (1 / 256, -128),  # frontend/attention.py
}


def _is_activation(n: Any) -> bool:
    """A float tensor computed by the graph (not a parameter or a literal)."""
    if not isinstance(n, Node):
        return False
    val = n.meta.get("val")
    if not isinstance(val, torch.Tensor) or not val.is_floating_point():
        return False
    if n.op == "get_attr":
        return False
    return True


def _share_fixed_outputs(nodes: set[Node], fixed_type: Any, shared_type: Any) -> None:
    """A consumer reads a fixed-quantization output (softmax, sigmoid, tanh) at
    that quantization: no second observer, no requantization between them."""
    for n in nodes:
        ann = n.meta["quantization_annotation"]
        for x, spec in list(ann.input_qspec_map.items()):
            src = x.meta.get("quantization_annotation") if isinstance(x, Node) else None
            if src is not None and isinstance(src.output_qspec, fixed_type) and not isinstance(
                    spec, (fixed_type, shared_type)):
                ann.input_qspec_map[x] = shared_type(x)


def _make_quantizer_class():
    _quiet_torchao()
    from torchao.quantization.pt2e.quantizer import (
        FixedQParamsQuantizationSpec,
        QuantizationAnnotation,
        Quantizer,
        SharedQuantizationSpec,
    )

    class TorchMCUQuantizer(Quantizer):
        """int8 for CMSIS-NN / TFLite Micro kernels (see the module docstring)."""

        def __init__(self, skip: set[str] | None = None, weights: str = "int8",
                     activations: str = "int8", precision: dict[str, str] | None = None) -> None:
            super().__init__()
            if weights not in WEIGHT_QMAX:
                raise TorchMCUError(f"weights={weights!r}: one of {', '.join(WEIGHT_QMAX)}")
            if activations not in ("int8", "int16") or (activations == "int16" and weights != "int8"):
                raise TorchMCUError(f"activations={activations!r} with weights={weights!r}: int8 activations, "
                                    "or int16 with int8 weights (a16w8)")
            self.skip = skip or set()  # node names kept in float
            self.weights = weights  # "int8", or "int4" (W4A8)
            self.activations = activations  # "int8", or "int16" (a16w8)
            self.precision = dict(precision or {})  # module path or node name -> int4 | int8 | int16
            bad = {k: v for k, v in self.precision.items() if v not in PRECISIONS}
            if bad:
                raise TorchMCUError(f"precision {bad}: each layer is one of {', '.join(PRECISIONS)}")
            self.default = "int16" if activations == "int16" else weights  # int4 | int8 | int16
            self.matched: set[str] = set()

        def layer_precision(self, n: Node) -> str:
            stack = list((n.meta.get("nn_module_stack") or {}).values())
            path = str(stack[-1][0]) if stack else ""
            # A conv that branches folded into (reparam.py) answers to their module paths too.
            for key in (n.name, path, *n.meta.get(REPARAM_PATHS, ())):
                if key and key in self.precision:
                    self.matched.add(key)
                    return self.precision[key]
            return self.default

        def annotate(self, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
            specs = {p: _specs(*PRECISIONS[p]) for p in {self.default, *self.precision.values()}}
            done: set[Node] = set()

            def mark(node: Node, inputs: dict, output: Any) -> None:
                node.meta["quantization_annotation"] = QuantizationAnnotation(
                    input_qspec_map=inputs, output_qspec=output, _annotated=True)
                done.add(node)

            for n in gm.graph.nodes:
                if n.op != "call_function" or n in done or n.name in self.skip:
                    continue
                act, weight, fixed = specs[self.layer_precision(n)]
                if n.target in WEIGHTED:
                    x, w = n.args[0], n.args[1]
                    if not _is_activation(x):
                        continue
                    users = list(n.users)
                    fused = users[0] if len(users) == 1 and users[0].target in ACTIVATIONS else None
                    transposed = n.target in TRANSPOSED or (n.target == aten.convolution.default and n.args[6])
                    wspec = dataclasses.replace(weight, ch_axis=1) if transposed else weight
                    mark(n, {x: act, w: wspec}, None if fused else act)
                    if fused is not None:
                        mark(fused, {}, act)
                elif n.target in BINARY and _is_activation(n.args[0]) and _is_activation(n.args[1]):
                    a, b = n.args[0], n.args[1]
                    users = list(n.users)
                    fused = users[0] if len(users) == 1 and users[0].target in ACTIVATIONS else None
                    mark(n, {a: act, b: act}, None if fused else act)
                    if fused is not None:
                        mark(fused, {}, act)
                elif n.target in MATMUL:
                    a, b = n.args[0], n.args[1]
                    if not _is_activation(a):
                        if _is_activation(b):  # a constant times an activation: the constant quantized later
                            mark(n, {b: act}, act)
                        continue
                    if _is_activation(b):
                        mark(n, {a: act, b: act}, act)
                    elif isinstance(b, Node) and b.meta.get("val") is not None and b.meta["val"].dim() == 2:
                        # x @ W with W [K, N] a parameter: a linear layer, weights per output channel (N).
                        mark(n, {a: act, b: dataclasses.replace(weight, ch_axis=1)}, act)
                    else:  # a constant of another rank: quantized per tensor by the lowering
                        mark(n, {a: act}, act)
                elif n.target in WITH_CONSTANT and sum(map(_is_activation, n.args[:2])) == 1:
                    x = n.args[0] if _is_activation(n.args[0]) else n.args[1]
                    mark(n, {x: act}, act)
                elif n.target == aten._native_batch_norm_legit_no_training.default and _is_activation(n.args[0]):
                    # functionalization's batch norm gives (output, mean, rstd): the output is item 0
                    item = [u for u in n.users if u.target is operator.getitem and u.args[1] == 0]
                    mark(n, {n.args[0]: act}, None)
                    for u in item:
                        mark(u, {}, act)
                elif n.target in LOG_SOFTMAX and _is_activation(n.args[0]):
                    # int16 has no TFLite log-softmax: a calibrated output (its op runs in float)
                    mark(n, {n.args[0]: act}, fixed(16 / 256, 127) if act.dtype == torch.int8 else act)
                elif n.target in SHARED_BINARY:
                    a, b = n.args[0], n.args[1]
                    if not _is_activation(a):
                        a, b = b, a
                    if not _is_activation(a):
                        continue
                    if not _is_activation(b):  # a constant: quantized at a's quantization by the lowering
                        mark(n, {a: act}, SharedQuantizationSpec((a, n)))
                        continue
                    # (the same node twice, minimum(x, x): one input entry, else it would share with itself)
                    inputs = {a: act} if a is b else {a: act, b: SharedQuantizationSpec((a, n))}
                    mark(n, inputs, SharedQuantizationSpec((a, n)))
                elif n.target in MASKED and _is_activation(n.args[0]):
                    mark(n, {n.args[0]: act}, SharedQuantizationSpec((n.args[0], n)))
                elif n.target in WHERE and sum(map(_is_activation, n.args[1:3])) == 1:
                    x = n.args[1] if _is_activation(n.args[1]) else n.args[2]
                    mark(n, {x: act}, SharedQuantizationSpec((x, n)))
                elif n.target in CALIBRATED_UNARY and _is_activation(n.args[0]):
                    mark(n, {n.args[0]: act}, act)
                elif n.target in SHARED and _is_activation(n.args[0]):
                    x = n.args[0]
                    mark(n, {x: act}, SharedQuantizationSpec((x, n)))
                elif n.target == aten.cat.default:
                    tensors = list(n.args[0])
                    if not all(_is_activation(t) for t in tensors):
                        continue
                    first = tensors[0]
                    inputs = {first: act, **{t: SharedQuantizationSpec((first, n)) for t in tensors[1:]}}
                    mark(n, inputs, SharedQuantizationSpec((first, n)))
                elif n.target in FIXED_OUTPUT and _is_activation(n.args[0]):
                    mark(n, {n.args[0]: act}, fixed(*FIXED_OUTPUT[n.target]))
                elif n.target in ACTIVATIONS and _is_activation(n.args[0]):
                    # A standalone clamp keeps its input's quantization: an int8 min/max.
                    mark(n, {n.args[0]: act}, SharedQuantizationSpec((n.args[0], n)))
                elif n.target in recurrent.TARGETS:  # fixed state quantizations from recorded ranges
                    recurrent.annotate(n, act, mark)
            recurrent.share_consumers(gm)
            _share_fixed_outputs(done, FixedQParamsQuantizationSpec, SharedQuantizationSpec)
            unknown = sorted(set(self.precision) - self.matched)
            if unknown:
                raise TorchMCUError(f"precision names {', '.join(unknown)}: no quantized op of the model has that "
                                    "module path or node name")
            return gm

        def transform_for_annotation(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
            """Attention taken apart, so its scores and probabilities are observed;
            clamps with tensor bounds as maximum / minimum (each at one quantization)."""
            return clamp_as_max_min(decompose_attention(model))

        def validate(self, gm: torch.fx.GraphModule) -> None:
            pass

    return TorchMCUQuantizer


CLAMP_TENSOR = {aten.clamp.Tensor: (1, 2), aten.clamp_min.Tensor: (1, None), aten.clamp_max.Tensor: (None, 1)}


def clamp_as_max_min(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """clamp(x, lo, hi) with tensor bounds -> minimum(maximum(x, lo), hi) (as
    PyTorch defines it), in place: an int8 max / min of the raw values each."""
    changed = False
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target not in CLAMP_TENSOR:
            continue
        x = n.args[0]
        names = ("min", "max")
        bounds = [None if k is None else (n.args[k] if len(n.args) > k else n.kwargs.get(names[j]))
                  for j, k in enumerate(CLAMP_TENSOR[n.target])]
        with gm.graph.inserting_before(n):
            for target, bound in zip((aten.maximum.default, aten.minimum.default), bounds):
                if bound is None:
                    continue
                y = gm.graph.call_function(target, (x, bound))
                y.meta = {k: v for k, v in n.meta.items() if k != "val"}
                a, b = (v.meta["val"] if isinstance(v, Node) else torch.tensor(v) for v in (x, bound))
                with a.fake_mode if hasattr(a, "fake_mode") else b.fake_mode:
                    y.meta["val"] = target(a, b)
                x = y
        n.replace_all_uses_with(x)
        gm.graph.erase_node(n)
        changed = True
    if changed:
        gm.recompile()
    return gm


def calibration_samples(data: Any, example_inputs: tuple[torch.Tensor, ...]) -> list[tuple[torch.Tensor, ...]]:
    """Calibration data as a list of input tuples shaped like example_inputs.

    `data` is an iterable of samples (tensors, arrays or tuples of them), or a
    mapping from input name/key to an array with samples along axis 0 (what
    np.load gives for an .npz; a single-input model takes its one array under any name).
    """
    shapes = [tuple(x.shape) for x in example_inputs]
    # integer and bool inputs (token ids, lengths, masks) are taken in the example's dtype
    kinds = [x.dtype if isinstance(x, torch.Tensor) and not x.is_floating_point() else None for x in example_inputs]

    def as_tuple(s: Any) -> tuple[torch.Tensor, ...]:
        items = s if isinstance(s, (tuple, list)) else (s,)
        out = []
        for i, (x, shape) in enumerate(zip(items, shapes)):
            t = torch.as_tensor(np.asarray(x))
            if t.dtype == torch.float64:
                t = t.float()
            if i < len(kinds) and kinds[i] is not None and not t.is_floating_point():
                t = t.to(kinds[i])
            elif t.dtype != torch.float32:
                raise TorchMCUError(f"calibration input {i} is {t.dtype}; expected float32")
            if tuple(t.shape) != shape:
                if tuple(t.shape) == shape[1:] and shape[0] == 1:
                    t = t.unsqueeze(0)
                else:
                    raise TorchMCUError(f"calibration input {i} has shape {list(t.shape)}; "
                                        f"expected {list(shape)}")
            out.append(t)
        if len(items) != len(shapes):
            raise TorchMCUError(f"calibration samples have {len(items)} input(s); the model takes {len(shapes)}")
        return tuple(out)

    if hasattr(data, "keys") and hasattr(data, "__getitem__"):
        keys = list(data.keys())
        if len(keys) == len(shapes):
            arrays = [np.asarray(data[k]) for k in keys]
        else:
            raise TorchMCUError(f"calibration file has arrays {keys}; the model takes {len(shapes)} input(s)")
        for i, (a, shape) in enumerate(zip(arrays, shapes)):
            if a.dtype == np.float64:  # NumPy's default: the values are what the user means
                a = arrays[i] = a.astype(np.float32)
            if a.dtype != np.float32 and not (kinds[i] is not None and a.dtype.kind in "biu"):
                raise TorchMCUError(f"calibration array {i} is {a.dtype}; expected float32 "
                                    f"with shape [N, {', '.join(map(str, shape[1:] if shape[0] == 1 else shape))}]")
            if a.ndim != len(shape) and a.ndim != len(shape) + 1:
                raise TorchMCUError(f"calibration array {i} has shape {list(a.shape)}; expected samples along "
                                    f"axis 0, each of shape {list(shape[1:] if shape[0] == 1 else shape)}")
        n = len(arrays[0])
        return [as_tuple(tuple(a[j] for a in arrays)) for j in range(n)]
    return [as_tuple(s) for s in data]


def _progress(i: int, n: int, t0: float) -> None:
    """A bar redrawn in place on a terminal; a line per quarter in a log."""
    tty = sys.stderr.isatty()
    if not tty and i not in (1, n) and i % max(1, n // 4):
        return
    width = 30
    done = int(width * i / n)
    sys.stderr.write(f"{chr(13) if tty else ''}torchmcu: calibrating [{'#' * done}{'.' * (width - done)}] "
                     f"{i}/{n} ({time.monotonic() - t0:.1f} s){'' if tty and i < n else chr(10)}")
    sys.stderr.flush()


def quantize(model: torch.nn.Module, example_inputs: tuple[torch.Tensor, ...], calibration: Any = None,
             progress: bool = True, weights: str = "int8", activations: str = "int8",
             precision: dict[str, str] | None = None, recurrent_weights: str = "per-channel",
             reparam: bool = True) -> torch.fx.GraphModule:
    """PTQ with torchao's prepare_pt2e / convert_pt2e: the q/dq model, which is
    also PyTorch's own reference for the quantized numerics. reparam: parallel
    branches folded first (capture.export), so calibration sees the folded
    model. Recurrent layers' weights, which PT2E cannot see inside aten.lstm &
    co., are quantized and dequantized in it as lowering will quantize them
    (recurrent.fake_quantize_weights)."""
    _quiet_torchao()
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    from .capture import check_inputs, export, to_eval

    check_inputs(example_inputs)
    samples = calibration_samples(calibration, example_inputs) if calibration is not None else [example_inputs]
    if not samples:
        raise TorchMCUError("the calibration set is empty")
    float_program = export(to_eval(model), example_inputs, reparam)  # functional ATen, as capture gives the float path
    gm = float_program.module()
    has_recurrent = recurrent.record(gm, samples)  # the ranges inside recurrent ops, which PT2E does not see
    prepared = prepare_pt2e(gm, _make_quantizer_class()(weights=weights, activations=activations, precision=precision))
    t0 = time.monotonic()
    with torch.no_grad():
        for i, s in enumerate(samples, 1):
            prepared(*s)
            if progress:
                _progress(i, len(samples), t0)
    if has_recurrent:
        recurrent.snap_observers(prepared)
    found = ranges.check_ranges(prepared, example_inputs)  # degenerate or absurd calibrated ranges
    ranges.refuse_non_finite(found)
    ranges.announce(found, progress)
    converted = convert(prepared)
    if has_recurrent:
        recurrent.fake_quantize_weights(converted, per_row=recurrent_weights == "per-channel")
    ranges.attach(converted, float_program, found)
    converted.meta.update({k: v for k, v in float_program.graph_module.meta.items() if k == REPARAM_KEY})
    return converted


_CONVS = ("conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "convolution")


def _conv_feeds_batch_norm(gm: torch.fx.GraphModule) -> bool:
    """Whether a batch norm of `gm` takes a convolution's output, through
    observers, quantize / dequantize nodes and QAT's rescaling arithmetic:
    the conv-bn pattern convert_pt2e folds."""
    passes = ("quantize", "div", "add", "mul", "sub", "reshape", "view")
    for n in gm.graph.nodes:
        if n.op != "call_function" or "batch_norm" not in str(n.target):
            continue
        todo, seen = [n.args[0]] if n.args else [], set()
        while todo:
            x = todo.pop()
            if not isinstance(x, torch.fx.Node) or x in seen:
                continue
            seen.add(x)
            if x.op == "call_function" and any(c in str(x.target) for c in _CONVS):
                return True
            if x.op == "call_module" or (x.op == "call_function" and any(s in str(x.target) for s in passes)):
                todo.extend(a for a in x.args if isinstance(a, torch.fx.Node))
    return False


def convert(prepared: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """convert_pt2e. Where no batch norm follows a convolution (a lone
    BatchNorm1d, a BN after a linear layer), its conv-bn folding is skipped:
    with a batch norm in the graph it otherwise traces 96 patterns
    (about 2 minutes) to find none."""
    from torchao.quantization.pt2e import quantize_pt2e

    if _conv_feeds_batch_norm(prepared):
        return quantize_pt2e.convert_pt2e(prepared)
    fold = quantize_pt2e._fold_conv_bn_qat
    quantize_pt2e._fold_conv_bn_qat = lambda m: m
    try:
        return quantize_pt2e.convert_pt2e(prepared)
    finally:
        quantize_pt2e._fold_conv_bn_qat = fold


def is_quantized(model: Any) -> bool:
    """Whether `model` is already a q/dq graph (convert_pt2e's output, e.g.
    after QAT with prepare_qat_pt2e): then compile takes it as it is."""
    if not isinstance(model, torch.fx.GraphModule):
        return False
    return any(n.op == "call_function" and "quantize_per_tensor" in str(n.target) for n in model.graph.nodes)


def quantizer(skip: set[str] | None = None, weights: str = "int8", activations: str = "int8",
              precision: dict[str, str] | None = None) -> Any:
    """The quantizer itself, for users who drive prepare_pt2e / prepare_qat_pt2e
    (weights="int4" for W4A8; QAT then learns the int4 grid; activations="int16"
    for a16w8)."""
    return _make_quantizer_class()(skip, weights, activations, precision)
