"""An ONNX file to (module, example_inputs): the inputs fixed with --fix folded
into the graph as constants, and with them everything computable from
constants and static shapes; each `If` whose condition is then constant
replaced by the branch it takes; then onnx2torch, and torch.export takes its
GraphModule like any module.

silero-vad's ONNX picks its 8 kHz or 16 kHz network with an If on its `sr`
input; inside, Ifs on Shape/Gather/Equal of static shapes choose the
LSTM's batched or unbatched path. `--fix sr=16000` and the input shapes
leave one straight graph.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import TorchMCUError
from .user_code import one_line

_NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                     "Bernoulli"}


def _import_onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise TorchMCUError("compiling an ONNX file needs the onnx package, which is not installed: "
                            "pip install onnx onnx2torch (or `make setup`)") from None
    return onnx


def _import_onnx2torch() -> Any:
    from .compat import import_torchvision

    try:
        import_torchvision()  # onnx2torch imports torchvision (its nms); the CPU torch needs compat's help
    except ImportError:
        pass
    try:
        import onnx2torch
    except ImportError:
        raise TorchMCUError("compiling an ONNX file needs onnx2torch, which is not installed: "
                            "pip install --no-deps onnx2torch (or `make setup`)") from None
    return onnx2torch


def load_onnx(path: Path, shapes: dict[str, tuple[int, ...]], fixed: dict[str, str]
              ) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    onnx = _import_onnx()
    try:
        model = onnx.load(str(path))
    except Exception as e:
        raise TorchMCUError(f"{path} is not an ONNX model: {type(e).__name__}: {one_line(str(e))}") from None
    if not model.graph.node:
        raise TorchMCUError(f"{path} is not an ONNX model (no graph nodes)")
    model, example = fold(model, shapes, fixed, path.name)
    return convert(model, path.name, example), example


def _elem_dtype(onnx: Any, elem_type: int) -> np.dtype:
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))


def _static_dims(type_proto: Any) -> tuple[int, ...] | None:
    t = type_proto.tensor_type
    if not t.HasField("shape"):
        return None
    dims = []
    for d in t.shape.dim:
        if not d.HasField("dim_value") or d.dim_value <= 0:
            return None
        dims.append(int(d.dim_value))
    return tuple(dims)


def _parse_fixed(name: str, text: str, dtype: np.dtype) -> np.ndarray:
    try:
        values = [float(v) for v in text.replace(";", ",").split(",") if v.strip()]
    except ValueError:
        values = []
    if not values:
        raise TorchMCUError(f"--fix {name}={text}: give a number, or numbers separated by commas")
    a = np.array(values if len(values) > 1 else values[0]).astype(dtype)
    return a


def fold(model: Any, shapes: dict[str, tuple[int, ...]], fixed: dict[str, str], where: str
         ) -> tuple[Any, tuple[torch.Tensor, ...]]:
    """The model with the fixed inputs folded and constant Ifs resolved, and
    example inputs for the inputs left."""
    onnx = _import_onnx()
    graph = model.graph
    inits = {i.name for i in graph.initializer}
    inputs = [i for i in graph.input if i.name not in inits]
    names = [i.name for i in inputs]
    for flag, given in (("--input", shapes), ("--fix", fixed)):
        for n in given:
            if n not in names:
                raise TorchMCUError(f"{where}: {flag} {n}: the model has no input {n!r} (its inputs: {', '.join(names)})")
    both = set(shapes) & set(fixed)
    if both:
        raise TorchMCUError(f"{where}: input {sorted(both)[0]!r} is given both --input and --fix: one or the other")
    known: dict[str, np.ndarray] = {i.name: onnx.numpy_helper.to_array(i) for i in graph.initializer}
    example: list[torch.Tensor] = []
    kept = []
    for inp in inputs:
        dtype = _elem_dtype(onnx, inp.type.tensor_type.elem_type)
        if inp.name in fixed:
            known[inp.name] = _parse_fixed(inp.name, fixed[inp.name], dtype)
            continue
        dims = shapes.get(inp.name) or _static_dims(inp.type)
        if dims is None:
            shown = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                     for d in inp.type.tensor_type.shape.dim]
            raise TorchMCUError(f"{where}: input {inp.name!r} has no static shape ({shown}): give --input "
                                f"{inp.name}=SHAPE (e.g. {'x'.join(str(d) if isinstance(d, int) and d > 0 else '1' for d in shown) or '1'})"
                                + (", or --fix it to a constant" if dtype.kind in "iub" else ""))
        if dtype.kind != "f":
            raise TorchMCUError(f"{where}: input {inp.name!r} is {dtype}; torchmcu compiles float inputs: fix it "
                                f"with --fix {inp.name}=VALUE")
        new = onnx.helper.make_tensor_value_info(inp.name, inp.type.tensor_type.elem_type, list(dims))
        kept.append(new)
        g = torch.Generator().manual_seed(len(example))
        example.append(torch.randn(dims, generator=g).to(torch.from_numpy(np.zeros(0, dtype)).dtype))
    opset = {o.domain: o.version for o in model.opset_import}
    folder = _Folder(onnx, model, known, where)
    for _ in range(32):  # one round per level of Ifs that shape inference has to see through
        shaped = folder.model(kept)
        try:
            shaped = onnx.shape_inference.infer_shapes(shaped, strict_mode=False, data_prop=True)
        except Exception:  # shapes it cannot infer stay unknown; what they decide stays in the graph
            pass
        static = {vi.name: _static_dims(vi.type) for vi in [*shaped.graph.value_info, *shaped.graph.input,
                                                            *shaped.graph.output]}
        if not folder.round(static, opset):
            break
    out = folder.model(kept)
    ifs = [n for n in out.graph.node if n.op_type == "If"]
    if ifs:
        cond = ifs[0].input[0]
        deps = sorted(set(folder.inputs_of(cond)) & set(names))
        raise TorchMCUError(f"{where}: If node {ifs[0].name or ifs[0].output[0]!r} has a condition ({cond!r}) that "
                            f"is not constant" + (f": it depends on the input(s) {', '.join(deps)}; fix them with --fix "
                                                  f"{deps[0]}=VALUE" if deps else "; torchmcu compiles one straight "
                                                  "graph (no data-dependent control flow)"))
    loops = [n.op_type for n in out.graph.node if n.op_type in ("Loop", "Scan")]
    if loops:
        raise TorchMCUError(f"{where}: an ONNX {loops[0]} node remains: torchmcu compiles one straight graph "
                            "(no loops over data)")
    return out, tuple(example)


class _Folder:
    """The graph's nodes in order with the values known so far."""

    def __init__(self, onnx: Any, model: Any, known: dict[str, np.ndarray], where: str) -> None:
        self.onnx, self.base, self.known, self.where = onnx, model, known, where
        self.nodes = list(model.graph.node)
        self.serial = 0
        self.used = {o for n in self.nodes for o in n.output} | set(known) | {i.name for i in model.graph.input}

    def model(self, inputs: list[Any]) -> Any:
        onnx = self.onnx
        needed = {i for n in self.nodes for i in _all_inputs(onnx, n)} | {o.name for o in self.base.graph.output}
        inits = [onnx.numpy_helper.from_array(np.asarray(v), name) for name, v in self.known.items()
                 if name in needed]
        nodes = list(self.nodes)
        for o in self.base.graph.output:  # an output that became a constant: a node that makes it
            if o.name in self.known and not any(o.name in n.output for n in nodes):
                inits = [i for i in inits if i.name != o.name]
                nodes.append(onnx.helper.make_node("Constant", [], [o.name], value=onnx.numpy_helper.from_array(
                    np.asarray(self.known[o.name]), o.name + "_value")))
        graph = onnx.helper.make_graph(nodes, self.base.graph.name, inputs, list(self.base.graph.output), inits)
        m = onnx.helper.make_model(graph, opset_imports=list(self.base.opset_import), ir_version=self.base.ir_version)
        return m

    def inputs_of(self, name: str) -> list[str]:
        """The graph inputs a value is computed from."""
        producer = {o: n for n in self.nodes for o in n.output}
        seen, stack, out = set(), [name], []
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if v in producer:
                stack.extend(_all_inputs(self.onnx, producer[v]))
            else:
                out.append(v)
        return out

    def round(self, static: dict[str, tuple[int, ...] | None], opset: dict[str, int]) -> bool:
        """One pass over the nodes: what can be computed is, constant Ifs inlined. Whether anything changed."""
        changed, out = False, []
        work = list(self.nodes)
        while work:
            n = work.pop(0)
            value = self._fold(n, static, opset)
            if value is not None:
                self.known.update(value)
                changed = True
                continue
            if n.op_type == "If" and n.input[0] in self.known:
                work[:0] = self._inline(n, bool(np.asarray(self.known[n.input[0]]).reshape(-1)[0]))
                changed = True
                continue
            out.append(n)
        self.nodes = out
        return changed

    def _shape_of(self, name: str, static: dict[str, tuple[int, ...] | None]) -> tuple[int, ...] | None:
        if name in self.known:
            return tuple(np.asarray(self.known[name]).shape)
        return static.get(name)

    def _fold(self, n: Any, static: dict[str, tuple[int, ...] | None], opset: dict[str, int]
              ) -> dict[str, np.ndarray] | None:
        onnx = self.onnx
        if n.domain not in ("", "ai.onnx") or n.op_type in _NONDETERMINISTIC or n.op_type in ("If", "Loop", "Scan"):
            return None
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        if n.op_type == "Constant":
            return {n.output[0]: self._run(n, {}, opset)[0]}
        if n.op_type in ("Shape", "Size") and n.input:
            shape = self._shape_of(n.input[0], static)
            if shape is None:
                return None
            if n.op_type == "Size":
                return {n.output[0]: np.array(int(np.prod(shape)), np.int64)}
            start, end = int(attrs.get("start", 0)), attrs.get("end")
            return {n.output[0]: np.array(shape[start:None if end is None else int(end)], np.int64)}
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute):
            return None
        if not all(i == "" or i in self.known for i in n.input):
            return None
        big = sum(np.asarray(self.known[i]).size for i in n.input if i)
        if big > 1 << 24:
            return None  # left to the model (and torch.export's constant folding)
        values = self._run(n, {i: self.known[i] for i in n.input if i}, opset)
        return {o: v for o, v in zip(n.output, values) if o}

    def _run(self, n: Any, feeds: dict[str, np.ndarray], opset: dict[str, int]) -> list[np.ndarray]:
        from onnx.reference import ReferenceEvaluator

        onnx = self.onnx
        try:
            ev = ReferenceEvaluator(n, opsets={"": opset.get("", opset.get("ai.onnx", 17))})
            return [np.asarray(v) for v in ev.run(None, feeds)]
        except Exception as e:
            raise TorchMCUError(f"{self.where}: folding the {n.op_type} node {n.name or n.output[0]!r} of constants "
                                f"failed: {type(e).__name__}: {one_line(str(e))}") from None

    def _inline(self, n: Any, cond: bool) -> list[Any]:
        """The branch an If takes, as nodes of the outer graph: the values it makes renamed where they
        would clash, its outputs the If's."""
        onnx = self.onnx
        branch = next(onnx.helper.get_attribute_value(a) for a in n.attribute
                      if a.name == ("then_branch" if cond else "else_branch"))
        rename: dict[str, str] = {}
        made = [o for bn in branch.node for o in bn.output] + [i.name for i in branch.initializer]
        outs = {o.name: target for o, target in zip(branch.output, n.output)}
        for v in made:
            if v in outs and outs[v] not in rename.values():
                rename[v] = outs[v]
            elif v in self.used:
                self.serial += 1
                rename[v] = f"{v}__tmcu{self.serial}"
            else:
                rename[v] = v
            self.used.add(rename[v])
        for init in branch.initializer:
            self.known[rename[init.name]] = onnx.numpy_helper.to_array(init)
        nodes = []
        for bn in branch.node:
            c = onnx.NodeProto()
            c.CopyFrom(bn)
            _rename(onnx, c, rename)
            nodes.append(c)
        for o, target in outs.items():  # an output the branch does not make itself (an outer value), or made twice
            if rename.get(o) != target:
                nodes.append(onnx.helper.make_node("Identity", [rename.get(o, o)], [target]))
        return nodes


def _all_inputs(onnx: Any, n: Any) -> list[str]:
    """A node's inputs, and the outer values its subgraphs read."""
    names = [i for i in n.input if i]
    for a in n.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            names += [i for sub in a.g.node for i in _all_inputs(onnx, sub)]
    return names


def _rename(onnx: Any, n: Any, rename: dict[str, str]) -> None:
    for k, v in enumerate(n.input):
        if v in rename:
            n.input[k] = rename[v]
    for k, v in enumerate(n.output):
        if v in rename:
            n.output[k] = rename[v]
    for a in n.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            for sub in a.g.node:
                _rename(onnx, sub, rename)
            for o in a.g.output:
                if o.name in rename:
                    o.name = rename[o.name]


def convert(model: Any, where: str, example: tuple[torch.Tensor, ...]) -> torch.nn.Module:
    """onnx2torch's GraphModule of the folded model; an op it has no converter for named."""
    onnx = _import_onnx()
    onnx2torch = _import_onnx2torch()
    from .onnx_ops import register

    register()
    from onnx2torch.node_converters.registry import OperationDescription, _CONVERTER_REGISTRY  # noqa: F401

    _outputs_through_identity(onnx2torch, model)
    opset = {o.domain or "": o.version for o in model.opset_import}
    have: dict[tuple[str, str], list[int]] = {}
    for desc in _CONVERTER_REGISTRY:
        have.setdefault((desc.domain or "", desc.operation_type), []).append(desc.version)
    for n in model.graph.node:
        domain = n.domain if n.domain not in ("ai.onnx",) else ""
        versions = have.get((domain, n.op_type))
        if not versions:
            raise TorchMCUError(f"{where}: onnx2torch has no converter for the ONNX op {n.op_type} (node "
                                f"{n.name or n.output[0]!r}); export the model without it, or compile its PyTorch "
                                "source through a file.py:function")
        v = opset.get(domain, 1)
        try:
            since = onnx.defs.get_schema(n.op_type, max_inclusive_version=v, domain=domain).since_version
        except Exception:  # an op onnx does not know at that opset: onnx2torch's own lookup says
            continue
        if since not in versions:
            raise TorchMCUError(f"{where}: onnx2torch has no converter for {n.op_type} as opset {v} defines it "
                                f"(version {since}; it converts versions {', '.join(map(str, sorted(versions)))}); "
                                "export the model at an opset of one of those (torch.onnx.export(..., "
                                "opset_version=N)) or convert it (onnx.version_converter)")
    try:
        gm = onnx2torch.convert(model)
    except Exception as e:
        raise TorchMCUError(f"{where}: onnx2torch could not convert the model: {type(e).__name__}: "
                            f"{one_line(str(e))}") from None
    bind_constants(gm, example)
    _name_inputs(gm, [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}])
    return gm


def _outputs_through_identity(onnx2torch: Any, model: Any) -> None:
    """A graph output made by a node of several outputs (an LSTM's Y_h, Y_c) as an Identity of it:
    onnx2torch returns such a node's whole tuple for each of them."""
    import onnx

    outs = {o.name for o in model.graph.output}
    extra = []
    for n in model.graph.node:
        if len([o for o in n.output if o]) < 2:
            continue
        for k, o in enumerate(n.output):
            if o in outs:
                n.output[k] = f"{o}__tmcu_out"
                extra.append(onnx.helper.make_node("Identity", [n.output[k]], [o]))
    model.graph.node.extend(extra)


def _name_inputs(gm: torch.fx.GraphModule, names: list[str]) -> None:
    """The forward's inputs by their ONNX names (onnx2torch calls them input_1, input_2, ...)."""
    import keyword
    import re

    holders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(holders) != len(names):
        return
    taken = {n.name for n in gm.graph.nodes}
    for n, name in zip(holders, names):
        clean = re.sub(r"\W", "_", name)
        clean = clean if clean.isidentifier() and not keyword.iskeyword(clean) else f"in_{clean}"
        if clean != n.name and clean in taken:
            continue
        n.name = n.target = clean
        taken.add(clean)
    gm.recompile()


class _Numbers(np.ndarray):
    """A constant an onnx2torch module reads as numbers (`t.detach().cpu().numpy()`, `.tolist()`,
    `.item()`): an array, so that torch.export sees numbers, not a tensor of its graph."""

    def detach(self) -> "_Numbers":
        return self

    def cpu(self) -> "_Numbers":
        return self

    def numpy(self) -> np.ndarray:
        return np.asarray(self)


class _Bound(torch.nn.Module):
    """An onnx2torch module called with constants (a Slice's starts, a
    Reshape's shape) that it reads as numbers: those bound as arrays
    (_Numbers). torch.export would otherwise trace them as tensors, and
    reading one as numbers fails (`.numpy() is not supported for tensor
    subclasses`)."""

    def __init__(self, inner: torch.nn.Module, bound: list[Any]) -> None:
        super().__init__()
        self.inner = inner
        self.bound = tuple(bound)  # an array where a constant goes, None where the call's argument does

    def forward(self, *xs: Any) -> Any:
        it = iter(xs)
        return self.inner(*[next(it) if b is None else b for b in self.bound])


def bind_constants(gm: torch.fx.GraphModule, example: tuple[torch.Tensor, ...]) -> None:
    """Each call of an onnx2torch module with constants after its first argument, those bound as
    numbers (_Bound), where the module computes the same with them (tried on the example inputs)."""
    bind: dict[torch.fx.Node, list[Any]] = {}

    class Probe(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            self.node = n
            return super().run_node(n)

        def call_module(self, target: Any, args: Any, kwargs: Any) -> Any:
            out = super().call_module(target, args, kwargs)
            n = self.node
            consts = [isinstance(a, torch.fx.Node) and a.op == "get_attr" for a in n.args]
            if any(consts[1:]) and not kwargs:
                bound = [np.asarray(v.detach().numpy()).view(_Numbers) if c else None for v, c in zip(args, consts)]
                try:
                    again = _Bound(self.module.get_submodule(target), bound)(
                        *[v for v, c in zip(args, consts) if not c])
                    same = _same(out, again)
                except Exception:
                    same = False
                if same:
                    bind[n] = bound
            return out

    with torch.no_grad():
        Probe(gm).run(*example)
    for n, bound in bind.items():
        name = f"{n.target}_bound".replace(".", "_").replace("/", "_")
        gm.add_submodule(name, _Bound(gm.get_submodule(n.target), bound))
        n.target = name
        n.args = tuple(a for a, b in zip(n.args, bound) if b is None)
    gm.graph.eliminate_dead_code()
    gm.recompile()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b
