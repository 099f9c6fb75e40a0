"""The host runner: the runtime and every portable kernel built for this
machine (g++, optionally with AddressSanitizer and UBSan), for tests and
`torchmcu run --sim host`."""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..boards import Board
from ..errors import BuildError
from ..outdir import cache_root
from ..sources import FIRMWARE, runtime_sources
from ..toolchain import require
from .kernel_table import available_kernels, kernel_table_source

VERIFY_LEVELS = ("full", "minimal")


def build_host_runner(sanitize: bool = True, cache_dir: str | Path | None = None,
                      ethos_u: Board | None = None, verify: str = "full") -> Path:
    """The host runner `tmcu_host PROGRAM.pte IO.bin`, every kernel linked,
    cached by the hash of its sources and flags in `cache_dir` (default the
    user's cache: outdir.cache_root()/host). With `ethos_u` (a board with
    an NPU), also the Ethos-U delegate's load-time check for that NPU, whose
    invoke reports that the host has none (firmware/host/ethos_u_host.cc):
    for tests of the delegate's validation. Without, a program with Ethos-U
    calls is refused at load (KernelMissing). `verify` as build_firmware's."""
    if verify not in VERIFY_LEVELS:
        raise BuildError(f"unknown verification {verify!r}; choose one of {', '.join(VERIFY_LEVELS)}")
    cxx = require("g++")
    sources = [*runtime_sources(), FIRMWARE / "host" / "main_host.cc", FIRMWARE / "host" / "platform_host.cc"]
    flags = ["-std=c++17", "-O1", "-g", "-fno-rtti", "-fno-exceptions", "-Wall", "-Wextra", "-Werror",
             f"-I{FIRMWARE}", f"-I{FIRMWARE / 'include'}"]
    if sanitize:
        flags += ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
    if verify == "minimal":
        flags.append("-DTORCHMCU_VERIFY=0")
    codes = None
    if ethos_u is not None:
        if ethos_u.npu is None:
            raise BuildError(f"board {ethos_u.name} has no NPU")
        sources += [FIRMWARE / "delegates" / "ethos_u" / "blob.cc", FIRMWARE / "host" / "ethos_u_host.cc"]
        flags += [f"-D{k}={v}" for k, v in ethos_u.npu.defines.items()]
        codes = [*available_kernels(), "ETHOS_U"]
    table = kernel_table_source(codes)
    digest = hashlib.sha256()
    for s in sources:
        digest.update(s.read_bytes())
    for h in sorted(FIRMWARE.rglob("*.h")):
        digest.update(h.read_bytes())
    digest.update(table.encode())
    digest.update(" ".join(flags).encode())
    cache = Path(cache_dir) if cache_dir else cache_root() / "host"
    variant = ("_ethos_u" if ethos_u is not None else "") + ("_minimal" if verify == "minimal" else "")
    key = digest.hexdigest()[:16]
    exe = cache / f"tmcu_host{variant}-{key}"
    if exe.exists():
        return exe
    cache.mkdir(parents=True, exist_ok=True)
    # Processes that need the same runner at once (test workers, parallel CLI runs) build it once: the
    # first holds the key's lock while it builds, the others wait for it and then take its runner.
    with open(cache / f".tmcu_host{variant}-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not exe.exists():
            _build(cxx, flags, sources, table, cache / f"kernel_table{variant or '_all'}-{key}.cc", exe)
    return exe


def _build(cxx: str, flags: list[str], sources: list[Path], table: str, table_src: Path, exe: Path) -> None:
    # The cache is shared by every process and source tree of this user: files are named by the hash
    # and renamed in whole from a file of this process's own, so that none reads another's half-written one.
    # Each source compiles on its own core, then one link.
    _write_whole(table_src, table)
    tmp = exe.with_name(f"{exe.name}.{os.getpid()}.tmp")
    with tempfile.TemporaryDirectory(prefix=f"{exe.name}.", dir=exe.parent) as obj_dir:
        objs = [Path(obj_dir) / f"{k}_{src.stem}.o" for k, src in enumerate([*sources, table_src])]

        def run(cmd: list[str]) -> subprocess.CompletedProcess:
            return subprocess.run(cmd, capture_output=True, text=True)

        try:
            with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
                procs = list(pool.map(run, ([cxx, *flags, "-c", str(src), "-o", str(obj)]
                                            for src, obj in zip([*sources, table_src], objs))))
            if all(p.returncode == 0 for p in procs):
                procs.append(run([cxx, *flags, *map(str, objs), "-o", str(tmp)]))
            failed = [p for p in procs if p.returncode != 0]
            if failed:
                raise BuildError(f"host runner build failed:\n{failed[0].stderr}")
            tmp.replace(exe)
        finally:
            tmp.unlink(missing_ok=True)


def _write_whole(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)
