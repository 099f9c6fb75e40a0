"""Capture: a user's `nn.Module` to an ExportedProgram with static shapes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable

import torch

from ..errors import CompileError, TorchMCUError


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
    spec_obj.loader.exec_module(module)
    fn: Callable[[], Any] | None = getattr(module, func_name, None)
    if fn is None:
        raise TorchMCUError(f"{path} has no function {func_name!r}")
    result = fn()
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.nn.Module)):
        raise TorchMCUError(f"{spec} must return (nn.Module, example_inputs)")
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


def user_frame(node: torch.fx.Node) -> str | None:
    """The innermost frame of the node's stack trace outside torch: the user's line."""
    trace = node.meta.get("stack_trace")
    if not trace:
        return None
    lines = trace.strip().splitlines()
    frames = [(i, ln.strip()) for i, ln in enumerate(lines) if ln.strip().startswith("File ")]
    best = None
    for i, frame in frames:
        if "/torch/" in frame or "site-packages" in frame:
            continue
        code = lines[i + 1].strip() if i + 1 < len(lines) else ""
        best = f"{frame.replace('File ', '', 1)}: {code}" if code else frame
    return best


def capture(model: torch.nn.Module, example_inputs: tuple[Any, ...]) -> torch.export.ExportedProgram:
    """torch.export with static shapes, the model in eval mode."""
    if not isinstance(model, torch.fx.GraphModule):  # a quantized model is exported already, in eval
        model = model.eval()
    for i, x in enumerate(example_inputs):
        if not isinstance(x, torch.Tensor):
            raise TorchMCUError(f"example input {i} is a {type(x).__name__}, expected a torch.Tensor")
    try:
        return torch.export.export(model, example_inputs, strict=False)
    except Exception as e:  # torch raises many types; give the user one clear message
        raise CompileError(f"torch.export could not capture the model: {type(e).__name__}: {e}") from e
