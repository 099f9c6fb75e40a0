"""What `torchmcu boards` prints of a board: its core and extensions, its
memories and layout, and the simulators that run it."""

from __future__ import annotations

from typing import Any

from .boards import BOARDS_DIR

__all__ = ["core_summary", "describe_board"]


def _bytes_text(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % (scale // 16 or 1) == 0:
            v = n / scale
            return f"{v:g} {unit}"
    return f"{n:,} B"


def core_summary(board: Any) -> str:
    """The core and its extensions, e.g. "Cortex-M55, 32 MHz; FPU (auto, hard float ABI), DSP, MVE int+float"."""
    c = board.core
    if c.arch == "xtensa":
        return f"Xtensa {c.cpu.upper()} DSP, {c.clock_hz / 1e6:g} MHz" + (
            f"; core configuration {c.xtensa_core}" if c.xtensa_core else "")
    name = c.cpu.replace("cortex-m", "Cortex-M").replace("plus", "+")
    ext = []
    if c.has_fpu:
        ext.append(f"FPU ({c.fpu}, {c.float_abi} float ABI)")
    if c.dsp:
        ext.append("DSP")
    if c.mve != "none":
        ext.append({"int": "MVE int", "float": "MVE int+float"}[c.mve])
    if board.npu is not None:
        ext.append(f"NPU {board.npu.accelerator}")
    return f"{name}, {c.clock_hz / 1e6:g} MHz; " + (", ".join(ext) if ext else "no FPU, DSP or MVE")


def describe_board(board: Any) -> str:
    """`torchmcu boards`: the board, its core and extensions, and each memory
    (name, base, size, what it holds, on- or off-chip) and the layout."""
    where = "" if board.source is None or board.source.parent == BOARDS_DIR else f" ({board.source})"
    lines = [f"{board.name}{where}: {board.description}" if board.description else f"{board.name}{where}",
             f"  core     {core_summary(board)}"]
    for m in sorted(board.memories, key=lambda m: m.base):
        chip = "off-chip" if m.external else "on-chip"
        lines.append(f"  memory   {m.name:<9} 0x{m.base:08x}  {_bytes_text(m.size):>10}  {m.kind:<4} speed {m.speed}  "
                     f"{chip:<8}  holds {', '.join(m.holds)}"
                     + (f"  {m.wait_states} wait states ({m.line_bytes}-byte reads)" if m.wait_states else ""))
    lines.append(f"  layout   code in {board.code_memory}; data, bss and stack in {board.data_memory} "
                 + (f"(stack at most {_bytes_text(board.stack_size)}; `torchmcu build` sizes it)" if board.core.arch == "cortex-m"
                    else f"(stack {_bytes_text(board.stack_size)})"))
    stand_in = (f" (a stand-in running the core at {board.qemu_clock_hz / 1e6:g} MHz; cycle estimates apply the "
                f"board's {board.clock_hz / 1e6:g} MHz and wait states)" if getattr(board, "qemu_stand_in", False) else "")
    lines.append(f"  qemu     {board.qemu_machine}{stand_in}" if board.qemu_machine
                 else "  qemu     none (QEMU does not run it)")
    if board.renode is not None:
        lines.append(f"  renode   {board.renode.platform} (UART {board.renode.uart}; `torchmcu run DIR --sim renode`)")
    return "\n".join(lines)
