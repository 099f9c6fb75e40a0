"""Where a program and its arenas may go on a board: the memories an arena
may take (fastest first, less the stack), and the memory the program lies in."""

from __future__ import annotations

from ..boards import Board
from ..errors import CompileError
from ..plan import RegionSpec


# Bytes kept free in the data memory beside the stack for the runtime's and the
# application's own .data and .bss.
DATA_RESERVE = 4096


def arena_regions(board: Board, budgets: dict[str, int] | None = None, stack: int | None = None) -> list[RegionSpec]:
    """The board's memories that may hold arenas, fastest first, each with
    the bytes an arena may take there: its size, less the stack and a
    reserve in the data memory, capped by the user's budget. `stack`: the
    stack the firmware will have (--stack); default the board's stack_size,
    the most `torchmcu build` gives it (it sizes the stack from the
    computed worst case, usually far less)."""
    budgets = dict(budgets or {})
    stack = board.stack_size if stack is None else stack
    able = sorted((m for m in board.memories if "arena" in m.holds), key=lambda m: (m.speed, m.base))
    unknown = [k for k in budgets if k not in {m.name for m in able}]
    if unknown:
        raise CompileError(f"budget for {', '.join(unknown)}: board {board.name} has no such memory for "
                           f"activations; memories that can hold them: {', '.join(m.name for m in able)}")
    regions = []
    for m in able:
        room = m.size - (stack + DATA_RESERVE if m.name == board.data_memory else 0)
        if m.name in budgets:
            if budgets[m.name] < 0:
                raise CompileError(f"budget for {m.name} must be >= 0, got {budgets[m.name]}")
            room = min(room, budgets[m.name])
        if room > 0:
            regions.append(RegionSpec(m.name, m.speed, room))
    return regions


def choose_arena_memory(board: Board, size: int) -> str:
    """The fastest memory that may hold `size` bytes of arena."""
    for r in arena_regions(board):
        if size <= r.capacity:
            return r.name
    raise CompileError(f"no memory of board {board.name} has room for an arena of {size:,} bytes")


# Room left in the code memory for the runtime, kernels and startup when a
# program shares it.
CODE_RESERVE = 128 * 1024


def choose_program_memory(board: Board, size: int, quant: str = "float32",
                          reach: tuple[str, ...] | None = None) -> str:
    """The code memory when the program fits beside the code, else the
    fastest memory that may hold read-only data and has room. `reach`: the
    memories an accelerator reading the program in place can reach (the
    NPU's, for a program with Ethos-U command streams and weights)."""
    code = board.memory(board.code_memory)
    if size + CODE_RESERVE <= code.size and (reach is None or code.name in reach):
        return code.name
    others = sorted((m for m in board.memories if "rodata" in m.holds and m is not code
                     and (reach is None or m.name in reach)), key=lambda m: m.speed)
    if reach is not None and not others and code.name not in reach:
        raise CompileError(f"no memory of board {board.name} that can hold programs is reachable by its NPU "
                           f"({', '.join(reach)}): give one of them \"rodata\" in its holds")
    for m in others:
        if size <= m.size:
            return m.name
    hint = " (int8 quantization makes weights 4x smaller: --quant int8)" if quant == "float32" else ""
    raise CompileError(f"the program is {size:,} bytes but no memory of board {board.name} that can hold "
                       f"programs has room: {', '.join(f'{m.name} {m.size:,} B' for m in [code, *others])}{hint}")
