"""Lowering, first half: an ExportedProgram to the logical graph, then the
graph passes that need no layout (batch-norm folding, activation fusion).

The logical graph keeps PyTorch's semantics (NCHW, logical shapes): each
node is one of a small set of ops with plain attributes, each operand an
activation (an int id) or a constant (a NumPy array). `layout.py` then
decides memory layouts and emits program ops.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any, Callable, Union

import numpy as np
import torch

from .capture import user_frame
from .errors import CompileError

@dataclass
class QConst:
    """A quantized constant (weights after PT2E's convert): integer data with
    per-tensor or per-channel (along `axis`) scale and zero point."""

    data: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None
    bits: int = 8  # 4: int4 values (-8..7) in int8 storage, packed when laid out

    def dequantized(self) -> np.ndarray:
        shape = [1] * self.data.ndim
        if self.axis is not None:
            shape[self.axis] = -1
        s = self.scale.reshape(shape) if self.axis is not None else self.scale
        z = self.zero_point.reshape(shape) if self.axis is not None else self.zero_point
        return ((self.data.astype(np.float32) - z) * s).astype(np.float32)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape


Operand = Union[int, np.ndarray, QConst]  # activation id, or a constant

INF = math.inf


def _quantized_decomposed() -> Any:
    import torch.ao.quantization.fx._decomposed  # noqa: F401  registers the q/dq ops PT2E emits

    return torch.ops.quantized_decomposed


QD = _quantized_decomposed()


@dataclass
class Node:
    op: str  # conv2d linear batch_norm clamp sigmoid tanh hardswish add mul maximum minimum
    #          max_pool2d avg_pool2d mean softmax reshape permute cat pad bmm
    inputs: list[Operand]
    attrs: dict[str, Any]
    out: int
    name: str
    source: str | None = None


@dataclass
class Graph:
    shapes: dict[int, tuple[int, ...]] = field(default_factory=dict)  # activation id -> logical shape
    nodes: list[Node] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[Operand] = field(default_factory=list)
    input_names: list[str] = field(default_factory=list)
    qparams: dict[int, tuple[float, int]] = field(default_factory=dict)  # int8 values: (scale, zero point)
    int16: set[int] = field(default_factory=set)  # the quantized values that are int16 (a16w8), not int8

    def new_value(self, shape: tuple[int, ...]) -> int:
        vid = len(self.shapes)
        self.shapes[vid] = tuple(int(s) for s in shape)
        return vid

    def users(self, vid: int) -> list[Node]:
        return [n for n in self.nodes if any(isinstance(i, int) and i == vid for i in n.inputs)]

    def is_output(self, vid: int) -> bool:
        return any(isinstance(o, int) and o == vid for o in self.outputs)


# ---------------------------------------------------------------------------------------------
# From the exported FX graph


def _pair(v: Any) -> tuple[int, int]:
    if isinstance(v, (list, tuple)):
        return (int(v[0]), int(v[0])) if len(v) == 1 else (int(v[0]), int(v[1]))
    return int(v), int(v)


def _dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def _const(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().to(torch.float32).numpy().copy() if x.is_floating_point() else x.detach().numpy().copy()
    return np.asarray(x, dtype=np.float32)


class _Converter:
    """Walks the FX graph; one method per supported ATen op (see RULES)."""

    def __init__(self, ep: torch.export.ExportedProgram) -> None:
        self.ep = ep
        self.g = Graph()
        self.env: dict[torch.fx.Node, Any] = {}
        self.node: torch.fx.Node | None = None

    # -- helpers ---------------------------------------------------------------------------
    def fail(self, message: str) -> CompileError:
        n = self.node
        assert n is not None
        shapes = [tuple(a.meta["val"].shape) for a in n.all_input_nodes if hasattr(a.meta.get("val"), "shape")]
        return CompileError(message, op=str(n.target), shapes=shapes, source=user_frame(n))

    def out_shape(self) -> tuple[int, ...]:
        assert self.node is not None
        val = self.node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise self.fail("expected a single tensor result")
        return tuple(int(s) for s in val.shape)

    def emit(self, op: str, inputs: list[Operand], attrs: dict[str, Any] | None = None,
             shape: tuple[int, ...] | None = None) -> int:
        assert self.node is not None
        out = self.g.new_value(shape if shape is not None else self.out_shape())
        self.g.nodes.append(Node(op, inputs, attrs or {}, out, self.node.name, user_frame(self.node)))
        return out

    def act(self, v: Any) -> int:
        if not _is_activation(v):
            raise self.fail("expected an activation operand here, got a constant")
        return v

    def shape(self, v: Operand) -> tuple[int, ...]:
        return self.g.shapes[v] if isinstance(v, int) else tuple(v.shape)

    # -- ops ---------------------------------------------------------------------------------
    def conv2d(self, x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
        x = self.act(x)
        if len(self.shape(x)) != 4:
            raise self.fail("only batched 2-D convolution (NCHW input) is supported")
        if not isinstance(w, (np.ndarray, QConst)) or (b is not None and not isinstance(b, np.ndarray)):
            raise self.fail("convolution weights must be constants (parameters)")
        kh, kw = w.shape[2], w.shape[3]
        dh, dw = _pair(dilation)
        if isinstance(padding, str):
            if padding == "valid":
                ph, pw = 0, 0
            else:  # "same": PyTorch pads the extra row/column at the end; symmetric only here
                th, tw = dh * (kh - 1), dw * (kw - 1)
                if th % 2 or tw % 2:
                    raise self.fail("padding='same' with an even kernel pads unevenly; not supported")
                ph, pw = th // 2, tw // 2
        else:
            ph, pw = _pair(padding)
        attrs = dict(stride=_pair(stride), padding=(ph, pw), dilation=(dh, dw), groups=int(groups), act=(-INF, INF))
        return self.emit("conv2d", [x, w, b if b is not None else None], attrs)

    def linear(self, x, w, b=None):
        if not isinstance(w, (np.ndarray, QConst)) or (b is not None and not isinstance(b, np.ndarray)):
            raise self.fail("linear weights must be constants (parameters)")
        return self.emit("linear", [self.act(x), w, b], dict(act=(-INF, INF)))

    def batch_norm(self, x, weight, bias, mean, var, training=False, momentum=0.1, eps=1e-5, cudnn=False):
        if training:
            raise self.fail("batch norm in training mode; call model.eval() before compiling")
        c = self.shape(x)[1]
        weight = np.ones(c, np.float32) if weight is None else weight
        bias = np.zeros(c, np.float32) if bias is None else bias
        return self.emit("batch_norm", [self.act(x), weight, bias, mean, var], dict(eps=float(eps)))

    def clamp(self, x, lo=None, hi=None):
        lo = -INF if lo is None else float(lo)
        hi = INF if hi is None else float(hi)
        return self.emit("clamp", [self.act(x)], dict(range=(lo, hi)))

    def unary(self, name: str) -> Callable[..., int]:
        return lambda x: self.emit(name, [self.act(x)])

    def binary(self, name: str) -> Callable[..., int]:
        def convert(a, b, alpha=1):
            if alpha != 1:
                if not isinstance(b, np.ndarray):
                    raise self.fail("add/sub with alpha on two activations is not supported")
                b = b * np.float32(alpha)
            if not _is_activation(a) and _is_activation(b):
                a, b = b, a  # both ops commute; keep the activation first
            return self.emit(name, [self.act(a), b if _is_activation(b) else _const(b)], dict(act=(-INF, INF)))
        return convert

    def sub(self, a, b, alpha=1):
        if _is_activation(b):
            raise self.fail("subtracting an activation is not supported yet (only constants)")
        return self.binary("add")(a, -_const(b) * np.float32(alpha))

    def max_pool2d(self, x, kernel, stride=None, padding=0, dilation=1, ceil_mode=False):
        kh, kw = _pair(kernel)
        stride = _pair(stride) if stride else (kh, kw)
        return self.emit("max_pool2d", [self.act(x)], dict(
            kernel=(kh, kw), stride=stride, padding=_pair(padding), dilation=_pair(dilation),
            count_include_pad=False, divisor_override=0, act=(-INF, INF)))

    def avg_pool2d(self, x, kernel, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                   divisor_override=None):
        kh, kw = _pair(kernel)
        stride = _pair(stride) if stride else (kh, kw)
        return self.emit("avg_pool2d", [self.act(x)], dict(
            kernel=(kh, kw), stride=stride, padding=_pair(padding), dilation=(1, 1),
            count_include_pad=bool(count_include_pad), divisor_override=int(divisor_override or 0),
            act=(-INF, INF)))

    def adaptive_avg_pool2d(self, x, output_size):
        n, c, h, w = self.shape(x)
        oh, ow = _pair(output_size)
        if (oh, ow) == (1, 1):
            return self.emit("mean", [self.act(x)], dict(dims=(2, 3)))
        if h % oh or w % ow:
            raise self.fail(f"adaptive average pooling from {h}x{w} to {oh}x{ow} has uneven windows")
        return self.avg_pool2d(x, (h // oh, w // ow))

    def mean(self, x, dims=None, keepdim=False, dtype=None):
        rank = len(self.shape(x))
        dims = tuple(range(rank)) if dims is None else tuple(sorted(_dim(int(d), rank) for d in dims))
        return self.emit("mean", [self.act(x)], dict(dims=dims))

    def softmax(self, x, dim, *rest):
        return self.emit("softmax", [self.act(x)], dict(dim=_dim(int(dim), len(self.shape(x)))))

    def reshape(self, x, *rest):
        return self.emit("reshape", [self.act(x)])

    def permute(self, x, dims):
        rank = len(self.shape(x))
        return self.emit("permute", [self.act(x)], dict(perm=tuple(_dim(int(d), rank) for d in dims)))

    def transpose(self, x, d0, d1):
        rank = len(self.shape(x))
        perm = list(range(rank))
        a, b = _dim(int(d0), rank), _dim(int(d1), rank)
        perm[a], perm[b] = perm[b], perm[a]
        return self.permute(x, perm)

    def t(self, x):
        return self.transpose(x, 0, 1) if len(self.shape(x)) == 2 else x

    def cat(self, tensors, dim=0):
        ins = list(tensors)
        if len(ins) > 8:
            raise self.fail(f"cat of {len(ins)} tensors; at most 8 are supported")
        rank = len(self.shape(ins[0]))
        ins = [t if _is_activation(t) else _const(t) for t in ins]
        return self.emit("cat", ins, dict(dim=_dim(int(dim), rank)))

    def pad(self, x, pad, mode="constant", value=None):
        if mode != "constant":
            raise self.fail(f"padding mode {mode!r} is not supported (only constant padding)")
        return self.constant_pad(x, pad, 0.0 if value is None else value)

    def constant_pad(self, x, pad, value=0.0):
        """F.pad's list: (before, after) pairs from the last dim backwards."""
        x = self.act(x)
        rank = len(self.shape(x))
        pad = [int(p) for p in pad]
        if len(pad) % 2 or len(pad) // 2 > rank:
            raise self.fail(f"padding {pad} for a tensor of rank {rank}")
        if any(p < 0 for p in pad):
            raise self.fail(f"negative padding {pad} (cropping) is not supported")
        before, after = [0] * rank, [0] * rank
        for i in range(len(pad) // 2):
            before[rank - 1 - i], after[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
        return self.emit("pad", [x], dict(before=tuple(before), after=tuple(after), value=float(value)))

    def matmul(self, a, b):
        """Two activations: a batched matmul (same batch dims, rank >= 2). An
        activation times a 2-D constant (a parameter): a linear layer."""
        if not _is_activation(a):
            raise self.fail("matmul with a constant left operand is not supported")
        ra = len(self.shape(a))
        if not _is_activation(b):
            if not isinstance(b, (np.ndarray, QConst)) or len(b.shape) != 2 or ra < 1:
                raise self.fail("matmul with a constant right operand needs a 2-D constant [K, N]")
            if isinstance(b, QConst):  # per-channel along N (axis 1) becomes axis 0 of [N, K]
                w: Any = QConst(np.ascontiguousarray(b.data.T), b.scale, b.zero_point,
                                None if b.axis is None else 1 - b.axis, b.bits)
            else:
                w = np.ascontiguousarray(b.T)
            return self.linear(a, w, None)
        sa, sb = self.shape(a), self.shape(b)
        if ra < 2 or len(sb) != ra or sa[:-2] != sb[:-2]:
            raise self.fail("matmul of activations needs operands of one rank >= 2 with equal batch dims "
                            "(no broadcasting)")
        return self.emit("bmm", [a, b])

    def identity(self, x, *rest, **kw):
        return x

    def quantize(self, x, scale, zero_point, qmin, qmax, dtype):
        bits = 16 if dtype == torch.int16 and -32768 <= qmin and qmax <= 32767 and zero_point == 0 else 8
        if bits == 8 and (dtype != torch.int8 or (qmin, qmax) != (-128, 127)):
            raise self.fail(f"only int8 activations (-128..127) or symmetric int16 ones are supported, not "
                            f"{dtype} {qmin}..{qmax} (zero point {zero_point})")
        out = self.emit("quantize", [self.act(x)], dict(scale=float(scale), zero_point=int(zero_point), bits=bits))
        self.g.qparams[out] = (float(scale), int(zero_point))
        if bits == 16:
            self.g.int16.add(out)
        return out

    def dequantize(self, x, scale, zero_point, qmin, qmax, dtype, **kw):
        return self.emit("dequantize", [self.act(x)], dict(scale=float(scale), zero_point=int(zero_point),
                                                          bits=16 if dtype == torch.int16 else 8))

    def rules(self) -> dict[Any, Callable[..., Any]]:
        a = torch.ops.aten
        return {
            a.conv2d.default: self.conv2d,
            a.conv2d.padding: self.conv2d,
            a.linear.default: self.linear,
            a.batch_norm.default: self.batch_norm,
            a.relu.default: lambda x: self.clamp(x, 0.0, None),
            a.relu6.default: lambda x: self.clamp(x, 0.0, 6.0),
            a.hardtanh.default: lambda x, lo=-1.0, hi=1.0: self.clamp(x, lo, hi),
            a.clamp.default: self.clamp,
            a.sigmoid.default: self.unary("sigmoid"),
            a.tanh.default: self.unary("tanh"),
            a.add.Tensor: self.binary("add"),
            a.add.Scalar: self.binary("add"),
            a.mul.Tensor: self.binary("mul"),
            a.mul.Scalar: self.binary("mul"),
            a.sub.Tensor: self.sub,
            a.max_pool2d.default: self.max_pool2d,
            a.avg_pool2d.default: self.avg_pool2d,
            a.adaptive_avg_pool2d.default: self.adaptive_avg_pool2d,
            a.mean.dim: self.mean,
            a.mean.default: lambda x, dtype=None: self.mean(x),
            a.softmax.int: self.softmax,
            a._softmax.default: self.softmax,
            a.flatten.using_ints: self.reshape,
            a.view.default: self.reshape,
            a.reshape.default: self.reshape,
            a._unsafe_view.default: self.reshape,
            a.squeeze.dim: self.reshape,
            a.squeeze.dims: self.reshape,
            a.squeeze.default: self.reshape,
            a.unsqueeze.default: self.reshape,
            a.permute.default: self.permute,
            a.transpose.int: self.transpose,
            a.t.default: self.t,
            a.cat.default: self.cat,
            a.pad.default: self.pad,
            a.constant_pad_nd.default: self.constant_pad,
            a.maximum.default: self.binary("maximum"),
            a.minimum.default: self.binary("minimum"),
            a.hardswish.default: self.unary("hardswish"),
            a.bmm.default: self.matmul,
            a.mm.default: self.matmul,
            a.matmul.default: self.matmul,
            a.dropout.default: self.identity,
            a.contiguous.default: self.identity,
            a.clone.default: self.identity,
            a.detach.default: self.identity,
            a.alias.default: self.identity,
            a.lift_fresh_copy.default: self.identity,
            QD.quantize_per_tensor.default: self.quantize,
            QD.dequantize_per_tensor.default: self.dequantize,
        }

    # -- driver ------------------------------------------------------------------------------
    def run(self) -> Graph:
        sig = self.ep.graph_signature
        constants = {**sig.inputs_to_parameters, **sig.inputs_to_buffers,
                     **getattr(sig, "inputs_to_lifted_tensor_constants", {})}
        state = {**self.ep.state_dict, **self.ep.constants}
        rules = self.rules()
        for n in self.ep.graph.nodes:
            self.node = n
            if n.op == "placeholder":
                if n.name in constants:
                    self.env[n] = _const(state[constants[n.name]])
                else:
                    val = n.meta["val"]
                    if val.dtype != torch.float32:
                        raise self.fail(f"input {n.name} is {val.dtype}; float32 inputs are supported")
                    vid = self.g.new_value(tuple(val.shape))
                    self.g.inputs.append(vid)
                    self.g.input_names.append(n.name)
                    self.env[n] = vid
            elif n.op == "call_function":
                args = torch.fx.node.map_arg(n.args, lambda a: self.env[a])
                kwargs = torch.fx.node.map_arg(n.kwargs, lambda a: self.env[a])
                if n.target is operator.getitem:
                    self.env[n] = args[0][args[1]]
                    continue
                if str(n.target).startswith("aten._assert") or n.target is torch.ops.aten._assert_tensor_metadata.default:
                    continue
                if self._all_constant(args, kwargs):
                    self.env[n] = self._fold(n, args, kwargs)
                    continue
                rule = rules.get(n.target)
                if rule is None:
                    raise self.fail("unsupported operator: no torchmcu backend lowers it")
                self.env[n] = rule(*args, **kwargs)
            elif n.op == "output":
                outs = n.args[0]
                self.g.outputs = [self.env[o] for o in outs]
        return self.g

    @staticmethod
    def _all_constant(args: Any, kwargs: Any) -> bool:
        flat = list(args) + list(kwargs.values())
        flat = [y for x in flat for y in (x if isinstance(x, (list, tuple)) else [x])]
        return not any(_is_activation(x) for x in flat)

    def _fold(self, n: torch.fx.Node, args: Any, kwargs: Any) -> Any:
        """Evaluate an op whose operands are all constants, at compile time.
        Dequantizing an integer constant (a quantized weight) keeps it integer."""
        if n.target in (QD.dequantize_per_channel.default, QD.dequantize_per_tensor.default):
            data = args[0]
            if isinstance(data, np.ndarray) and data.dtype.kind == "i":
                # An int8 tensor quantized to -8..7 (or narrower) holds int4 weights.
                per_channel = n.target == QD.dequantize_per_channel.default
                qmin, qmax = (args[4], args[5]) if per_channel else (args[3], args[4])
                bits = 4 if data.dtype == np.int8 and -8 <= int(qmin) and int(qmax) <= 7 else 8
                if per_channel:
                    return QConst(data, np.asarray(args[1], np.float64).reshape(-1),
                                  np.asarray(args[2], np.int64).reshape(-1), int(args[3]), bits)
                return QConst(data, np.asarray(float(args[1])), np.asarray(int(args[2])), None, bits)
        def to_torch(x: Any) -> Any:
            if isinstance(x, np.ndarray):
                return torch.from_numpy(x)
            if isinstance(x, (list, tuple)):
                return type(x)(to_torch(y) for y in x)
            return x
        result = n.target(*to_torch(args), **{k: to_torch(v) for k, v in kwargs.items()})
        return _const(result)


def _is_activation(x: Any) -> bool:
    # Scalars in ATen args are ints too: activation ids are wrapped in _Act.
    return isinstance(x, _Act)


class _Act(int):
    """An activation id: an int that the converter can tell from a scalar argument."""


def to_graph(ep: torch.export.ExportedProgram) -> Graph:
    conv = _Converter(ep)
    original_new_value = conv.g.new_value

    def new_value(shape: tuple[int, ...]) -> int:
        return _Act(original_new_value(shape))

    conv.g.new_value = new_value  # type: ignore[method-assign]
    graph = conv.run()
    return graph


# ---------------------------------------------------------------------------------------------
# Passes on the logical graph (order matters: folding batch norm into a conv
# must come before fusing the activation that follows the batch norm).


def fold_batch_norm(g: Graph) -> None:
    """conv -> batch_norm (or linear -> batch_norm over features) becomes one
    op with scaled weights; a batch norm after anything else becomes a
    per-channel multiply-add."""
    new_nodes: list[Node] = []
    producer = {n.out: n for n in g.nodes}
    for n in g.nodes:
        if n.op != "batch_norm":
            new_nodes.append(n)
            continue
        x, weight, bias, mean, var = n.inputs
        scale = (weight / np.sqrt(var + n.attrs["eps"])).astype(np.float32)
        shift = (bias - mean * scale).astype(np.float32)
        p = producer.get(x)  # type: ignore[arg-type]
        # Channels are dim 1 of the batch norm's input: a conv's output channel,
        # or a linear's output feature when its output is [N, C].
        foldable = p is not None and isinstance(p.inputs[1], np.ndarray) and (
            p.op == "conv2d" or (p.op == "linear" and len(g.shapes[p.out]) == 2))
        if foldable and len(g.users(p.out)) == 1 and not g.is_output(p.out):  # type: ignore[union-attr]
            w, b = p.inputs[1], p.inputs[2]  # type: ignore[union-attr]
            p.inputs[1] = (w * scale.reshape((-1,) + (1,) * (w.ndim - 1))).astype(np.float32)  # type: ignore[union-attr]
            p.inputs[2] = ((b if b is not None else 0) * scale + shift).astype(np.float32)  # type: ignore[union-attr]
            _replace_uses(g, n.out, p.out)  # type: ignore[union-attr]
            continue
        rank = len(g.shapes[x])  # type: ignore[index]
        bshape = (1, -1) + (1,) * (rank - 2)
        mid = g.new_value(g.shapes[x])  # type: ignore[index]
        new_nodes.append(Node("mul", [x, scale.reshape(bshape)], dict(act=(-INF, INF)), mid, n.name, n.source))
        new_nodes.append(Node("add", [mid, shift.reshape(bshape)], dict(act=(-INF, INF)), n.out, n.name, n.source))
    g.nodes = new_nodes


def fuse_activations(g: Graph) -> None:
    """A clamp (ReLU, ReLU6, hardtanh) whose input has no other use folds into
    its producer's output range."""
    fusable = {"conv2d", "linear", "add", "mul", "max_pool2d", "avg_pool2d"}
    producer = {n.out: n for n in g.nodes}
    keep: list[Node] = []
    for n in g.nodes:
        p = producer.get(n.inputs[0]) if n.op == "clamp" and isinstance(n.inputs[0], int) else None
        if p is not None and p.op in fusable and len(g.users(p.out)) == 1 and not g.is_output(p.out):
            lo, hi = p.attrs["act"]
            clo, chi = n.attrs["range"]
            p.attrs["act"] = (max(lo, clo), min(hi, chi))
            _replace_uses(g, n.out, p.out)
            g.shapes[p.out] = g.shapes[n.out]
            continue
        keep.append(n)
    g.nodes = keep


def _replace_uses(g: Graph, old: int, new: int) -> None:
    for n in g.nodes:
        n.inputs = [new if isinstance(i, int) and i == old else i for i in n.inputs]
    g.outputs = [new if isinstance(o, int) and o == old else o for o in g.outputs]


# Ops with an int8 kernel when all activation inputs come from dequantize and
# the one user of the output is a quantize. "shared" ops need the same
# quantization in and out (the quantizer arranges it); they move int8 bytes.
QUANTIZED_OPS = {"conv2d", "linear", "add", "mul", "softmax", "sigmoid", "tanh", "hardswish", "bmm"}
SHARED_QUANT_OPS = {"max_pool2d", "avg_pool2d", "mean", "clamp", "reshape", "permute", "cat", "pad",
                    "maximum", "minimum"}


def _int8_supported(g: Graph, n: Node, in_q: list[tuple[float, int]], out_q: tuple[float, int]) -> bool:
    """Whether the int8 kernels implement this instance (else it stays float)."""
    if n.op in ("conv2d", "linear"):
        w = n.inputs[1]
        if not (isinstance(w, QConst) and w.data.dtype == np.int8 and w.axis in (0, None)
                and not np.any(w.zero_point)):
            return False
        if n.op == "conv2d":
            groups, cin = n.attrs["groups"], g.shapes[n.inputs[0]][1]  # type: ignore[index]
            return groups == 1 or (groups == cin and w.shape[1] == 1)
        return True
    if n.op in ("add", "mul", "maximum", "minimum") and not all(isinstance(i, int) for i in n.inputs):
        return False
    if n.op in ("add", "mul"):
        return True
    if n.op == "bmm":  # the int32 accumulator: K products of at most 255 * 255
        return g.shapes[n.inputs[0]][-1] * 255 * 255 <= 2 ** 31 - 1  # type: ignore[index]
    if n.op in SHARED_QUANT_OPS:
        if any(q != out_q for q in in_q):
            return False
        if n.op == "avg_pool2d":
            a = n.attrs
            no_pad = a["padding"] == (0, 0) or not a["count_include_pad"]
            return no_pad and not a["divisor_override"] and _no_partial_windows(g, n)
        if n.op == "mean":
            return len(g.shapes[n.inputs[0]]) == 4 and tuple(n.attrs["dims"]) == (2, 3)  # type: ignore[index]
        if n.op == "max_pool2d":
            return n.attrs["dilation"] == (1, 1) and _no_partial_windows(g, n)
        return True
    if n.op == "softmax":
        return n.attrs["dim"] == len(g.shapes[n.out]) - 1
    return n.op in ("sigmoid", "tanh", "hardswish")


def _no_partial_windows(g: Graph, n: Node) -> bool:
    """ceil_mode windows that start in the padding divide differently in PyTorch."""
    _, _, h, w = g.shapes[n.inputs[0]]  # type: ignore[index]
    _, _, oh, ow = g.shapes[n.out]
    (kh, kw), (sh, sw), (ph, pw) = n.attrs["kernel"], n.attrs["stride"], n.attrs["padding"]
    return oh == (h + 2 * ph - kh) // sh + 1 and ow == (w + 2 * pw - kw) // sw + 1


def fold_qdq(g: Graph) -> None:
    """dequantize -> op -> quantize becomes one int8 op ("q" + op) reading and
    writing int8 values; quantize(dequantize(x)) with equal parameters
    cancels; what remains of quantize/dequantize converts at the int8 edges."""
    producer = {n.out: n for n in g.nodes}
    dead: set[int] = set()
    for n in g.nodes:
        if n.op not in QUANTIZED_OPS | SHARED_QUANT_OPS:
            continue
        acts = [i for i in n.inputs if isinstance(i, int)]
        dqs = [producer.get(i) for i in acts]
        users = g.users(n.out)
        if not acts or any(d is None or d.op != "dequantize" for d in dqs):
            continue
        if len(users) != 1 or users[0].op != "quantize" or g.is_output(n.out):
            continue
        q = users[0]
        in_q = [(d.attrs["scale"], d.attrs["zero_point"]) for d in dqs]  # type: ignore[union-attr]
        out_q = (q.attrs["scale"], q.attrs["zero_point"])
        bits = {d.attrs.get("bits", 8) for d in dqs} | {q.attrs.get("bits", 8)}  # type: ignore[union-attr]
        if bits == {16}:  # a16w8: the ops with an int16 kernel (lower_s16.py)
            from .lower_s16 import int16_supported

            if not int16_supported(g, n, in_q, out_q):
                continue
            g.int16.add(n.out)
            n.attrs = dict(n.attrs, bits=16)
        elif bits != {8} or not _int8_supported(g, n, in_q, out_q):
            continue
        mapping = {d.out: d.inputs[0] for d in dqs}  # type: ignore[union-attr]
        n.inputs = [mapping.get(i, i) if isinstance(i, int) else i for i in n.inputs]
        n.attrs = dict(n.attrs, in_q=in_q, out_q=out_q)
        n.op = "q" + n.op
        _replace_uses(g, q.out, n.out)
        g.shapes[n.out] = g.shapes[q.out]
        g.qparams[n.out] = out_q
        dead.add(q.out)
    g.nodes = [n for n in g.nodes if n.out not in dead]
    # quantize(dequantize(x)) at the same parameters is x.
    producer = {n.out: n for n in g.nodes}
    for n in list(g.nodes):
        if n.op == "quantize":
            p = producer.get(n.inputs[0])  # type: ignore[arg-type]
            if p is not None and p.op == "dequantize" and (p.attrs["scale"], p.attrs["zero_point"]) == (
                    n.attrs["scale"], n.attrs["zero_point"]) and p.attrs.get("bits", 8) == n.attrs.get("bits", 8):
                _replace_uses(g, n.out, p.inputs[0])  # type: ignore[arg-type]
                g.nodes.remove(n)
    if g.int16:  # where int8 and int16 layers meet: one integer requantize (lower_s16.py)
        from .lower_s16 import fold_requantize

        fold_requantize(g)
    _drop_dead(g)


def _drop_dead(g: Graph) -> None:
    while True:
        used = {i for n in g.nodes for i in n.inputs if isinstance(i, int)}
        used |= {o for o in g.outputs if isinstance(o, int)}
        keep = [n for n in g.nodes if n.out in used]
        if len(keep) == len(g.nodes):
            return
        g.nodes = keep


PASSES: list[Callable[[Graph], None]] = [
    fold_batch_norm,   # first: exposes conv -> relu pairs to fusion
    fuse_activations,  # before fold_qdq: a fused clamp becomes the int8 kernel's range
    fold_qdq,
]


def int8_io(g: Graph) -> None:
    """Model inputs and outputs in int8 instead of float: an input whose every
    use is a quantize at one scale becomes that int8 value, and an output that
    is a dequantize becomes its int8 input. What cannot be (a float input used
    in float, say) stays float."""
    for vid in g.inputs:
        users = g.users(vid)
        params = {(n.attrs["scale"], n.attrs["zero_point"]) for n in users if n.op == "quantize"}
        if not users or len(params) != 1 or any(n.op != "quantize" or n.attrs.get("bits", 8) != 8 for n in users):
            continue  # (an int16 first layer of a mixed-precision model keeps a float input)
        g.qparams[vid] = params.pop()
        for n in users:
            _replace_uses(g, n.out, vid)
            g.nodes.remove(n)
    producer = {n.out: n for n in g.nodes}
    for k, o in enumerate(g.outputs):
        p = producer.get(o) if isinstance(o, int) else None
        if p is not None and p.op == "dequantize" and p.attrs.get("bits", 8) == 8:
            g.outputs[k] = p.inputs[0]
    _drop_dead(g)


def lower(ep: torch.export.ExportedProgram, io: str = "float") -> Graph:
    """io: "float" (quantize/dequantize inside the program) or "int8"."""
    g = to_graph(ep)
    for p in PASSES:
        p(g)
    if io == "int8":
        int8_io(g)
    return g
