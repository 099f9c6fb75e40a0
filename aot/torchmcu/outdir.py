"""Where torchmcu writes: build directories, replaced whole, and the user's cache.

`replacing(OUT)` is how `compile` writes OUT: everything goes into a
temporary sibling, `.OUT.tmp-PID`, which then takes OUT's place (the old
directory renamed aside, the new one renamed in, the old one deleted). A
compile that fails or is interrupted (Ctrl-C) leaves the previous OUT as it
was; one that succeeds leaves nothing of it, so that no firmware.elf or
size.json of an earlier program survives beside a new one as if it matched.
A lock beside OUT (`.OUT.lock`, flock: the kernel releases it when the
process ends, however it ends) refuses a second compile into OUT while one
runs; the next compile removes what a killed one left. `holding(OUT)` takes
the same lock without replacing OUT, for a step that reads and adds to it.

`cache_root()`: what is built once and reused (the host runner, the fuzzer
and its corpus) goes to $TORCHMCU_CACHE_DIR, else $XDG_CACHE_HOME/torchmcu or
~/.cache/torchmcu: never into the source tree, which an installed package
may not have, or may not be allowed to write.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import TorchMCUError

__all__ = ["CACHE_ENV", "cache_root", "holding", "replacing"]

CACHE_ENV = "TORCHMCU_CACHE_DIR"
# A directory holding one of these was written by torchmcu: compile may replace it. Any other
# non-empty directory is the user's, and compile refuses to delete it.
MARKERS = ("model.json", "model.pte")


def cache_root() -> Path:
    """$TORCHMCU_CACHE_DIR, else $XDG_CACHE_HOME/torchmcu or ~/.cache/torchmcu
    (read at each call: tests and tools point it elsewhere)."""
    value = os.environ.get(CACHE_ENV)
    if value:
        return Path(value).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "torchmcu"


def _lock_path(real: Path) -> Path:
    return real.parent / f".{real.name}.lock"


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    except OSError:
        text = ""
    return f"pid {text}" if text.isdigit() else "another process"


def _lock(real: Path, shown: Path) -> tuple[int, Path]:
    """Take the lock of directory `real`, or refuse naming the process that holds it."""
    path = _lock_path(real)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise TorchMCUError(f"{shown}: another compile or build of this directory is running ({holder}); "
                                "wait for it to finish or choose another directory") from None
        # The holder deletes the file when it releases it: a lock taken on a file no longer at
        # `path` guards nothing (a third process may have created and locked a new one). Retry.
        try:
            current = os.stat(path)
        except FileNotFoundError:
            current = None
        if current is not None and os.path.samestat(os.fstat(fd), current):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            return fd, path
        os.close(fd)


def _unlock(fd: int, path: Path) -> None:
    try:
        path.unlink()  # while still held: whoever waits on this file retries on a new one
    except FileNotFoundError:
        pass
    os.close(fd)


def _leftovers(real: Path) -> list[Path]:
    """Temporary and set-aside directories of compiles into `real` that were
    killed (only the lock's holder calls this: nobody else is using them)."""
    pattern = re.compile(rf"\.{re.escape(real.name)}\.(tmp|old)-\d+")
    try:
        return sorted(p for p in real.parent.iterdir() if pattern.fullmatch(p.name) and p.is_dir())
    except FileNotFoundError:
        return []


def _recover(real: Path) -> None:
    """A compile killed between its two renames left no `real`, and the
    previous directory set aside: put it back. Then delete the leftovers."""
    stale = _leftovers(real)
    olds = [p for p in stale if ".old-" in p.name]
    if not real.exists() and olds:
        newest = max(olds, key=lambda p: p.stat().st_mtime)
        os.rename(newest, real)
        stale.remove(newest)
    for p in stale:
        shutil.rmtree(p, ignore_errors=True)


def _check_target(real: Path, shown: Path) -> None:
    if real.exists() and not real.is_dir():
        raise TorchMCUError(f"{shown} exists and is not a directory")
    try:
        cwd = Path.cwd().resolve()
    except FileNotFoundError:
        cwd = None
    if cwd is not None and (cwd == real or real in cwd.parents):
        raise TorchMCUError(f"{shown} is the current directory or holds it: compile replaces the whole directory; "
                            "run it from elsewhere or choose another directory")


def _check_replaceable(real: Path, shown: Path) -> None:
    if real.is_dir() and any(real.iterdir()) and not any((real / m).is_file() for m in MARKERS):
        raise TorchMCUError(f"{shown} is not empty and not a torchmcu build directory (no "
                            f"{' or '.join(MARKERS)}): compile replaces the whole directory; choose a new or "
                            "empty one")


def _swap(tmp: Path, real: Path) -> None:
    """Put `tmp` in `real`'s place. Between the two renames `real` is missing,
    never half-written; a process killed there is repaired by _recover."""
    old = None
    if real.exists():
        os.chmod(tmp, stat.S_IMODE(real.stat().st_mode))  # the user's permissions on the directory stay
        old = real.parent / f".{real.name}.old-{os.getpid()}"
        os.rename(real, old)
    try:
        os.rename(tmp, real)
    except BaseException:
        if old is not None:
            os.rename(old, real)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextmanager
def replacing(out_dir: str | Path) -> Iterator[Path]:
    """Yield an empty temporary directory beside `out_dir`; when the block
    ends without an exception, it replaces `out_dir` (created if missing).
    On any exception, KeyboardInterrupt included, it is deleted and
    `out_dir` stays as it was. A second `replacing` of the same directory
    while this one runs raises TorchMCUError."""
    shown = Path(out_dir)
    real = Path(os.path.realpath(shown))  # a symlink to a directory: the directory is replaced, the link stays
    _check_target(real, shown)
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TorchMCUError(f"cannot create {shown.parent}: {e.strerror}") from None
    try:
        fd, lock = _lock(real, shown)
    except PermissionError:
        raise TorchMCUError(f"cannot write beside {shown} (in {real.parent}): permission denied") from None
    try:
        _recover(real)
        _check_replaceable(real, shown)
        tmp = real.parent / f".{real.name}.tmp-{os.getpid()}"
        tmp.mkdir()
        try:
            yield tmp
            _swap(tmp, real)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    finally:
        _unlock(fd, lock)


@contextmanager
def holding(out_dir: str | Path) -> Iterator[Path]:
    """Hold `out_dir`'s lock without replacing it: for a step that reads a
    compiled directory and writes into it (a firmware build), so that no
    compile swaps the directory under it halfway. Raises TorchMCUError
    while a compile (or another holder) has it."""
    shown = Path(out_dir)
    real = Path(os.path.realpath(shown))
    if not real.is_dir():
        raise TorchMCUError(f"{shown} is not a directory")
    fd, lock = _lock(real, shown)
    try:
        yield shown
    finally:
        _unlock(fd, lock)
