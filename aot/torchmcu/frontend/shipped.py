"""Models as they ship: a TorchScript file (torch.jit.save: model.pt, model.jit)
or an ONNX file (model.onnx), loaded as (module, example_inputs) like a
`file.py:function`.

    torchmcu compile model.jit --input x=1x576 --input state=2x1x128 --board ... -o out
    torchmcu compile model.jit:_model ...            a submodule's forward (its attribute path)
    torchmcu compile model.onnx --fix sr=16000 --input input=1x576 --board ... -o out

TorchScript goes through torch's converter (torch._export.converter.TS2EPConverter)
after the sizes, dims and lengths of tensors (static once the input shapes are
fixed) are folded into constants and the `if`s on them resolved: the converter
would otherwise make each such `if` a torch.cond, which it cannot do for most of
them (a branch that raises, tuples).

ONNX goes through onnx2torch after the inputs fixed with --fix are folded into
the graph as constants, with everything computed from constants and static
shapes (Shape, Size, Gather of them, Equal, ...) and each `If` whose condition
is then constant replaced by the branch it takes (frontend/onnx_fold.py).

Each form refused is one line: what, and what to do.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import TorchMCUError
from .user_code import one_line

if TYPE_CHECKING:  # torch is imported where a model is loaded: `build` and `run` start without it
    import torch

SUFFIXES = (".pt", ".jit", ".onnx")


def is_shipped(spec: str) -> bool:
    """model.pt / model.jit / model.onnx, optionally FILE:SUBMODULE."""
    path = spec.rpartition(":")[0] if ":" in spec and not spec.lower().endswith(SUFFIXES) else spec
    return path.lower().endswith(SUFFIXES)


def parse_shape(text: str, flag: str = "--input", name: str = "") -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in text.lower().replace("*", "x").split("x"))
    except ValueError:
        dims = ()
    if not dims or any(d <= 0 for d in dims):
        raise TorchMCUError(f"{flag} {name + '=' if name else ''}{text}: a shape is positive sizes separated by x, e.g. 1x576 or 2x1x128")
    return dims


def load_shipped(spec: str, shapes: dict[str, tuple[int, ...]], fixed: dict[str, str]
                 ) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    path_text, sub = spec, ""
    if not spec.lower().endswith(SUFFIXES):
        path_text, _, sub = spec.rpartition(":")
    path = Path(path_text)
    if not path.is_file():
        raise TorchMCUError(f"model file not found: {path}" + (" (a directory)" if path.is_dir() else ""))
    if path.suffix.lower() == ".onnx":
        if sub:
            raise TorchMCUError(f"{spec}: an ONNX file is one graph; give the file alone (no :{sub})")
        from .onnx_fold import load_onnx

        return load_onnx(path, shapes, fixed)
    return load_torchscript(path, sub, shapes, fixed)


# ---------------------------------------------------------------- TorchScript

def load_torchscript(path: Path, sub: str, shapes: dict[str, tuple[int, ...]], fixed: dict[str, str]
                     ) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    import torch

    if not zipfile.is_zipfile(path):
        raise TorchMCUError(f"{path} is not a TorchScript file (torch.jit.save writes a zip archive; this is not one)")
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
    if not any("/code/" in n for n in names):
        why = "written by torch.save (a pickle), not torch.jit.save" if any(n.endswith("data.pkl") for n in names) \
            else "no TorchScript code in the archive"
        raise TorchMCUError(f"{path} is not a TorchScript file ({why}); torchmcu does not unpickle models: save it with "
                            "torch.jit.save(torch.jit.script(model), path), or load it in a file.py:function that "
                            "returns (model, example_inputs)")
    try:
        module = torch.jit.load(str(path), map_location="cpu")
    except Exception as e:
        raise TorchMCUError(f"{path}: torch.jit.load failed: {type(e).__name__}: {one_line(str(e))}") from None
    where = path.name
    if sub:
        for part in sub.split("."):
            child = getattr(module, part, None)
            if not isinstance(child, torch.jit.ScriptModule):
                have = ", ".join(n for n, _ in module.named_children()) or "none"
                raise TorchMCUError(f"{path}:{sub}: no submodule {part!r} (its submodules: {have})")
            module = child
        where = f"{path.name}:{sub}"
    return from_script_module(module, shapes, fixed, where)


def _forward_args(module: Any) -> list[Any]:
    try:
        schema = module.forward.schema
    except (AttributeError, RuntimeError):
        raise TorchMCUError("the ScriptModule has no scripted forward (torch.jit.script or torch.jit.trace it)") \
            from None
    return list(schema.arguments)[1:]  # not self


def from_script_module(module: Any, shapes: dict[str, tuple[int, ...]], fixed: dict[str, str],
                       where: str = "the ScriptModule") -> tuple[torch.nn.Module, tuple[Any, ...]]:
    """A ScriptModule as (an ExportedProgram's module, example inputs)."""
    import torch

    args = _forward_args(module)
    names = [a.name for a in args]
    for flag, given in (("--input", shapes), ("--fix", fixed)):
        unknown = [n for n in given if n not in names]
        if unknown:
            raise TorchMCUError(f"{where}: {flag} {unknown[0]}: the forward has no input {unknown[0]!r} "
                                f"(its inputs: {', '.join(names) or 'none'})")
    if fixed:
        name = next(iter(fixed))
        raise TorchMCUError(f"{where}: --fix {name}: fixing inputs is for ONNX files; a TorchScript forward's inputs "
                            "are tensors given by --input (a number input: compile the submodule that takes tensors, "
                            "FILE:SUBMODULE)")
    example: list[torch.Tensor] = []
    for a in args:
        kind = str(a.type)
        if kind != "Tensor":
            subs = ", ".join(n for n, _ in module.named_children())
            raise TorchMCUError(f"{where}: input {a.name!r} is {'an' if kind[:1] in 'aeiouAEIOU' else 'a'} {kind}, not a tensor: torchmcu compiles a forward of "
                                "tensors" + (f"; compile a submodule that takes only tensors, as FILE:NAME (its "
                                             f"submodules: {subs})" if subs else ""))
        if a.name not in shapes:
            raise TorchMCUError(f"{where}: input {a.name!r} needs a shape (TorchScript records none): give --input "
                                f"{a.name}=1x... for each input ({', '.join(f'{n}=SHAPE' for n in names)})")
        g = torch.Generator().manual_seed(len(example))
        example.append(torch.randn(shapes[a.name], generator=g))
    example_t = tuple(example)
    try:
        frozen = torch.jit.freeze(module.eval())
    except Exception as e:
        raise TorchMCUError(f"{where}: torch.jit.freeze failed: {type(e).__name__}: {one_line(str(e))}") from None
    try:
        fold_shapes(frozen, example_t)
    except Exception as e:  # its forward failed on inputs of these shapes
        raise TorchMCUError(f"{where}: the forward fails on inputs of shapes "
                            f"{', '.join(f'{n}={_dims(s.shape)}' for n, s in zip(names, example_t))}: "
                            f"{type(e).__name__}: {_ts_message(e)}") from None
    import logging

    from torch._export.converter import TS2EPConverter

    quiet = logging.getLogger("torch._export.non_strict_utils")  # "dimension ... specialized": the shapes
    level, quiet.level = quiet.level, logging.ERROR                # are the user's, static by design
    try:
        ep = TS2EPConverter(frozen, example_t).convert()
    except Exception as e:
        raise TorchMCUError(f"{where}: torch's TorchScript converter (TS2EPConverter) refuses it: {_converter_why(e)}"
                            "; compile the model's Python source through a file.py:function instead") from None
    finally:
        quiet.setLevel(level)
    return ep.module(), example_t


def _dims(shape: Any) -> str:
    return "x".join(str(int(d)) for d in shape)


def _ts_message(e: BaseException) -> str:
    """A TorchScript interpreter error's own message: its last line, not the traceback of scripted code."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else str(e)
    kind = f"{type(e).__name__}: "
    return one_line(last[len(kind):] if last.startswith(kind) else last)


def _converter_why(e: BaseException) -> str:
    """The op the converter failed on, and its innermost reason."""
    chain, x = [], e
    while x is not None:
        chain.append(x)
        x = x.__cause__
    ops = [str(c).rpartition("failed for node ")[2] for c in chain if "failed for node" in str(c)]
    inner = chain[-1]
    why = f"{type(inner).__name__}: {_ts_message(inner)}"
    return (f"the op {ops[-1]} ({why})" if ops else why)


SHAPE_OPS = ("aten::len", "aten::dim", "aten::size", "aten::numel")


def fold_shapes(frozen: Any, example: tuple[torch.Tensor, ...], rounds: int = 32) -> None:
    """The sizes, dims and lengths of tensors in a frozen module's forward as
    constants (their values at the example's shapes, which torch.export fixes
    too), then constant propagation: the `if`s on them take their branch. A
    round per nesting level of such `if`s."""
    import torch

    graph = frozen.forward.graph
    for _ in range(rounds):
        nodes = list(graph.nodes())
        found = [i for i, n in enumerate(nodes)
                 if n.kind() in SHAPE_OPS and n.inputsAt(0).type().kind() == "TensorType"]
        if not found:
            return
        probe = graph.copy()  # the same forward, returning the values of those nodes
        probe_nodes = list(probe.nodes())
        while len(list(probe.outputs())):
            probe.eraseOutput(0)
        for i in found:
            probe.registerOutput(probe_nodes[i].output())
        probe.makeMultiOutputIntoTuple()
        values = torch._C._create_function_from_graph("torchmcu_shapes", probe)(frozen._c, *example)
        for i, value in zip(found, values):
            node = nodes[i]
            const = graph.insertConstant(value)
            const.node().moveBefore(node)
            node.output().replaceAllUsesWith(const)
            node.destroy()
        torch._C._jit_pass_constant_propagation(graph)
        torch._C._jit_pass_peephole(graph, False)
        torch._C._jit_pass_dce(graph)


def add_model_arguments(c: Any) -> None:
    """compile's MODEL and the options of a shipped file's inputs (the command line's, kept here)."""
    c.add_argument("model", help="path.py:function returning (nn.Module, example_inputs), a saved "
                                 "ExportedProgram (model.pt2, torch.export.save), with its example inputs, a "
                                 "TorchScript file (model.pt / model.jit, torch.jit.save; FILE:SUBMODULE for a "
                                 "submodule's forward) or an ONNX file (model.onnx)")
    c.add_argument("--input", action="append", default=[], metavar="NAME=SHAPE",
                   help="a TorchScript or ONNX model's input shape, e.g. --input x=1x576 (repeat per input; an "
                        "ONNX input with a static shape needs none)")
    c.add_argument("--fix", action="append", default=[], metavar="NAME=VALUE",
                   help="an ONNX model's input fixed to a constant and folded into the graph (with the Ifs it "
                        "decides), e.g. --fix sr=16000")


def load_model(spec: str, inputs: list[str] | None = None, fixed: list[str] | None = None
               ) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    """compile's MODEL: path.py:function, a saved ExportedProgram (.pt2), a
    TorchScript file (.pt, .jit; FILE:SUBMODULE) or an ONNX file (.onnx);
    `inputs` (NAME=SHAPE) and `fixed` (NAME=VALUE) for the last two."""
    from .capture import load_entry

    shapes = {name: parse_shape(v, "--input", name) for name, v in _pairs(inputs or [], "--input", "x=1x576")}
    fixes = dict(_pairs(fixed or [], "--fix", "sr=16000"))
    if not is_shipped(spec):
        if shapes or fixes:
            flag = "--input" if shapes else "--fix"
            raise TorchMCUError(f"{flag} is for TorchScript (.pt, .jit) and ONNX (.onnx) files; {spec} gives its "
                                "own example inputs")
        return load_entry(spec)
    return load_shipped(spec, shapes, fixes)


def _pairs(items: list[str], flag: str, example: str) -> list[tuple[str, str]]:
    out = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise TorchMCUError(f"{flag} {item!r}: expected NAME=VALUE, e.g. {flag} {example}")
        out.append((name.strip(), value.strip()))
    return out
