"""The command line's failures: each is one line on stderr and an exit
status, never a traceback (TORCHMCU_TRACEBACK=1 prints the traceback before
that line; the exit status stays the same). Also the user's files read as arrays (--input, --calibration) and the
build directory checked, each refused in one line naming it.

Exit statuses (`torchmcu run --help` lists them, the firmware's by name):
0 ok, 1 a --check mismatch, 2 bad input or usage, 3 an internal error (a
torchmcu bug), 4 the firmware failed without a named code, 130 interrupted,
141 stdout closed early (`| head`), and the firmware's own named codes
(sim/status.py: error.h, app.h, the board's fault codes) as they are.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .errors import TorchMCUError
from .frontend.user_code import one_line
from .sim.base import IoBlobTooLarge, SimulatorNotFound


def read_arrays(path: str, flag: str) -> dict[str, np.ndarray]:
    """The arrays of a user's .npy (one, named by the file's stem) or .npz
    file; a missing, unreadable or foreign file is one line naming it."""
    p = Path(path)
    if not p.is_file():
        raise TorchMCUError(f"{flag} {path}: no such file" + (" (a directory)" if p.is_dir() else ""))
    try:
        data = np.load(p)  # no pickles: a file of objects is refused, not run
        if isinstance(data, np.ndarray):
            arrays = {p.stem: data}
        else:
            with data:
                arrays = {k: data[k] for k in data.files}
    except Exception as e:  # numpy, zipfile and pickle each raise their own types for a foreign file
        why = "no NumPy header: numpy would read it as pickled objects, which torchmcu does not load" \
            if "pickled" in str(e) else f"{type(e).__name__}: {one_line(str(e))}"
        raise TorchMCUError(f"{flag} {path} is not a NumPy .npy or .npz file ({why})") from None
    if not arrays:
        raise TorchMCUError(f"{flag} {path} holds no arrays")
    for name, a in arrays.items():
        if a.dtype.kind not in "biuf":
            raise TorchMCUError(f"{flag} {path}: array {name!r} is {a.dtype}, not numbers (float32 expected)")
    return arrays


def check_calibration(path: str, arrays: dict[str, np.ndarray], model: Any,
                      example: tuple[Any, ...]) -> dict[str, np.ndarray]:
    """--calibration (read_arrays read it before the model loads, so a bad
    file costs no model load): an .npz with one array per input (a
    single-input model: its one array, under any name), or an .npy for a single-input
    model; finite values only, as the observers' ranges would otherwise be
    NaN or infinite."""
    if path.endswith(".npy") and len(example) != 1:
        raise TorchMCUError(f"--calibration {path} is one array (.npy) but the model takes {len(example)} inputs: "
                            "give an .npz with one array per input, in order (np.savez(path, x=..., y=...))")
    names = _input_names(model, len(example))
    if len(arrays) != len(example):
        raise TorchMCUError(f"--calibration {path} has {len(arrays)} arrays ({', '.join(arrays)}) but the model takes "
                            f"{len(example)} input(s) ({', '.join(names)}): one array per input, in order")
    used = list(arrays.items())
    for i, (key, a) in enumerate(used):
        if a.dtype.kind != "f":
            continue
        nan, inf = int(np.isnan(a).sum()), int(np.isinf(a).sum())
        if nan or inf:
            what = " and ".join(f"{n} {kind}" for n, kind in ((nan, "NaN"), (inf, "inf")) if n)
            who = f"input {i} ({names[i]})" if i < len(names) else f"input {i}"
            raise TorchMCUError(f"--calibration {path}: array {key!r}, for {who}, has {what} of {a.size} values; "
                                "calibration needs finite values")
    return arrays


def _input_names(model: Any, n: int) -> list[str]:
    """The forward's parameter names, for messages (x, h, c)."""
    import inspect

    try:
        params = [p.name for p in inspect.signature(model.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError, AttributeError):
        params = []
    return params[:n] if len(params) >= n else [f"input {i}" for i in range(n)]


def require_build_dir(out_dir: str) -> None:
    """A directory `torchmcu compile` wrote, or one line saying what it is instead."""
    d = Path(out_dir)
    if not d.exists():
        raise TorchMCUError(f"{out_dir} does not exist: pass a build directory written by "
                            "`torchmcu compile ... -o DIR`")
    if not d.is_dir():
        raise TorchMCUError(f"{out_dir} is a file, not a build directory (one written by "
                            "`torchmcu compile ... -o DIR`)")
    if not (d / "model.json").is_file():
        raise TorchMCUError(f"{out_dir} is not a compiled model (no model.json); run `torchmcu compile ... -o "
                            f"{out_dir}` first")


# `run`'s exit statuses of its own; the firmware's named codes (sim/status.py) pass through.
EXIT_CHECK_FAILED, EXIT_USAGE, EXIT_INTERNAL, EXIT_FIRMWARE_OTHER = 1, 2, 3, 4
EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 130, 141  # 128 + SIGINT, 128 + SIGPIPE: what a shell shows for either


def firmware_failure(status: int, raw: str) -> str:
    """One line naming the firmware's code; a failure with no name (a crash,
    a sanitizer's report) also shows the end of its output, which says what."""
    import re

    from .sim.status import describe

    name = describe(status)
    load = re.search(r"^tmcu: load status=(\d+)", raw, re.MULTILINE)
    when = " at load" if load and int(load.group(1)) == status else ""
    if name is not None:
        return f"torchmcu: firmware failed{when}: {name}"
    return f"torchmcu: firmware failed with status {status}, none of its codes (a crash or a sanitizer report?); " \
           f"its output:\n{raw[-2000:]}"


def run_status(firmware_status: int) -> int:
    """The firmware's named codes from 0x10 up pass through as run's exit
    status; any other failure (Internal, 0x01, a crash, a sanitizer's exit)
    is 4, kept apart from 1 (check failed) and 2 (bad input)."""
    from .sim.status import describe

    return firmware_status if firmware_status >= 0x10 and describe(firmware_status) else EXIT_FIRMWARE_OTHER


def run_epilog() -> str:
    from .sim.base import EXIT_CODES
    from .sim.status import app_statuses, runtime_errors

    codes = {**runtime_errors(), **app_statuses()}
    lines = ["exit status:",
             "  0    the model ran (and --check, if given, passed)",
             "  1    --check found a mismatch (the first one is named)",
             "  2    bad input or usage: one line `torchmcu: error: ...`",
             "  3    internal error, a torchmcu bug (TORCHMCU_TRACEBACK=1 shows the traceback)",
             "  4    the firmware failed without a named code: Internal (0x01), a crash, a sanitizer report",
             "  130  interrupted (Ctrl-C)",
             "  141  standard output closed early (e.g. piped into head)",
             "  the firmware's own codes, printed by name (`torchmcu: firmware failed: NAME (0xNN): ...`):"]
    lines += [f"  {c:<4} {name} (0x{c:02x}): {meaning}" for c, (name, meaning) in sorted(codes.items()) if c >= 0x10]
    lines += [f"  {c:<4} {name} (the board's fault handler)" for c, name in sorted(EXIT_CODES.items())]
    return "\n".join(lines)


def guarded(command: Callable[[], int]) -> int:
    """Runs the command: its status, or for an exception one line on stderr and
    the exit status for its kind (run_epilog lists them)."""
    traceback = os.environ.get("TORCHMCU_TRACEBACK", "") not in ("", "0")

    def show() -> None:  # TORCHMCU_TRACEBACK=1: the whole traceback, then the same line and exit status
        if traceback:
            import traceback as tb

            tb.print_exc()
    try:
        status = command()
        sys.stdout.flush()  # a closed pipe shows here, not at the interpreter's exit
        return status
    except KeyboardInterrupt:
        print("\ntorchmcu: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except (TorchMCUError, SimulatorNotFound, IoBlobTooLarge) as e:
        show()
        print(f"torchmcu: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:  # the machine's refusal (permissions, a full disk, a file gone): not a torchmcu bug
        show()
        where = f": {e.filename}" if e.filename else ""
        print(f"torchmcu: error: {e.strerror or type(e).__name__}{where}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:  # a torchmcu bug: one line, and how to see the rest
        show()
        print(f"torchmcu: internal error (a torchmcu bug): {type(e).__name__}: {one_line(str(e))}; "
              + ("please report it with the traceback above" if traceback else
                 "TORCHMCU_TRACEBACK=1 shows the traceback (please report it)"), file=sys.stderr)
        return EXIT_INTERNAL


OWN_WARNING = "torchmcu: "  # how torchmcu's own Python warnings begin (warnings.warn(f"torchmcu: ..."))


@contextlib.contextmanager
def summarized_warnings(verbose: bool, hint: str = "--verbose shows them") -> Iterator[None]:
    """The Python warnings a command raises, so that its last line stays its
    own (the result, or the one-line error). torchmcu's own warnings are one
    line each as they come (`torchmcu: warning: ...`); the others (torch's,
    torchao's, the model's libraries', often tens of lines about their own
    internals) are counted, and one line at the end says how many and from
    whom; `verbose` shows each as it comes instead. The filters stay the
    user's (PYTHONWARNINGS=ignore silences both)."""
    others: dict[str, str] = {}  # one line per distinct warning -> the package that raised it

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        text = str(message)
        if text.startswith(OWN_WARNING):
            print(f"torchmcu: warning: {' '.join(text[len(OWN_WARNING):].split())}", file=sys.stderr, flush=True)
            return
        key = f"{category.__name__}: {' '.join(text.split())}"
        if key in others:
            return
        others[key] = _raiser(filename)
        if verbose:
            print(f"torchmcu: warning from {others[key]} ({filename}:{lineno}): {key}", file=sys.stderr, flush=True)

    with warnings.catch_warnings():
        warnings.showwarning = show
        try:
            yield
        finally:
            if others and not verbose:
                who = ", ".join(sorted(set(others.values())))
                print(f"torchmcu: {len(others)} warning{'s' if len(others) > 1 else ''} from {who} not shown "
                      f"({hint})", file=sys.stderr, flush=True)


def _raiser(filename: str) -> str:
    """Who called warnings.warn (torch, torchao, timm, your model file): the
    package of the innermost frame outside the warnings machinery; else that
    of the file the warning names (its stacklevel may point anywhere)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__") in ("warnings", __name__):
        frame = frame.f_back
    name = str(frame.f_globals.get("__name__", "")) if frame is not None else ""
    if name.startswith("torchmcu_user_"):  # capture.load_entry's name for the user's model file
        return "your model file"
    if name and name != "__main__":
        return name.split(".")[0]
    parts = Path(filename).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts and parts.index(marker) + 1 < len(parts):
            return parts[parts.index(marker) + 1].removesuffix(".py")
    return Path(filename).name


def _quiet_stdout() -> None:
    """After a closed pipe (`torchmcu inspect ... | head`): stdout to devnull,
    so the interpreter's last flush raises nothing either (Python's own idiom)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is no file (captured): nothing to quiet
        pass


def program_source_differs(out_dir: str) -> str | None:
    """Whether model_pte.c (what the firmware links) still holds model.pte
    (what the host runner, inspect and the reference read): a file changed
    after compile gives two programs."""
    from .program import serialize
    from .sim.runner import load_meta

    d = Path(out_dir)
    if not ((d / "model.pte").is_file() and (d / "model_pte.c").is_file()):
        return None
    try:
        _, source = serialize.model_pte_sources((d / "model.pte").read_bytes(), str(load_meta(d).get("symbol", "model")))
    except Exception:  # not a program any more: it differs
        source = None
    if source == (d / "model_pte.c").read_text():
        return None
    return (f"{d}/model.pte and model_pte.c differ (one changed after compile): the firmware links model_pte.c, "
            "while `run --sim host`, `inspect` and --check's reference read model.pte; compile again to make them one")


def load_inputs(paths: list[str], out_dir: str) -> list[np.ndarray]:
    if not paths:
        return list(read_arrays(str(Path(out_dir) / "example_inputs.npz"), "the example inputs").values())
    arrays: list[np.ndarray] = []
    for p in paths:
        for name, a in read_arrays(p, "--input").items():
            if a.size == 0:
                raise TorchMCUError(f"--input {p}: array {name!r} has shape {list(a.shape)}: no samples")
            bad = int(np.count_nonzero(~np.isfinite(a))) if a.dtype.kind == "f" else 0
            if bad:  # the firmware would compute on them, and no check could say anything of the result
                raise TorchMCUError(f"--input {p}: array {name!r} has {bad} NaN or inf of {a.size} values; "
                                    "inputs must be finite")
            arrays.append(a)
    return arrays
