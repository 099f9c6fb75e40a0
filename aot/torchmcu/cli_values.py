"""The command line's option values (--precision, --budget, --pin, sizes in
bytes, --tile-recompute) parsed into the compiler's, each bad value a
one-line TorchMCUError naming the flag."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import TorchMCUError


def _precision(items: list[str]) -> dict[str, str] | int:
    """--precision 'conv1=int16,fc=int4' (repeatable), @FILE with NAME=PRECISION
    lines (# comments), or auto:BUDGET (bytes of weights and biases, e.g. 40K)."""
    flat: list[str] = []
    if len(items) == 1 and items[0].startswith("auto:"):  # auto:BUDGET: choose per layer for a flash budget
        return _bytes(items[0][5:])  # type: ignore[return-value]
    for item in items:
        if item.startswith("@"):
            if not Path(item[1:]).is_file():
                raise TorchMCUError(f"--precision {item}: no such file {item[1:]!r}")
            lines = Path(item[1:]).read_text().splitlines()
            flat += [ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()]
        else:
            flat.append(item)
    return _pairs(flat, "--precision", str)


def _recompute(value: float) -> float:
    if not 0 <= value <= 10:  # NaN fails too
        raise TorchMCUError(f"--tile-recompute {value}: give a fraction of MACs between 0 and 10 (0.05 = 5 %)")
    return value


def _bytes(text: str) -> int:
    """1234, 16K / 16KiB (x1024), 2M / 2MiB (x1048576)."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    scale = {"K": 1024, "M": 1024 * 1024}.get(t[-1:], 1)
    try:
        value = float(t[:-1] if scale > 1 else t) * scale
        if not value >= 0 or value == float("inf"):  # NaN fails the comparison
            raise ValueError(text)
        return int(value)
    except ValueError:
        raise TorchMCUError(f"{text!r} is not a size in bytes (e.g. 16384, 16K, 2M)") from None


def _pairs(items: list[str], flag: str, value: Any) -> dict[str, Any]:
    """NAME=VALUE items, each possibly a comma-separated list."""
    out: dict[str, Any] = {}
    for item in items:
        for part in filter(None, item.split(",")):
            name, sep, v = part.partition("=")
            if not sep or not name or not v:
                example = {"--budget": "dtcm=16K", "--pin": "conv1=sram", "--precision": "conv1=int16"}.get(flag, "")
                raise TorchMCUError(f"{flag} {part!r}: expected NAME=VALUE, e.g. {flag} {example}")
            try:
                out[name.strip()] = value(v.strip())
            except (ValueError, TorchMCUError):
                raise TorchMCUError(f"{flag} {part!r}: {v!r} is not a valid value") from None
    return out
