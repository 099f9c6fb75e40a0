"""The two kinds of row of the op table (torchmcu/ops/__init__.py)."""

from __future__ import annotations

from dataclasses import dataclass

BACKENDS = ("portable", "cmsis-nn", "ethos-u", "hifi")


@dataclass(frozen=True)
class Kernel:
    """A program op code: what the runtime executes.

    code, value: its name and number in program.fbs's OpCode (append only:
    a value is never reused). args, params: the *Args struct of
    kernel_args.fbs its kernel reads and the params table of program.fbs
    that struct is filled from (program/schema/records.py); None for an op
    with no arguments. backends: who runs it (portable and cmsis-nn: a
    kernel in firmware/kernels/<folder>/; ethos-u, hifi: ops their
    partitioners may claim). inplace: the inputs, by position, whose very
    bytes the output may be (the runtime's Kernel::inplace); an element-wise
    op only. tflite: the .tflite export has it (an `op_<code>` method of
    export/tflite/ops/<family>.py). reference: its NumPy twin is in the family's
    reference module (`OPS` of reference/<family>.py); False where the
    interpreter computes it itself. note, doc: its comments in program.fbs
    (a block before it, and its line's)."""

    code: str
    value: int
    args: str | None
    params: str | None
    backends: tuple[str, ...] = ("portable",)
    inplace: tuple[int, ...] = ()
    tflite: bool = False
    reference: bool = True
    note: tuple[str, ...] = ()
    doc: str = ""

    @property
    def symbol(self) -> str:
        """The C++ kernel object's name: LINEAR_F32 -> kLinearF32."""
        return "k" + "".join(w.capitalize() for w in self.code.split("_"))

    @property
    def dtype(self) -> str:
        """The precision its suffix names: F32, S8, S16, S4, or "any"."""
        last = self.code.rsplit("_", 1)[-1]
        return last if last in ("F32", "S8", "S16", "S4") else "any"


@dataclass(frozen=True)
class Op:
    """A logical op of passes/lowering (a node of the logical graph).

    name: the logical op ("conv2d"; its int8 form is "qconv2d"). aten: the
    ATen targets whose lowering rules may emit it. f32, i8, i16: the program
    ops it becomes in a float32, an int8 (with W4A8's _S4 forms) and an
    a16w8 program; empty where it has no kernel at that precision (it then
    runs in float32 between dequantize and quantize)."""

    name: str
    aten: tuple[str, ...] = ()
    f32: tuple[str, ...] = ()
    i8: tuple[str, ...] = ()
    i16: tuple[str, ...] = ()
