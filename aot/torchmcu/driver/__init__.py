"""The compile driver's parts: the options (options.py), the stages over one
context record (stages.py), the final record the writers read
(compiled.py), and where a program and its arenas may go (memory.py).
torchmcu.compiler runs them and writes the build directory."""

from __future__ import annotations

from .compiled import Compiled
from .memory import arena_regions, choose_arena_memory, choose_program_memory
from .options import QUANT_SCHEMES, CompileOptions
from .stages import STAGES, Context, Stage, run, stage_list

__all__ = ["QUANT_SCHEMES", "STAGES", "CompileOptions", "Compiled", "Context", "Stage", "arena_regions",
           "choose_arena_memory", "choose_program_memory", "run", "stage_list"]
