"""Automatic mixed precision: int4, int8 or int16 per layer, to fit a flash
budget with the least loss of SQNR.

What the choice trades, per conv/linear layer of n weights and c output
channels (the bytes it keeps in flash):
  int4  (W4A8)   ceil(n / 2) weight bytes + 4c bias bytes
  int8  (W8A8)   n + 4c
  int16 (W8A16)  n + 8c (int64 biases); int16 activations also double the
                 layer's output buffer in RAM and cost cycles, which the
                 budget here does not count.
The budget covers these bytes (weights and biases of the weighted layers:
what precision changes); the rest of the program is the same for every
choice.

How: each layer's sensitivity is measured alone, the others at int8: the
SQNR of PyTorch's q/dq model (quantize.quantize with that one override)
against the float model over the calibration samples. Starting from every
layer at int16, layers are lowered (int16 -> int8 -> int4) greedily, each
step the one that saves the most bytes per dB lost, until the estimate fits;
the result is measured once more as a whole. Sensitivities are assumed to
add (noise powers of independent layers), which the final measurement
checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..errors import CompileError
from .quantize import calibration_samples, quantize

ORDER = ("int16", "int8", "int4")  # best SQNR first


def _layers(model: torch.nn.Module) -> dict[str, tuple[int, int]]:
    """Conv and linear layers by module path: (weights, output channels)."""
    out = {}
    for name, m in model.named_modules():
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)) and name:
            out[name] = (int(m.weight.numel()), int(m.weight.shape[0]))
    return out


def layer_bytes(n: int, c: int, precision: str) -> int:
    return {"int4": (n + 1) // 2 + 4 * c, "int8": n + 4 * c, "int16": n + 8 * c}[precision]


def _noise(ref: list[np.ndarray], got: list[np.ndarray]) -> float:
    """Noise power relative to signal power (1 / SQNR, linear)."""
    num = sum(float(((r.astype(np.float64) - g) ** 2).sum()) for r, g in zip(ref, got))
    den = sum(float((r.astype(np.float64) ** 2).sum()) for r in ref)
    return num / max(den, 1e-30)


def _db(noise: float) -> float:
    return -10 * math.log10(max(noise, 1e-30))


@dataclass
class PrecisionPlan:
    precision: dict[str, str]
    budget: int
    bytes: int
    sqnr_db: float  # measured, the whole plan
    estimate_db: float
    layers: list[dict[str, Any]] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)

    def describe(self) -> str:
        head = (f"precision for a budget of {self.budget:,} B (weights and biases): {self.bytes:,} B, "
                f"SQNR {self.sqnr_db:.1f} dB measured ({self.estimate_db:.1f} dB estimated)")
        lines = [head]
        for row in self.layers:
            alone = ", ".join(f"{p} {row['sqnr_alone_db'][p]:.1f} dB" for p in ORDER)
            lines.append(f"  {row['layer']:<24} {row['precision']:>5}  {row['bytes']:>8,} B   alone: {alone}")
        lines += [f"  step: {s}" for s in self.steps]
        return "\n".join(lines)


def choose_precision(model: torch.nn.Module, example_inputs: tuple[torch.Tensor, ...], calibration: Any,
                     budget: int, samples: int = 8) -> PrecisionPlan:
    model = model.eval()
    cal = calibration_samples(calibration, example_inputs) if calibration is not None else [example_inputs]
    evals = cal[:samples]
    layers = _layers(model)
    if not layers:
        raise CompileError("automatic precision: the model has no conv or linear layer")
    with torch.no_grad():
        ref = [_as_np(model(*s)) for s in evals]

    def noise_of(precision: dict[str, str]) -> float:
        gm = quantize(model, example_inputs, cal, progress=False, precision=precision)
        with torch.no_grad():
            return _noise(ref, [_as_np(gm(*s)) for s in evals])

    base = noise_of({})  # every layer int8
    # A layer's own noise at each precision: what it adds to the all-int8 model's.
    own: dict[str, dict[str, float]] = {}
    for name in layers:
        own[name] = {"int8": 0.0}
        for p in ("int16", "int4"):
            own[name][p] = noise_of({name: p}) - base
    # Start at int16 everywhere; lower one layer a step at a time.
    choice = {name: "int16" for name in layers}
    total = sum(layer_bytes(*layers[n], choice[n]) for n in layers)
    steps = []
    while total > budget:
        best = None
        for name, p in choice.items():
            if p == "int4":
                continue
            q = ORDER[ORDER.index(p) + 1]
            saved = layer_bytes(*layers[name], p) - layer_bytes(*layers[name], q)
            cost = max(own[name][q] - own[name][p], 1e-12)
            if saved > 0 and (best is None or saved / cost > best[0]):
                best = (saved / cost, name, q, saved, cost)
        if best is None:
            raise CompileError(f"automatic precision: {total:,} B of weights and biases at int4 everywhere "
                               f"exceed the budget of {budget:,} B")
        _, name, q, saved, cost = best
        loss = f"noise power +{cost:.2e} of the signal's" if cost > 1e-12 else "no measurable loss"
        steps.append(f"{name} {choice[name]} -> {q}: {saved:,} B saved, {loss} "
                     f"(the most bytes per unit of noise among the remaining moves)")
        choice[name] = q
        total -= saved
    estimate = base + sum(own[n][choice[n]] for n in layers)
    measured = noise_of({n: p for n, p in choice.items() if p != "int8"})
    rows = [{"layer": n, "precision": choice[n], "bytes": layer_bytes(*layers[n], choice[n]),
             "sqnr_alone_db": {p: _db(base + own[n][p]) for p in ORDER}} for n in layers]
    return PrecisionPlan({n: p for n, p in choice.items()}, budget, total, _db(measured), _db(estimate), rows, steps)


def _as_np(y: Any) -> np.ndarray:
    if isinstance(y, (tuple, list)):
        return np.concatenate([t.detach().numpy().ravel() for t in y])
    return y.detach().numpy()
