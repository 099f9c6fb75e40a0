"""Exceptions raised by the user's own code (their model file, its make()
function, their module's forward) told as theirs: one line with their
file:line from the traceback, not torchmcu's or torch's frames.

    torchmcu: error: your make() in model.py raised ValueError: bad size (at model.py:12)

TORCHMCU_TRACEBACK=1 makes the command line re-raise, for the whole traceback.
"""

from __future__ import annotations

import os
import sysconfig
import traceback
from pathlib import Path

from ..errors import TorchMCUError

_PACKAGE = str(Path(__file__).resolve().parents[1]) + os.sep  # torchmcu itself
_STDLIB = str(Path(sysconfig.get_paths()["stdlib"]).resolve()) + os.sep
_MAX_CHARS = 300


class UserCodeError(TorchMCUError):
    """The user's code raised: `where` is their innermost file:line, `cause` the exception."""

    def __init__(self, message: str, where: str | None, cause: BaseException) -> None:
        self.where, self.cause = where, cause
        super().__init__(message)


def _library(filename: str) -> bool:
    f = str(Path(filename).resolve()) if not filename.startswith("<") else filename
    return (filename.startswith("<") or f.startswith((_PACKAGE, _STDLIB))
            or "site-packages" in f or "dist-packages" in f or "/torch/" in f)


def user_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    """The traceback's frames in the user's own files, outermost first."""
    return [f for f in traceback.extract_tb(exc.__traceback__) if not _library(f.filename)]


def one_line(text: str) -> str:
    """A message's first line, cut at a length one line of a terminal holds;
    cut text says where the rest is."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    if len(first) > _MAX_CHARS:
        first = first[:_MAX_CHARS - 3] + "..."
    if len(lines) > 1 or first.endswith("..."):
        first += " [TORCHMCU_TRACEBACK=1 shows all of it]"
    return first


def location(exc: BaseException) -> str | None:
    """`model.py:12`: the innermost frame in the user's files (the path as
    short as it is clear: relative to the working directory when inside it)."""
    frames = user_frames(exc)
    if not frames:
        return None
    f = frames[-1]
    path = Path(f.filename)
    try:
        shown = str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        shown = str(path)
    return f"{shown}:{f.lineno}"


def raised_by_user(exc: BaseException) -> bool:
    """The innermost frame is the user's: their own code raised it (not a
    library they called)."""
    tb = traceback.extract_tb(exc.__traceback__)
    return bool(tb) and not _library(tb[-1].filename)


def user_error(what: str, exc: BaseException) -> UserCodeError:
    """`what` (e.g. "your make() in model.py") raised `exc`: one line."""
    where = location(exc)
    text = one_line(str(exc))
    message = f"{what} raised {type(exc).__name__}" + (f": {text}" if text else "")
    message += f" (at {where})" if where else ""
    return UserCodeError(message, where, exc)
