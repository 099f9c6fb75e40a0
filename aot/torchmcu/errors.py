"""Errors a user sees: each names what failed and where in their code."""

from __future__ import annotations


class TorchMCUError(Exception):
    """Base class: the CLI prints these without a traceback."""


class CompileError(TorchMCUError):
    """A model construct the compiler cannot lower.

    `op` is the ATen op, `shapes` its operand shapes, `source` the user's
    source line (from the exported node's stack trace) when known.
    """

    def __init__(self, message: str, op: str | None = None, shapes: list | None = None,
                 source: str | None = None) -> None:
        self.op, self.shapes, self.source = op, shapes, source
        parts = [message]
        if op is not None:
            parts.append(f"  op: {op}")
        if shapes:
            parts.append(f"  shapes: {', '.join(str(s) for s in shapes)}")
        if source:
            parts.append(f"  at: {source}")
        super().__init__("\n".join(parts))


class BuildError(TorchMCUError):
    """The firmware build failed (a tool missing, or the compiler refused)."""


class SimError(TorchMCUError):
    """A simulator is missing, timed out, or the firmware reported a failure."""
