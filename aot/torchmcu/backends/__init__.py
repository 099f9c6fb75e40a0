"""The backends (base.py: the interface), found by folder: every package
here with a backend.py defining BACKEND is one, a Backend with a compile
half and a build half. A board lists the ones it uses (`backends = [...]`
in its file); otherwise every backend that applies to it does, by priority.
The portable kernels always come last: they run what no other backend took.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil

from ..boards import Board
from ..errors import CompileError
from .base import Backend, BuildBackend, BuildParts, CompileBackend, CompileContext

__all__ = ["Backend", "BuildBackend", "BuildParts", "CompileBackend", "CompileContext", "all_backends", "builds",
           "by_delegate_code", "by_kernel_set", "firmware_builder", "get", "select"]

_LOADED: dict[str, Backend] | None = None


def _backends() -> dict[str, Backend]:
    """Every backend, by name, in priority order (delegates first, portable last)."""
    global _LOADED
    if _LOADED is None:
        found = []
        for m in pkgutil.iter_modules(__path__):
            if m.ispkg and importlib.util.find_spec(f"{__name__}.{m.name}.backend") is not None:
                backend = getattr(importlib.import_module(f"{__name__}.{m.name}.backend"), "BACKEND", None)
                if isinstance(backend, Backend):
                    found.append(backend)
        _LOADED = {b.name: b for b in sorted(found, key=lambda b: (b.compile.priority, b.name))}
    return _LOADED


def all_backends() -> dict[str, CompileBackend]:
    """Every backend's compile half, by name, in priority order (delegates first, portable last)."""
    return {name: b.compile for name, b in _backends().items()}


def builds() -> dict[str, BuildBackend]:
    """Every backend's build half, by name, in the same order."""
    return {name: b.build for name, b in _backends().items()}


def get(name: str) -> CompileBackend:
    backends = all_backends()
    if name not in backends:
        raise CompileError(f"unknown backend {name!r}; known: {', '.join(backends)}")
    return backends[name]


def select(board: Board, names: list[str] | None = None) -> list[CompileBackend]:
    """The backends a compile for `board` uses: `names` (the command line's
    --backends) or the board's list, else all that apply; portable last."""
    chosen = [get(n) for n in (names or board.backends)] if (names or board.backends) else [
        b for b in all_backends().values() if b.applies(board)]
    for b in chosen:
        if not b.applies(board):
            raise CompileError(f"backend {b.name} cannot run on board {board.name}")
    portable = get("portable")
    return [b for b in chosen if b is not portable] + [portable]


def by_kernel_set(name: str) -> BuildBackend:
    """The build half whose kernels `torchmcu build --kernels NAME` selects."""
    sets = {b.kernel_set: b for b in builds().values() if b.kernel_set}
    if name not in sets:
        raise KeyError(name)
    return sets[name]


def by_delegate_code(code: str) -> BuildBackend:
    """The build half of the delegate whose calls have op code `code`."""
    return next(b for b in builds().values() if b.delegate_code == code)


def firmware_builder(board: Board) -> BuildBackend | None:
    """The build half that builds the whole firmware for `board` (its own toolchain), if one does."""
    return next((b for b in builds().values() if b.builds_firmware(board)), None)
