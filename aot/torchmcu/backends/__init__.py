"""The backends (base.py: the interface), found by folder: every package
here with a backend.py defining BACKEND is one. A board lists the ones it uses
(`backends = [...]` in its file); otherwise every backend that applies to it
does, by priority. The portable kernels always come last: they run what no
other backend took.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil

from ..boards import Board
from ..errors import CompileError
from .base import Backend, BuildParts, CompileContext

__all__ = ["Backend", "BuildParts", "CompileContext", "all_backends", "by_kernel_set", "get", "select"]

_LOADED: dict[str, Backend] | None = None


def all_backends() -> dict[str, Backend]:
    """Every backend, by name, in priority order (delegates first, portable last)."""
    global _LOADED
    if _LOADED is None:
        found = []
        for m in pkgutil.iter_modules(__path__):
            if m.ispkg and importlib.util.find_spec(f"{__name__}.{m.name}.backend") is not None:
                backend = getattr(importlib.import_module(f"{__name__}.{m.name}.backend"), "BACKEND", None)
                if isinstance(backend, Backend):
                    found.append(backend)
        _LOADED = {b.name: b for b in sorted(found, key=lambda b: (b.priority, b.name))}
    return _LOADED


def get(name: str) -> Backend:
    backends = all_backends()
    if name not in backends:
        raise CompileError(f"unknown backend {name!r}; known: {', '.join(backends)}")
    return backends[name]


def select(board: Board, names: list[str] | None = None) -> list[Backend]:
    """The backends a compile for `board` uses: `names` (the command line's
    --backends) or the board's list, else all that apply; portable last."""
    chosen = [get(n) for n in (names or board.backends)] if (names or board.backends) else [
        b for b in all_backends().values() if b.applies(board)]
    for b in chosen:
        if not b.applies(board):
            raise CompileError(f"backend {b.name} cannot run on board {board.name}")
    portable = get("portable")
    return [b for b in chosen if b is not portable] + [portable]


def by_kernel_set(name: str) -> Backend:
    """The backend whose kernels `torchmcu build --kernels NAME` selects."""
    sets = {b.kernel_set: b for b in all_backends().values() if b.kernel_set}
    if name not in sets:
        raise KeyError(name)
    return sets[name]
