"""Capture: a user's `nn.Module` to an ExportedProgram with static shapes,
in functional ATen (no in-place ops) with the curated decompositions applied.

torch.export leaves in any graph taken from ordinary PyTorch code ops that
have no kernel: in-place activations and adds (`relu_`, `add_`, from
`inplace=True`), `dropout`, `batch_norm` in its training-IR form.
`ep.run_decompositions(DECOMPOSITIONS)` functionalizes the graph (in-place
ops become their functional forms, dropout in eval goes away) and
decomposes the few composite ops listed in DECOMPOSITIONS into ops a
lowering family has a rule for. Everything else stays as the user wrote it:
the composite ops the families lower themselves (conv2d, linear,
batch_norm, layer_norm, scaled_dot_product_attention, lstm, gru, upsample,
hardswish, hardsigmoid, silu, gelu, ...) are not in the table, so they are
kept whole (an empty table keeps them; only the listed ops decompose).
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

import torch

from ..errors import CompileError, TorchMCUError
from .reparam import reparameterize
from .user_code import location, one_line, raised_by_user, user_error

aten = torch.ops.aten


def _full_like(x: torch.Tensor, fill_value: Any, **kwargs: Any) -> torch.Tensor:
    """full_like of a static shape: a `full`, which the converter folds into a constant."""
    return torch.full(tuple(x.shape), fill_value, dtype=kwargs.get("dtype") or x.dtype)


def _split_with_sizes(x: torch.Tensor, split_sizes: list[int], dim: int = 0) -> list[torch.Tensor]:
    """split / chunk as slices (zero-copy where the layout allows: shape_views.py);
    torch's own decomposition gives as_strided, which says nothing of the layout."""
    out, start = [], 0
    for s in split_sizes:
        out.append(aten.slice.Tensor(x, dim, start, start + int(s)))
        start += int(s)
    return out


def _type_as(x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """x in other's dtype: x itself when it already is (softmax(...).type_as(scores))."""
    return x if x.dtype == other.dtype else aten._to_copy.default(x, dtype=other.dtype)


def _stack(tensors: list[torch.Tensor], dim: int = 0) -> torch.Tensor:
    """stack as unsqueeze and cat (an LSTM cell's state stacked: torch.stack([h, c]))."""
    d = dim if dim >= 0 else dim + tensors[0].dim() + 1
    return aten.cat.default([aten.unsqueeze.default(t, d) for t in tensors], d)


def _split(x: torch.Tensor, split_size: int, dim: int = 0) -> list[torch.Tensor]:
    n = int(x.shape[dim])
    return _split_with_sizes(x, [min(split_size, n - i) for i in range(0, n, split_size)] or [0], dim)


def _decompositions() -> dict[Any, Callable[..., Any]]:
    """Ops without a kernel here whose decompositions use only ops that have one."""
    from torch._decomp import core_aten_decompositions, get_decompositions

    table = dict(get_decompositions([
        # constants of a static shape made in forward: `full`, folded by the converter
        aten.zeros_like.default, aten.ones_like.default, aten.empty_like.default,
        aten.new_zeros.default, aten.new_ones.default, aten.new_full.default, aten.new_empty.default,
        # views and shuffles: view / permute / clone / expand / slice
        aten.unbind.int, aten.repeat.default, aten.pixel_shuffle.default, aten.pixel_unshuffle.default,
        aten.channel_shuffle.default,
        # activations and matmuls with a kernel under another name
        aten.relu6.default, aten.clamp_min.default, aten.clamp_max.default,
        aten.addmm.default, aten.mv.default, aten.rsub.Scalar, aten.rsub.Tensor,
    ]))
    core = core_aten_decompositions()
    for op in (aten.tile.default, aten.native_channel_shuffle.default):  # -> repeat / view, permute
        if op in core:
            table[op] = core[op]
    table[aten.full_like.default] = _full_like
    table[aten.type_as.default] = _type_as
    table[aten.split.Tensor] = _split  # chunk comes as split
    table[aten.stack.default] = _stack
    table[aten.split_with_sizes.default] = _split_with_sizes
    return table


DECOMPOSITIONS: dict[Any, Callable[..., Any]] = _decompositions()


def load_entry(spec: str) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    """Run `path.py:function`, which returns (module, example_inputs), or
    load a saved ExportedProgram (`model.pt2`, torch.export.save)."""
    if spec.endswith(".pt2"):
        return load_exported(spec)
    path_text, sep, func_name = spec.rpartition(":")
    if not sep or not path_text.endswith(".py"):
        raise TorchMCUError(f"expected MODEL as path.py:function or a saved ExportedProgram (.pt2), got {spec!r}")
    path = Path(path_text)
    if not path.is_file():
        raise TorchMCUError(f"model file not found: {path}")
    mod_name = f"torchmcu_user_{path.stem}"
    spec_obj = importlib.util.spec_from_file_location(mod_name, path)
    assert spec_obj is not None and spec_obj.loader is not None
    module = importlib.util.module_from_spec(spec_obj)
    sys.modules[mod_name] = module
    try:
        spec_obj.loader.exec_module(module)
    except Exception as e:  # their file: told as theirs, at their line
        raise user_error(f"importing {path.name}", e) from e
    fn: Callable[[], Any] | None = getattr(module, func_name, None)
    if fn is None:
        raise TorchMCUError(f"{path} has no function {func_name!r}")
    if not callable(fn):
        raise TorchMCUError(f"{path}: {func_name!r} is a {type(fn).__name__}, not a function")
    try:
        result = fn()
    except Exception as e:
        raise user_error(f"your {func_name}() in {path.name}", e) from e
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.nn.Module)):
        got = type(result).__name__ if not isinstance(result, tuple) else \
            f"a tuple of {len(result)} ({', '.join(type(r).__name__ for r in result)})"
        raise TorchMCUError(f"{spec} must return (nn.Module, example_inputs); it returned {got}")
    model, example = result
    if isinstance(example, torch.Tensor):
        example = (example,)
    return model, tuple(example)


def load_exported(path_text: str) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    """A saved ExportedProgram as (module, example_inputs): its module (a
    q/dq graph stays one, so compile takes it as quantized) and the example
    inputs torch.export saved with it."""
    path = Path(path_text)
    if not path.is_file():
        raise TorchMCUError(f"exported program not found: {path}")
    import zipfile

    if not zipfile.is_zipfile(path):  # before torch, which logs a traceback of its own
        raise TorchMCUError(f"{path} is not a saved ExportedProgram: not a .pt2 archive (torch.export.save writes one)")
    try:
        ep = torch.export.load(str(path))
    except Exception as e:  # a corrupt or foreign file: one line, not torch's traceback
        raise TorchMCUError(f"{path} is not a saved ExportedProgram: {type(e).__name__}: {e}") from None
    return from_exported(ep, str(path))


def from_exported(ep: torch.export.ExportedProgram, where: str = "the ExportedProgram") -> tuple[
        torch.nn.Module, tuple[Any, ...]]:
    example = getattr(ep, "example_inputs", None)
    if not example or not example[0]:
        raise TorchMCUError(f"{where} carries no example inputs: export it with torch.export.export(model, args) "
                            "(which records them) before torch.export.save")
    args, kwargs = example
    if kwargs:
        raise TorchMCUError(f"{where} takes keyword inputs ({', '.join(kwargs)}); torchmcu takes positional ones")
    return ep.module(), tuple(args)


def _library(frame: str) -> bool:
    return "/torch/" in frame or "site-packages" in frame or "dist-packages" in frame


def user_frame(node: torch.fx.Node) -> str | None:
    """Where the node comes from in the user's code: the innermost frame of
    its stack trace outside torch and installed packages. For an op inside
    a library module (torchvision, torch.nn) that frame is only the call
    that leads there, so the module is named first:
    `features.1.conv.0.2 (torch.nn.ReLU6, inplace=True) from model.py:8: ...`."""
    trace = node.meta.get("stack_trace")
    lines = trace.strip().splitlines() if trace else []
    frames = [(i, ln.strip()) for i, ln in enumerate(lines) if ln.strip().startswith("File ")]
    best, inside_library = None, False
    for i, frame in frames:
        if _library(frame):
            inside_library = best is not None or inside_library
            continue
        code = lines[i + 1].strip() if i + 1 < len(lines) else ""
        best = f"{frame.replace('File ', '', 1)}: {code}" if code else frame
        inside_library = False
    module = node.meta.get("torchmcu_module") or _module_name(node)
    if module and (best is None or inside_library):
        return f"{module} from {best}" if best else module
    return best


def _module_name(node: torch.fx.Node) -> str | None:
    """The innermost module the node was called in: `path (class)`."""
    stack = list((node.meta.get("nn_module_stack") or {}).values())
    if not stack or _anonymous(*stack[-1]):
        return None
    path, cls = stack[-1]
    path = str(path) or "the model"
    return f"{path} ({_class_name(cls)})"


def _anonymous(path: Any, cls: Any) -> bool:
    """The root of a graph torch made itself (a converted TorchScript model's: a class local to
    torch.export's tracing), which names nothing of the user's."""
    qual = cls if isinstance(cls, str) else f"{cls.__module__}.{cls.__qualname__}"
    return not str(path) and "<locals>" in qual


def _class_name(cls: Any) -> str:
    """torch.nn.modules.activation.ReLU6 -> torch.nn.ReLU6 (its public name)."""
    qual = cls if isinstance(cls, str) else f"{cls.__module__}.{cls.__qualname__}"
    mod, _, name = qual.rpartition(".")
    if mod.startswith("torch.nn.modules") and getattr(torch.nn, name, None) is not None:
        return f"torch.nn.{name}"
    return qual


def _describe_modules(ep: torch.export.ExportedProgram, model: torch.nn.Module | None) -> None:
    """Each node's innermost module as `path (class, attributes)`, for errors:
    the attributes are the module's extra_repr (inplace=True, kernel sizes)."""
    if model is None:
        return
    for n in ep.graph.nodes:
        stack = list((n.meta.get("nn_module_stack") or {}).values())
        if not stack:
            continue
        path, cls = stack[-1]
        if _anonymous(path, cls):
            continue
        try:
            extra = model.get_submodule(str(path)).extra_repr() if path else ""
        except (AttributeError, TypeError):
            extra = ""
        extra = extra if len(extra) <= 80 else extra[:77] + "..."
        name = _class_name(cls) + (f", {extra}" if extra else "")
        n.meta["torchmcu_module"] = f"{path or 'the model'} ({name})"


def check_inputs(example_inputs: tuple[Any, ...]) -> None:
    """Example inputs are tensors: the same error at every precision."""
    for i, x in enumerate(example_inputs):
        if not isinstance(x, torch.Tensor):
            raise TorchMCUError(f"example input {i} is a {type(x).__name__}, expected a torch.Tensor "
                                f"(give a scalar as a tensor, e.g. torch.tensor([{x!r}]))")


def to_eval(model: torch.nn.Module, stacklevel: int = 3) -> torch.nn.Module:
    """The model in eval mode; a model left in training mode is switched,
    with a warning. A graph module (torch.export(...).module(), a quantized
    graph) is taken as it is: its mode was fixed when it was exported, and
    its .eval() raises."""
    if isinstance(model, torch.fx.GraphModule):
        return model
    if model.training:
        # Said where it changes the result: layers that compute otherwise in training mode.
        modal = sorted({type(m).__name__ for m in model.modules() if isinstance(m, _TRAIN_MODAL)})
        if modal:
            warnings.warn(f"torchmcu: the model is in training mode; compiling it in eval mode, as model.eval() "
                          f"would (its {', '.join(modal)} layers compute otherwise in training mode)", stacklevel=stacklevel)
    return model.eval()


# Layers whose output depends on the training flag.
_TRAIN_MODAL = (torch.nn.modules.batchnorm._NormBase, torch.nn.modules.dropout._DropoutNd)


def export(model: torch.nn.Module, example_inputs: tuple[Any, ...], reparam: bool = True
           ) -> torch.export.ExportedProgram:
    """torch.export (static shapes, non-strict), functionalized and with the curated decompositions;
    reparam: parallel conv / batch-norm / identity branches summed folded into one conv (reparam.py)."""
    check_inputs(example_inputs)
    try:
        ep = torch.export.export(model, tuple(example_inputs), strict=False)
        with warnings.catch_warnings():  # torch's notes about its own internals, nothing the user can act on
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            ep = ep.run_decompositions(DECOMPOSITIONS)
        fold_shape_arithmetic(ep)
        small_powers(ep)
    except Exception as e:  # torch raises many types; give the user one clear message
        if raised_by_user(e):  # their forward raised it, not torch.export refusing something
            raise user_error(f"your model's forward ({type(model).__name__}.forward)", e) from e
        where = location(e)
        raise CompileError(f"torch.export could not capture the model: {type(e).__name__}: {one_line(str(e))}"
                           + (f" (at {where})" if where else "")) from e
    check_outputs(ep)
    return reparameterize(ep) if reparam else ep


_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)

# x ** k for the exponents that are ops with a kernel: the power in the ops it is
_POWERS: dict[float, Callable[[torch.fx.Graph, torch.fx.Node], torch.fx.Node]] = {
    1.0: lambda g, x: x,
    2.0: lambda g, x: g.call_function(aten.mul.Tensor, (x, x)),
    3.0: lambda g, x: g.call_function(aten.mul.Tensor, (g.call_function(aten.mul.Tensor, (x, x)), x)),
    0.5: lambda g, x: g.call_function(aten.sqrt.default, (x,)),
    -0.5: lambda g, x: g.call_function(aten.rsqrt.default, (x,)),
    -1.0: lambda g, x: g.call_function(aten.reciprocal.default, (x,)),
}


def small_powers(ep: torch.export.ExportedProgram) -> None:
    """x ** 2 (an STFT's magnitude: real ** 2 + imag ** 2), ** 3, ** 0.5, ** -0.5, ** -1 as
    mul / sqrt / rsqrt / reciprocal; other exponents stay pow, refused as the op."""
    graph, changed = ep.graph, False
    sig = ep.graph_signature
    names = {**sig.inputs_to_buffers, **getattr(sig, "inputs_to_lifted_tensor_constants", {})}
    state = {**ep.state_dict, **ep.constants}
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target not in (aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor) \
                or len(n.args) != 2:
            continue
        x, k = n.args
        if isinstance(k, torch.fx.Node):  # a constant exponent tensor of one value (ONNX's Pow)
            value = state.get(names.get(k.name, ""))
            k = float(value.reshape(-1)[0]) if isinstance(value, torch.Tensor) and value.numel() == 1 else None
            if k is not None and tuple(n.meta["val"].shape) != tuple(x.meta["val"].shape):
                k = None  # the exponent broadcasts x to a larger shape: left as it is
        if not isinstance(k, (int, float)) or float(k) not in _POWERS:
            continue
        with graph.inserting_before(n):
            new = _POWERS[float(k)](graph, x)
        if new is not x:
            new.meta.update({k2: v for k2, v in n.meta.items() if k2 != "val"})
            new.meta["val"] = n.meta.get("val")
            for inner in new.all_input_nodes:  # x * x * x: the inner product's value too
                if inner is not x and "val" not in inner.meta:
                    inner.meta.update(new.meta)
        n.replace_all_uses_with(new)
        graph.erase_node(n)
        changed = True
    if changed:
        graph.eliminate_dead_code()
        ep.graph_module.recompile()


def fold_shape_arithmetic(ep: torch.export.ExportedProgram) -> None:
    """Numbers the graph computes from constants alone, folded into the ops that use them.

    `.item()` of a tensor the forward makes itself (torchaudio's Emformer.infer:
    a zero state's lengths) is a data-dependent symbol to torch.export, and the
    arithmetic over it (math.ceil, torch.sym_min, operator.*) stays in the graph
    as nodes: torch.export.save cannot serialize math.ceil, and the converter
    would see numbers as tensors. Each such number whose inputs are all
    parameters, buffers or constants is computed here and written into its
    users' arguments; the nodes that computed it (and the runtime asserts on
    it) go away. A number that depends on the model's inputs stays, and is
    refused later as the op that needs it."""
    graph = ep.graph
    symbolic = [n for n in graph.nodes if n.op == "call_function" and isinstance(n.meta.get("val"), _SYMBOLIC)]
    if not symbolic:
        return
    sig = ep.graph_signature
    names = {**sig.inputs_to_parameters, **sig.inputs_to_buffers,
             **getattr(sig, "inputs_to_lifted_tensor_constants", {})}
    state = {**ep.state_dict, **ep.constants}
    needed: set[torch.fx.Node] = set()  # the nodes the numbers are computed from
    stack = list(symbolic)
    while stack:
        n = stack.pop()
        if n not in needed:
            needed.add(n)
            stack.extend(n.all_input_nodes)
    values: dict[torch.fx.Node, Any] = {}
    for n in graph.nodes:
        if n not in needed:
            continue
        if n.op == "placeholder":
            if n.name in names:
                values[n] = state[names[n.name]]
        elif n.op == "call_function" and all(a in values for a in n.all_input_nodes):
            args, kwargs = torch.fx.node.map_arg((n.args, n.kwargs), lambda a: values[a])
            values[n] = n.target(*args, **kwargs)
    folded = [n for n in symbolic if n in values and isinstance(values[n], (bool, int, float))]
    for n in folded:
        for user in list(n.users):
            user.args, user.kwargs = torch.fx.node.map_arg((user.args, user.kwargs),
                                                           lambda a, n=n: values[n] if a is n else a)
    for n in list(graph.nodes):  # runtime asserts on what is now a constant
        if (n.op == "call_function" and "_assert_scalar" in str(n.target) and not n.all_input_nodes
                and n.args and n.args[0] is True):
            graph.erase_node(n)
    if folded:
        graph.eliminate_dead_code()
        ep.graph_module.recompile()


class _Leaf:
    """An output leaf shown by its kind in an error: Tensor, None, int 3."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def check_outputs(ep: torch.export.ExportedProgram) -> None:
    """The forward returns tensors only: a tensor, or a tuple / list / dict
    of tensors (nested ones flattened in order, as the program's outputs)."""
    outs = list(ep.graph.output_node().args[0])
    bad = [k for k, o in enumerate(outs) if not isinstance(o, torch.fx.Node)]
    if not bad:
        return
    leaves = [_Leaf("Tensor" if isinstance(o, torch.fx.Node) else
                    ("None" if o is None else f"{type(o).__name__} {o!r}")) for o in outs]
    try:
        shown = repr(torch.utils._pytree.tree_unflatten(leaves, ep.call_spec.out_spec))
    except Exception:  # an unusual output spec: the flat list says as much
        shown = repr(leaves)
    raise TorchMCUError(f"the model's forward returns {shown}: output {bad[0]} is {leaves[bad[0]]!r}, not a tensor; "
                        "torchmcu compiles a forward that returns a tensor, or a tuple / list (or dict) of tensors")


def capture(model: torch.nn.Module, example_inputs: tuple[Any, ...],
            modules: torch.nn.Module | None = None, reparam: bool = True) -> torch.export.ExportedProgram:
    """The model's ExportedProgram, in eval mode. `modules`: the user's model
    whose submodules name the nodes in errors (the model itself by default;
    the float model when `model` is its quantized graph). reparam: see export."""
    check_inputs(example_inputs)
    model = to_eval(model)
    ep = export(model, example_inputs, reparam)
    _describe_modules(ep, modules if modules is not None else model)
    return ep
