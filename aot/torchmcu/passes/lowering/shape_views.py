"""Shape and views: ops that move bytes, or only relabel them.

ATen: view / reshape / flatten / unflatten / squeeze / unsqueeze (aliases
of their input's bytes), permute / transpose / t (a new order of the same
bytes: layout moves data only where an op needs another order), the view
ops select / slice / narrow / expand (and split / chunk / unbind, which
capture decomposes into slices), cat, pad / constant_pad_nd, and the ops
that are the identity on an exported graph (dropout in eval, contiguous,
clone, detach, alias). Program ops: PERMUTE, CONCAT, PAD, COPY and SLICE,
for any dtype; integer ones share their input's quantization. Reference
twin: reference/shape_views.py.

Zero copy: a reshape keeps its input's physical order when the dims it
merges or splits are adjacent and in order there (a channel split of an
NHWC tensor is free; see reshape_order), and a slice that is one contiguous
block of its input's bytes is that input at an offset (the planner keeps
the whole buffer alive while the slice is). The rest is one PERMUTE (a
reshape whose dims are out of order) or one SLICE (a strided copy; also
expand, as a step of 0).
"""

from __future__ import annotations

import numpy as np
import torch

from ... import reference
from ...ir import PTensor
from ..graph import Node, QConst, const, dim, is_activation
from .family import Family, always

F = Family("shape_views")
aten = torch.ops.aten


# -- ATen -> logical ---------------------------------------------------------------------------

@F.rule(aten.flatten.using_ints, aten.view.default, aten.reshape.default, aten._unsafe_view.default,
        aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, aten.unsqueeze.default, aten.unflatten.int)
def reshape(cv, x, *rest):
    return cv.emit("reshape", [cv.act(x)])


def _slice(cv, x, begin: list[int], step: list[int], shape: list[int]):
    """A strided view of x (logical dims); the whole of x is x itself."""
    if list(shape) == list(cv.shape(x)) and not any(begin) and all(s == 1 for s in step):
        return x
    return cv.emit("slice", [x], dict(begin=tuple(begin), step=tuple(step)), shape=tuple(shape))


def _range(cv, n: int, start, end, step: int = 1) -> tuple[int, int]:
    """Python's slice bounds on a dim of n: (start, number of indices)."""
    start = 0 if start is None else int(start)
    end = n if end is None else int(end)
    start, end = (start + n if start < 0 else start), (end + n if end < 0 else end)
    start, end = min(max(start, 0), n), min(max(end, 0), n)
    if step < 1:
        raise cv.fail(f"slice step {step}; steps are positive")
    count = max(0, (end - start + step - 1) // step)
    if count == 0:
        raise cv.fail("an empty slice (no element selected)")
    return start, count


@F.rule(aten.slice.Tensor)
def slice_(cv, x, d=0, start=None, end=None, step=1):
    x = cv.act(x)
    shape = list(cv.shape(x))
    d = dim(int(d), len(shape))
    first, count = _range(cv, shape[d], start, end, int(step))
    begin, steps, out = [0] * len(shape), [1] * len(shape), list(shape)
    begin[d], steps[d], out[d] = first, int(step), count
    return _slice(cv, x, begin, steps, out)


@F.rule(aten.narrow.default)
def narrow(cv, x, d, start, length):
    n = cv.shape(cv.act(x))[dim(int(d), len(cv.shape(x)))]
    start = int(start) + n if int(start) < 0 else int(start)
    return slice_(cv, x, d, start, start + int(length))


@F.rule(aten.select.int)
def select(cv, x, d, index):
    x = cv.act(x)
    shape = list(cv.shape(x))
    d = dim(int(d), len(shape))
    i = int(index) + shape[d] if int(index) < 0 else int(index)
    if not 0 <= i < shape[d]:
        raise cv.fail(f"index {index} out of range for dim {d} of size {shape[d]}")
    begin = [0] * len(shape)
    begin[d] = i
    # One node (the slice without dim d), so that an int8 select is one shared op.
    return cv.emit("slice", [x], dict(begin=tuple(begin), step=(1,) * len(shape), drop=d),
                   shape=tuple(shape[:d] + shape[d + 1:]))


@F.rule(aten.split.Tensor, aten.split_with_sizes.default)
def split(cv, x, sizes, d=0):
    """(capture decomposes these into slices; kept for graphs captured elsewhere)"""
    x = cv.act(x)
    shape = list(cv.shape(x))
    d = dim(int(d), len(shape))
    if isinstance(sizes, int):
        sizes = [min(sizes, shape[d] - i) for i in range(0, shape[d], sizes)]
    out, start = [], 0
    for s in sizes:
        out.append(slice_(cv, x, d, start, start + int(s)))
        start += int(s)
    return out


@F.rule(aten.unbind.int)
def unbind(cv, x, d=0):
    d = dim(int(d), len(cv.shape(x)))
    return [select(cv, x, d, i) for i in range(cv.shape(x)[d])]


@F.rule(aten.expand.default)
def expand(cv, x, size, implicit=False):
    """A broadcast copy (SLICE with step 0 on the broadcast dims); the
    identity where no dim grows."""
    x = cv.act(x)
    shape = list(cv.shape(x))
    lead = len(size) - len(shape)
    if lead < 0:
        raise cv.fail(f"expand to {list(size)}: fewer dims than the input's {shape}")
    padded = [1] * lead + shape
    target = [padded[k] if int(s) == -1 else int(s) for k, s in enumerate(size)]
    if any(p != t and p != 1 for p, t in zip(padded, target)):
        raise cv.fail(f"expand of {shape} to {target}: only dims of size 1 can grow")
    steps = [0 if p != t else 1 for p, t in zip(padded, target)]
    if lead:  # one node (new leading dims of size 1, then the broadcast): one shared op at int8
        return cv.emit("slice", [x], dict(begin=(0,) * len(target), step=tuple(steps), lead=lead),
                       shape=tuple(target))
    return _slice(cv, x, [0] * len(target), steps, target)


@F.rule(aten.permute.default)
def permute(cv, x, dims):
    rank = len(cv.shape(x))
    return cv.emit("permute", [cv.act(x)], dict(perm=tuple(dim(int(d), rank) for d in dims)))


@F.rule(aten.transpose.int)
def transpose(cv, x, d0, d1):
    rank = len(cv.shape(x))
    perm = list(range(rank))
    a, b = dim(int(d0), rank), dim(int(d1), rank)
    perm[a], perm[b] = perm[b], perm[a]
    return permute(cv, x, perm)


@F.rule(aten.t.default)
def t(cv, x):
    return transpose(cv, x, 0, 1) if len(cv.shape(x)) == 2 else x


@F.rule(aten.cat.default)
def cat(cv, tensors, d=0):
    # Inputs without elements add nothing (torch also skips a 1-D empty tensor of any other rank:
    # torchaudio's Emformer concatenates torch.empty(0) to its memory).
    ins = [x for x in tensors if int(np.prod(cv.shape(x))) > 0]
    if len(ins) == 1 and is_activation(ins[0]):
        return ins[0]
    if not ins:
        raise cv.fail("cat of tensors that are all empty")
    if len(ins) > 8:
        raise cv.fail(f"cat of {len(ins)} tensors; at most 8 are supported")
    rank = len(cv.shape(ins[0]))
    # A quantized constant (a parameter expanded and quantized, e.g. a class token) stays one: qcat
    # lays it out at the output's quantization.
    ins = [x if is_activation(x) or isinstance(x, QConst) else const(x) for x in ins]
    return cv.emit("cat", ins, dict(dim=dim(int(d), rank)))


@F.rule(aten.constant_pad_nd.default)
def constant_pad(cv, x, pad, value=0.0):
    """F.pad's list: (before, after) pairs from the last dim backwards."""
    x = cv.act(x)
    rank = len(cv.shape(x))
    pad = [int(p) for p in pad]
    if len(pad) % 2 or len(pad) // 2 > rank:
        raise cv.fail(f"padding {pad} for a tensor of rank {rank}")
    if any(p < 0 for p in pad):
        raise cv.fail(f"negative padding {pad} (cropping) is not supported")
    before, after = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        before[rank - 1 - i], after[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    return cv.emit("pad", [x], dict(before=tuple(before), after=tuple(after), value=float(value)))


# Reflect padding is built of one-element slices, concatenated in a tree of cats (cat takes 8 inputs):
# at most this many per side and dim (a program op per element mirrored).
REFLECT_MAX = 256
CAT_MAX = 8


@F.rule(aten.pad.default)
def pad(cv, x, pad, mode="constant", value=None):
    """Constant padding (PAD); replicate and reflect padding as slices of x's
    edges and a cat along each padded dim (bytes moved at x's quantization):
    replicate repeats the edge (a slice with step 0), reflect mirrors the
    values next to it, one slice each (at most REFLECT_MAX per side; more
    than 7 are concatenated in a tree of cats first)."""
    if mode == "constant":
        return constant_pad(cv, x, pad, 0.0 if value is None else value)
    if mode not in ("replicate", "reflect"):
        raise cv.fail(f"padding mode {mode!r} is not supported (constant, replicate and reflect are)")
    x = cv.act(x)
    rank = len(cv.shape(x))
    pad = [int(p) for p in pad]
    if len(pad) % 2 or len(pad) // 2 > rank or any(p < 0 for p in pad):
        raise cv.fail(f"{mode} padding {pad} for a tensor of rank {rank}")
    for i in range(len(pad) // 2):
        d, before, after = rank - 1 - i, pad[2 * i], pad[2 * i + 1]
        if before == after == 0:
            continue
        n = cv.shape(x)[d]
        if mode == "reflect" and (max(before, after) >= n or max(before, after) > REFLECT_MAX):
            raise cv.fail(f"reflect padding of {max(before, after)} along a dim of {n}: at most "
                          f"{min(n - 1, REFLECT_MAX)} (replicate or constant padding take any)")
        if mode == "reflect":
            left = [_edge(cv, x, d, k, 1) for k in range(before, 0, -1)]
            right = [_edge(cv, x, d, n - 1 - k, 1) for k in range(1, after + 1)]
            if len(left) + 1 + len(right) > CAT_MAX:  # wide: each side one tensor first
                left = [_cat_tree(cv, left, d)] if left else []
                right = [_cat_tree(cv, right, d)] if right else []
            parts = [*left, x, *right]
        else:
            parts = ([_edge(cv, x, d, 0, before)] if before else []) + [x] + \
                ([_edge(cv, x, d, n - 1, after)] if after else [])
        x = _concat(cv, parts, d)
    return x


def _concat(cv, parts: list, d: int):
    shape = list(cv.shape(parts[0]))
    shape[d] = sum(cv.shape(p)[d] for p in parts)
    return cv.emit("cat", parts, dict(dim=d), shape=tuple(shape))


def _cat_tree(cv, parts: list, d: int):
    """The parts concatenated along d, at most CAT_MAX inputs per cat (a tree of cats)."""
    while len(parts) > 1:
        parts = [_concat(cv, parts[k:k + CAT_MAX], d) if len(parts[k:k + CAT_MAX]) > 1 else parts[k]
                 for k in range(0, len(parts), CAT_MAX)]
    return parts[0]


def _edge(cv, x, d: int, index: int, count: int):
    """Element `index` of x along dim d, `count` times (a slice with step 0 repeats it)."""
    shape = list(cv.shape(x))
    begin, step = [0] * len(shape), [1] * len(shape)
    begin[d], step[d], shape[d] = index, 0 if count > 1 else 1, count
    return _slice(cv, x, begin, step, shape)


@F.rule(aten.slice_scatter.default)
def slice_scatter(cv, base, src, d=0, start=None, end=None, step=1):
    """base with base[start:end] along d replaced by src (what an in-place op
    on a slice, y[:, :4].tanh_(), leaves): a cat of base's two ends and src."""
    base = cv.act(base)
    shape = list(cv.shape(base))
    d = dim(int(d), len(shape))
    first, count = _range(cv, shape[d], start, end, int(step))
    if int(step) != 1 and count > 1:
        raise cv.fail(f"an in-place op on a slice with step {step} (slice_scatter): only step 1 is supported")
    return _scatter(cv, base, src, d, first, count)


@F.rule(aten.select_scatter.default)
def select_scatter(cv, base, src, d, index):
    """base with base.select(d, index) replaced by src (an in-place op on x[:, 0])."""
    base = cv.act(base)
    shape = list(cv.shape(base))
    d = dim(int(d), len(shape))
    i = int(index) + shape[d] if int(index) < 0 else int(index)
    if not 0 <= i < shape[d]:
        raise cv.fail(f"index {index} out of range for dim {d} of size {shape[d]}")
    one = list(shape)
    one[d] = 1
    if is_activation(src):
        src = cv.emit("reshape", [src], shape=tuple(one))
    else:
        src = np.asarray(const(src)).reshape(one)
    return _scatter(cv, base, src, d, i, 1)


def _scatter(cv, base, src, d: int, first: int, count: int):
    shape = list(cv.shape(base))
    if count == shape[d]:
        return src if is_activation(src) else np.broadcast_to(const(src), shape).copy()
    parts = []
    if first:
        parts.append(_slice(cv, base, [0] * len(shape), [1] * len(shape),
                            [first if k == d else s for k, s in enumerate(shape)]))
    parts.append(src if is_activation(src) else const(src))
    rest = shape[d] - first - count
    if rest:
        parts.append(_slice(cv, base, [first + count if k == d else 0 for k in range(len(shape))], [1] * len(shape),
                            [rest if k == d else s for k, s in enumerate(shape)]))
    return cv.emit("cat", parts, dict(dim=d), shape=tuple(shape))


@F.rule(aten.embedding.default)
def embedding(cv, weight, ids, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """nn.Embedding: rows of a constant table by integer ids (an int32 input, or
    computed from one); the table stays float (a quantized model quantizes the
    rows after the lookup)."""
    if is_activation(weight) or not is_activation(ids):
        raise cv.fail("an embedding of a constant table by ids computed from the inputs is supported")
    if cv.g.dtypes.get(ids) != "I32":
        raise cv.fail("embedding ids must be an integer tensor")
    table = weight.dequantized() if isinstance(weight, QConst) else const(weight)
    table = np.ascontiguousarray(table, np.float32)
    if table.ndim != 2:
        raise cv.fail(f"an embedding table of shape {tuple(table.shape)}: [rows, cols] is supported")
    return cv.emit("gather", [table, ids])


@F.rule(aten.copy.default)
def copy(cv, dst, src, non_blocking=False):
    """copy(dst, src): src as dst's shape (what an in-place op on a model
    input, x.tanh_(), leaves behind when the quantized model is captured)."""
    if not is_activation(src):
        raise cv.fail("copy of a constant into an activation is not supported")
    if tuple(cv.shape(src)) != tuple(cv.shape(dst)):
        raise cv.fail(f"copy of a {tuple(cv.shape(src))} tensor into a {tuple(cv.shape(dst))} one (broadcasting) "
                      "is not supported")
    return src


@F.rule(aten.dropout.default, aten.contiguous.default, aten.clone.default, aten.detach.default,
        aten.alias.default, aten.lift_fresh_copy.default)
def identity_op(cv, x, *rest, **kw):
    return x


# -- integer kernels: bytes move at their input's quantization ---------------------------------

F.int8("reshape", "permute", "cat", "pad", "slice", shared=True)(always)
F.int16("reshape", "permute", "slice", shared=True)(always)


# -- logical -> program ops --------------------------------------------------------------------

@F.lower("gather")
def _gather(lay, n: Node) -> None:
    table, ids = n.inputs
    shape = lay.g.shapes[n.out]
    count = int(np.prod(shape[:-1], dtype=np.int64))
    idt = lay.alias(lay.get(ids, tuple(range(len(lay.g.shapes[ids]))), n), (count,))
    out = lay.activation(n.name, (count, shape[-1]))
    lay.emit("GATHER", [lay.constant(f"{n.name}_table", table), idt], [out], None, n, "gather")
    lay.val[n.out] = (lay.alias(out, tuple(shape), n.name), tuple(range(len(shape))))

@F.lower("reshape", "qreshape")
@F.lower16("qreshape")
def _reshape(lay, n: Node) -> None:
    x = n.inputs[0]
    shape = lay.g.shapes[n.out]
    want, order = reshape_order(lay.g.shapes[x], lay.val[x][1], shape)
    tid = lay.get(x, want, n)
    lay.val[n.out] = (lay.alias(tid, tuple(shape[d] for d in order) or (1,), n.name), order)


def _groups(a: tuple[int, ...], b: tuple[int, ...]) -> list[tuple[list[int], list[int]]] | None:
    """The dims of shape a that a row-major reshape to b merges or splits
    together, with the dims of b they become: size-1 dims left out."""
    ia = [d for d in range(len(a)) if a[d] != 1]
    ib = [d for d in range(len(b)) if b[d] != 1]
    groups, i, j = [], 0, 0
    while i < len(ia) and j < len(ib):
        ga, gb = [ia[i]], [ib[j]]
        pa, pb = a[ia[i]], b[ib[j]]
        i, j = i + 1, j + 1
        while pa != pb:
            if pa < pb:
                if i == len(ia):
                    return None
                ga.append(ia[i])
                pa *= a[ia[i]]
                i += 1
            else:
                if j == len(ib):
                    return None
                gb.append(ib[j])
                pb *= b[ib[j]]
                j += 1
        groups.append((ga, gb))
    return groups if i == len(ia) and j == len(ib) else None


def reshape_order(shape: tuple[int, ...], perm: tuple[int, ...],
                  out: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(the physical order the input needs, the output's physical order)
    for a reshape of `shape` laid out in `perm` to `out`. The bytes stay
    where they are when each group of merged or split dims is adjacent and
    in order in `perm`: then the output's order is the input's with each
    group replaced by its output dims ([N, C, H, W] in NHWC to
    [N, g, C/g, H, W] is [N, H, W, g, C/g], free). Otherwise the input is
    first put in the nearest order where they are (one PERMUTE)."""
    groups = _groups(tuple(shape), tuple(out))
    if groups is None:  # not a reshape of the same elements: cannot happen for a valid graph
        return tuple(range(len(shape))), tuple(range(len(out)))
    of = {d: k for k, (ga, _) in enumerate(groups) for d in ga}
    seen: list[int] = []
    want: list[int] = []
    for d in perm:  # the groups in the order their first dim appears; size-1 dims stay where they are
        if shape[d] == 1:
            want.append(d)
        elif of[d] not in seen:
            seen.append(of[d])
            want += groups[of[d]][0]
    order = [d for k in seen for d in groups[k][1]]
    for d in range(len(out)):  # each size-1 output dim after its logical predecessor
        if out[d] == 1:
            order.insert(order.index(d - 1) + 1 if d > 0 and d - 1 in order else 0, d)
    return tuple(want), tuple(order)


@F.lower("permute", "qpermute")
@F.lower16("qpermute")
def _permute(lay, n: Node) -> None:
    tid, perm = lay.val[n.inputs[0]]
    q = n.attrs["perm"]
    lay.val[n.out] = (tid, tuple(q.index(d) for d in perm))


@F.lower("cat", "qcat")
def _cat(lay, n: Node) -> None:
    shape = lay.g.shapes[n.out]
    first = next(i for i in n.inputs if isinstance(i, int))
    perm = lay.val[first][1]
    ins = [lay.get(i, perm, n) if isinstance(i, int) else _cat_const(lay, n, i, perm) for i in n.inputs]
    out = lay.activation(n.name, tuple(shape[d] for d in perm), like=n.out)
    lay.emit("CONCAT", ins, [out], ("ConcatParams", {"axis": perm.index(n.attrs["dim"])}), n, "cat")
    lay.val[n.out] = (out, perm)


def _cat_const(lay, n: Node, c, perm: tuple[int, ...]) -> int:
    """A constant input of cat in the output's dtype: an int8 cat's at the
    output's quantization (a quantized constant's own values when it shares it)."""
    data = c.dequantized() if isinstance(c, QConst) else np.asarray(c, np.float32)
    rank = len(lay.g.shapes[n.out])
    data = np.transpose(data.reshape((1,) * (rank - data.ndim) + data.shape), perm)
    if n.out not in lay.g.qparams:
        return lay.constant(f"{n.name}_c", data)
    s_out, zp_out = lay.g.qparams[n.out]
    if isinstance(c, QConst) and c.axis is None and (float(c.scale), int(c.zero_point)) == (s_out, zp_out):
        q = np.transpose(c.data.reshape((1,) * (rank - c.data.ndim) + c.data.shape), perm)
    else:
        q = reference.quantize(data.astype(np.float32), s_out, zp_out)
    dtype = "I16" if n.out in lay.g.int16 else "I8"
    tid = lay.constant(f"{n.name}_c", q.astype(np.int16 if dtype == "I16" else np.int8), dtype)
    lay.p.tensors[tid].scale, lay.p.tensors[tid].zero_point = s_out, zp_out
    return tid


@F.lower("slice", "qslice")
@F.lower16("qslice")
def _slice_op(lay, n: Node) -> None:
    """A contiguous block of the input is the input at an offset; anything
    else one SLICE in the input's physical order."""
    x = n.inputs[0]
    tid, perm = lay.val[x]
    ins, outs = lay.g.shapes[x], list(lay.g.shapes[n.out])
    lead = n.attrs.get("lead", 0)  # expand to more dims: the input with `lead` leading dims of size 1
    if lead:
        ins, perm = (1,) * lead + tuple(ins), tuple(range(lead)) + tuple(d + lead for d in perm)
        tid = lay.alias(tid, (1,) * lead + lay.p.tensors[tid].dims)
    drop = n.attrs.get("drop")  # select: the slice's dim `drop` (of size 1) is then dropped
    if drop is not None:
        outs.insert(drop, 1)
    pin, pout = [ins[d] for d in perm], [outs[d] for d in perm]
    begin, step = [n.attrs["begin"][d] for d in perm], [n.attrs["step"][d] for d in perm]
    src = lay.p.tensors[tid]
    offset = _block_offset(pin, pout, begin, step)
    if offset is not None:
        lay.p.tensors.append(PTensor(n.name, tuple(pout) or (1,), src.dtype, src.buffer, None, src.scale,
                                     src.zero_point, offset=src.offset + offset * _ITEM[src.dtype]))
        lay.val[n.out] = _dropped(lay, len(lay.p.tensors) - 1, perm, drop)
        return
    cin, cout, cbegin, cstep = _compress(pin, pout, begin, step)
    if len(cin) > 6:
        raise lay.fail(n, f"a strided slice over {len(cin)} dims that cannot merge; at most 6 are supported")
    out = lay.activation(n.name, tuple(pout) or (1,), like=n.out)
    lay.emit("SLICE", [lay.alias(tid, tuple(cin))], [lay.alias(out, tuple(cout))],
             ("SliceParams", {"begin": cbegin, "step": cstep}), n, "slice")
    lay.val[n.out] = _dropped(lay, out, perm, drop)


def _dropped(lay, tid: int, perm: tuple[int, ...], drop: int | None) -> tuple[int, tuple[int, ...]]:
    """The tensor without logical dim `drop` (of size 1: the same bytes)."""
    if drop is None:
        return tid, perm
    order = tuple(d - (d > drop) for d in perm if d != drop)
    dims = tuple(lay.p.tensors[tid].dims[j] for j, d in enumerate(perm) if d != drop)
    return lay.alias(tid, dims or (1,)), order


_ITEM = {"F32": 4, "I32": 4, "I16": 2, "I8": 1}


def _block_offset(pin: list[int], pout: list[int], begin: list[int], step: list[int]) -> int | None:
    """The element offset of the slice in its input when it is one
    contiguous block of it (then no copy is needed), else None: outer dims
    of one index, then one dim read in steps of 1, then whole dims."""
    offset, stride = 0, 1
    strides = []
    for d in reversed(range(len(pin))):
        strides.insert(0, stride)
        stride *= pin[d]
    varying = [d for d in range(len(pin)) if pout[d] != 1]
    if varying:
        k = varying[0]
        if step[k] != 1 or any(pout[d] != pin[d] or (pin[d] != 1 and (begin[d] != 0 or step[d] != 1))
                               for d in range(k + 1, len(pin))):
            return None
    for d in range(len(pin)):
        offset += begin[d] * strides[d]
    return offset


def _compress(pin, pout, begin, step):
    """The same strided copy over fewer dims: dims of size 1 on both sides
    dropped, a whole dim merged into the dim outside it."""
    dims = [(i, o, b, s) for i, o, b, s in zip(pin, pout, begin, step) if not (i == 1 and o == 1)]
    dims = dims or [(1, 1, 0, 1)]
    merged = [dims[0]]
    for i, o, b, s in dims[1:]:
        pi, po, pb, ps = merged[-1]
        if i == o and b == 0 and s == 1 and ps == 1:  # whole and dense: one longer run of the outer dim
            merged[-1] = (pi * i, po * o, pb * i, 1)
        else:
            merged.append((i, o, b, s))
    return tuple(zip(*merged)) if merged else ((), (), (), ())


@F.lower("pad", "qpad")
def _pad(lay, n: Node) -> None:
    """Constant padding in the input's physical order (float or int8:
    an int8 value pads with the value quantized at its quantization)."""
    x = n.inputs[0]
    tid, perm = lay.val[x]
    shape = lay.g.shapes[n.out]
    out = lay.activation(n.name, tuple(shape[d] for d in perm), like=n.out)
    value = float(n.attrs["value"])
    qvalue = 0
    if n.out in lay.g.qparams:
        s_out, zp_out = lay.g.qparams[n.out]
        qvalue = int(reference.quantize(np.float32(value), s_out, zp_out))
    params = {"before": [int(n.attrs["before"][d]) for d in perm],
              "after": [int(n.attrs["after"][d]) for d in perm], "value": value, "qvalue": qvalue}
    lay.emit("PAD", [tid], [out], ("PadParams", params), n, "pad")
    lay.val[n.out] = (out, perm)
