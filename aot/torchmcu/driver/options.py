"""Every option of a compile, in one record, checked in one place."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..errors import CompileError
from ..passes import AVG_POOL_ROUNDINGS, IO_LAYOUTS
from ..program import serialize
from ..program.c_api import check_api_symbol

QUANT_SCHEMES = ("float32", "int8", "int4", "a16w8")  # int4: W4A8; a16w8: int16 activations (lower_s16.py)
QUANTIZED = ("int8", "int4", "a16w8")
# How an integer LSTM's or GRU's weights are quantized (frontend/recurrent.py):
# per-channel, one scale per row (torchmcu's scheme, the default: 4-6 dB
# closer to float on trained weights), or per-gate, one per gate's matrix
# (TFLite's scheme: what a .tflite export and CMSIS-NN's LSTM take).
RECURRENT_WEIGHTS = ("per-channel", "per-gate")


@dataclass(frozen=True)
class CompileOptions:
    """What compile() takes besides the model, its inputs, the board and the
    output directory (see torchmcu.compiler.compile for each). Made with
    CompileOptions(quant="int8", ...): a wrong value raises CompileError here."""

    quant: str = "float32"  # QUANT_SCHEMES
    calibration: Any = None  # samples: an iterable, or a mapping of arrays along axis 0
    progress: bool = True  # notes on stderr
    io: str = "float"  # "float", or "int8" for an int8 program
    budgets: dict[str, int] | None = None  # memory -> the most bytes of arena there
    pins: dict[str, str] | None = None  # tensor or op -> the memory of its buffers
    inplace: bool = True
    copy_hot_weights: bool = False
    tile: bool = True  # patch-based inference
    tile_recompute: float = 0.05  # the most MACs it may add, a fraction of the model's
    symbol: str = serialize.DEFAULT_SYMBOL  # names the C arrays and API
    precision: dict[str, str] | int | None = None  # per-layer precisions, or a flash budget for weights
    backend_names: list[str] | None = None  # instead of the board's backends
    io_layout: str = "nchw"  # IO_LAYOUTS
    stack: int | None = None  # the firmware's stack, for the room left to arenas
    state: int | list[tuple[int, int]] | None = None  # a streaming model's state
    strict: bool = False  # calibration warnings are errors
    crc: bool = False  # the program carries a CRC32 of its bytes
    recurrent_weights: str = "per-channel"  # RECURRENT_WEIGHTS
    reparam: bool = True  # parallel conv / batch-norm / identity branches summed fold into one conv
    # How integer average pools and means round (passes/layout.py): "pytorch" (the real mean half to even,
    # PyTorch's q/dq model) or "tflite" (TFLite's AveragePool: what a .tflite export needs, and CMSIS-NN runs)
    avg_pool_rounding: str = "pytorch"

    def __post_init__(self) -> None:
        try:
            check_api_symbol(self.symbol)
        except ValueError as e:
            raise CompileError(str(e)) from None
        if not 0 <= self.tile_recompute <= 10:
            raise CompileError(f"tile_recompute={self.tile_recompute!r}: a fraction of MACs between 0 and 10 "
                               "(0.05 = 5 %)")
        if self.io_layout not in IO_LAYOUTS:
            raise CompileError(f"io_layout={self.io_layout!r}: choose one of {', '.join(IO_LAYOUTS)}")
        if self.stack is not None and (self.stack <= 0 or self.stack % 8):
            raise CompileError(f"stack={self.stack}: a positive number of bytes, a multiple of 8")
        if self.avg_pool_rounding not in AVG_POOL_ROUNDINGS:
            raise CompileError(f"avg_pool_rounding={self.avg_pool_rounding!r}: choose one of "
                               f"{', '.join(AVG_POOL_ROUNDINGS)}")
        if self.recurrent_weights not in RECURRENT_WEIGHTS:
            raise CompileError(f"recurrent_weights={self.recurrent_weights!r}: choose one of "
                               f"{', '.join(RECURRENT_WEIGHTS)}")
        if self.quant not in QUANT_SCHEMES:
            raise CompileError(f"unknown quantization scheme {self.quant!r}; choose one of {', '.join(QUANT_SCHEMES)}")
        if self.precision and self.quant == "float32":
            raise CompileError("precision overrides need a quantized scheme (quant='int8', 'int4' or 'a16w8')")
        if self.io not in ("float", "int8") or (self.io == "int8" and self.quant not in ("int8", "int4")):
            raise CompileError(f"io={self.io!r}: inputs and outputs are 'float', or 'int8' for an int8 program")

    @property
    def quantized(self) -> bool:
        return self.quant in QUANTIZED

    @classmethod
    def of(cls, options: CompileOptions | None = None, **changes: Any) -> CompileOptions:
        """`options` (default: the defaults) with `changes` (compile's keyword arguments) applied."""
        if options is None:
            return cls(**changes)
        if not isinstance(options, cls):
            raise TypeError(f"options: a CompileOptions, not {type(options).__name__}")
        return dataclasses.replace(options, **changes) if changes else options
