"""Calibration ranges a user should hear about, and the float model kept
for `run --check`.

Post-training quantization trusts its calibration data: data scaled by
1e30 gives every activation a step so coarse that the example inputs all
quantize to the zero point, and the int8 program outputs zeros while
matching its own reference bit for bit. After calibration, each
activation observer's range (min, max) is checked; one line per tensor
for a range that is

- not finite (inf or nan in the calibration data or the model),
- of zero width (the activation was constant over the calibration set:
  int8 carries nothing of it),
- absurdly large (|x| > ABSURD_RANGE: activations of a trained network
  rarely exceed a few thousand; a range past 1e6 is mis-scaled data), or
- such that the example inputs, whose values there differ, all quantize to
  one int8 value (calibration data unlike the inputs the model will see).

A non-finite range is an error (no scale holds it). Weights are not checked here: their ranges come from the model itself.
The warnings go to stderr (or Python's warnings when `progress` is off),
into report.json "warnings", and become an error with compile(strict=True).

The float program (the model before quantization, exported) rides on the
quantized graph module's meta to the driver, which saves it beside the
q/dq program as FLOAT_PROGRAM for `run --check` (torchmcu.numerics).
"""

from __future__ import annotations

import io
import math
import sys
import warnings
from typing import Any

import torch

from ..errors import TorchMCUError

ABSURD_RANGE = 1e6
NOT_FINITE = "is not finite"
FLOAT_PROGRAM = "model_float.pt2"
_META = "torchmcu_numerics"  # the key on the quantized GraphModule's meta


def _activation_observer(mod: Any) -> bool:
    """A per-tensor min/max observer (not a weight's per-channel one, not a
    fixed-quantization one: softmax's or tanh's output step is chosen, not observed)."""
    min_val, max_val = getattr(mod, "min_val", None), getattr(mod, "max_val", None)
    return (isinstance(min_val, torch.Tensor) and isinstance(max_val, torch.Tensor) and min_val.numel() == 1
            and max_val.numel() == 1 and hasattr(mod, "calculate_qparams"))


def _where(node: torch.fx.Node) -> str:
    if node.op == "placeholder":
        return f"model input {node.name}"
    path = _module_path(node)
    if path:
        return f"{node.name} (module {path})"
    # A functional op (F.relu in forward) has no module: the layer it follows names it.
    source = node.args[0] if node.args and isinstance(node.args[0], torch.fx.Node) else None
    return f"{node.name} (after module {_module_path(source)})" if source and _module_path(source) else node.name


def _module_path(node: torch.fx.Node) -> str:
    stack = list((node.meta.get("nn_module_stack") or {}).values())
    return str(stack[-1][0]) if stack else ""


def _qparams(mod: Any) -> tuple[float, int, int, int]:
    scale, zero_point = mod.calculate_qparams()
    return float(scale.reshape(-1)[0]), int(zero_point.reshape(-1)[0]), int(mod.quant_min), int(mod.quant_max)


def _collapsed(prepared: torch.fx.GraphModule, example_inputs: tuple[Any, ...]) -> dict[str, tuple[float, float]]:
    """Observer name -> the example inputs' (min, max) at that tensor, for
    tensors whose example values differ but all quantize to one value at the
    calibrated scale because the calibrated range is that much wider (not
    because the values are below the observer's smallest step, eps: a
    vanishing activation of an untrained network). The observers pass the
    values through unchanged (their ranges stay the calibration's)."""
    found: dict[str, tuple[float, float]] = {}

    class Probe(torch.fx.Interpreter):
        def call_module(self, target: Any, args: Any, kwargs: Any) -> Any:
            mod = self.fetch_attr(target)
            x = args[0] if args else None
            if not (_activation_observer(mod) and isinstance(x, torch.Tensor) and x.numel()):
                return super().call_module(target, args, kwargs)
            lo, hi = float(x.min()), float(x.max())
            scale, zp, qmin, qmax = _qparams(mod)
            wide = float(mod.max_val - mod.min_val) / (qmax - qmin) > hi - lo  # the range, not eps, sets the step
            if math.isfinite(lo) and math.isfinite(hi) and hi > lo and math.isfinite(scale) and scale > 0 and wide:
                q = torch.clamp(torch.round(x.double() / scale) + zp, qmin, qmax)
                if bool((q == q.reshape(-1)[0]).all()):
                    found[str(target)] = (lo, hi)
            return x

    with torch.no_grad():
        Probe(prepared).run(*example_inputs)
    return found


def check_ranges(prepared: torch.fx.GraphModule, example_inputs: tuple[Any, ...]) -> list[str]:
    """One warning per activation whose calibrated range is degenerate or
    absurd (see the module docstring), in graph order."""
    try:
        collapsed = _collapsed(prepared, example_inputs)
    except Exception:  # noqa: BLE001  a diagnostic: a graph the probe cannot replay keeps the other checks
        collapsed = {}
    out: list[str] = []
    for n in prepared.graph.nodes:
        if n.op != "call_module" or not n.args or not isinstance(n.args[0], torch.fx.Node):
            continue
        mod = prepared.get_submodule(str(n.target))
        if not _activation_observer(mod) or n.args[0].op == "get_attr":
            continue
        lo, hi = float(mod.min_val), float(mod.max_val)
        if lo == math.inf and hi == -math.inf:  # never observed (nothing ran through it)
            continue
        where = _where(n.args[0])
        if not (math.isfinite(lo) and math.isfinite(hi)):
            out.append(f"calibration: {where}: range [{lo:.3g}, {hi:.3g}] {NOT_FINITE} (inf or nan in the "
                       "calibration data or the model)")
        elif hi == lo:
            out.append(f"calibration: {where}: range is the single value {lo:.3g}: constant over the "
                       "calibration set, so its quantized value carries nothing")
        elif max(abs(lo), abs(hi)) > ABSURD_RANGE:
            out.append(f"calibration: {where}: range [{lo:.3g}, {hi:.3g}] is absurdly large (|x| > "
                       f"{ABSURD_RANGE:.0e}; one step is {_qparams(mod)[0]:.3g}): mis-scaled calibration data?")
        elif str(n.target) in collapsed:
            a, b = collapsed[str(n.target)]
            out.append(f"calibration: {where}: the example inputs' values [{a:.3g}, {b:.3g}] all quantize to one "
                       f"value at the calibrated range [{lo:.3g}, {hi:.3g}]: calibration data unlike the inputs?")
    return out


SHOWN = 10  # warnings printed at most; report.json has every one (a mis-scaled set warns on most layers)


def refuse_non_finite(found: list[str]) -> None:
    """A range with inf or nan has no int8 scale (PyTorch's convert fails on
    it with an assertion, or quantizes with an infinite step): an error."""
    bad = [w for w in found if NOT_FINITE in w]
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise TorchMCUError(f"{bad[0]}; no int8 scale can hold it{more}")


def announce(found: list[str], progress: bool) -> None:
    """One line per warning: on stderr as the command line's other notes
    (the first SHOWN), or as Python warnings for a caller that turned
    progress off."""
    for w in found if not progress else found[:SHOWN]:
        if progress:
            print(f"torchmcu: warning: {w}", file=sys.stderr, flush=True)
        else:
            warnings.warn(f"torchmcu: {w}", stacklevel=3)
    if progress and len(found) > SHOWN:
        print(f"torchmcu: warning: calibration: {len(found) - SHOWN} more (report.json \"warnings\" has them all)",
              file=sys.stderr, flush=True)


def attach(quantized: torch.fx.GraphModule, float_program: torch.export.ExportedProgram | None,
           found: list[str]) -> None:
    """What the driver reads from a model quantize() made: the float program
    (serialized now: quantization must not reach its parameters) and the warnings."""
    saved = None
    if float_program is not None:
        buf = io.BytesIO()
        torch.export.save(float_program, buf)
        saved = buf.getvalue()
    quantized.meta[_META] = {"float_program": saved, "warnings": list(found)}


def range_warnings(model: Any) -> list[str]:
    """The calibration warnings of a model quantize() made ([] otherwise)."""
    return list((getattr(model, "meta", None) or {}).get(_META, {}).get("warnings", []))


def float_program_bytes(model: Any) -> bytes | None:
    """The serialized float program of a model quantize() made (None for a
    model quantized by the user, e.g. after QAT: torchmcu never saw it in float)."""
    return (getattr(model, "meta", None) or {}).get(_META, {}).get("float_program")
