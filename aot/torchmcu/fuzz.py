"""Fuzzing the runtime's program loader with libFuzzer.

`build_fuzzer()` builds firmware/host/fuzz_program.cc with clang++
(-fsanitize=fuzzer,address,undefined) over the runtime and every portable
kernel; `make_corpus(dir)` compiles a few small float and int8 programs into
seed files; `run_fuzzer(seconds, corpus, artifacts)` runs it and reads
libFuzzer's output back: executions, coverage, and any crash artifact with
the sanitizer's summary.

    python -m torchmcu.fuzz --seconds 600      # what `make fuzz` runs

A crash artifact reproduces with `FUZZER ARTIFACT` (the binary runs each file
argument once); `replay()` does the same from Python.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

from .builder import kernel_table
from .errors import BuildError, TorchMCUError
from .outdir import cache_root
from .sources import FIRMWARE, REPO, runtime_sources

FUZZ_SOURCE = FIRMWARE / "host" / "fuzz_program.cc"
CXX_ENV = "TORCHMCU_FUZZ_CXX"
FLAGS = ["-std=c++17", "-O1", "-g", "-fno-rtti", "-fno-exceptions", "-Wall", "-Wextra",
         "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer",
         f"-I{FIRMWARE}", f"-I{FIRMWARE / 'include'}"]
# The runtime's own switch for trusted programs: the runtime loads with
# Verification::kMinimal only (no verifier, no operand or kernel checks). A
# fuzzer built with it must crash (the tests check).
UNVERIFIED = ("TORCHMCU_VERIFY=0",)
ARTIFACT_KINDS = ("crash", "leak", "timeout", "oom")


# ---------------------------------------------------------------------------------------------
# The toolchain


def _clang() -> str | None:
    for name in ([os.environ[CXX_ENV]] if os.environ.get(CXX_ENV) else
                 ["clang++", *(f"clang++-{v}" for v in range(19, 13, -1))]):
        path = shutil.which(name)
        if path:
            return path
    return None


@functools.lru_cache(maxsize=None)
def toolchain_problem() -> str | None:
    """Why no fuzzer can be built here (None when one can): clang++ missing,
    or its libFuzzer / sanitizer runtimes (Debian: libclang-rt-14-dev)."""
    cxx = _clang()
    if cxx is None:
        return (f"clang++ not found (set {CXX_ENV}, or install it: Debian `apt-get install clang "
                "libclang-rt-14-dev`, or `make setup`)")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.cc"
        src.write_text('#include <cstddef>\n#include <cstdint>\nextern "C" int LLVMFuzzerTestOneInput('
                       "const uint8_t*, size_t) { return 0; }\n")
        proc = subprocess.run([cxx, "-fsanitize=fuzzer,address,undefined", str(src), "-o", str(Path(tmp) / "probe")],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            return (f"{cxx} cannot link a libFuzzer target (the libFuzzer/sanitizer runtime is missing? "
                    f"Debian: `apt-get install libclang-rt-14-dev`):\n{proc.stderr.strip()[-600:]}")
    return None


def _require_toolchain() -> str:
    problem = toolchain_problem()
    if problem:
        raise BuildError(problem)
    cxx = _clang()
    assert cxx is not None
    return cxx


# ---------------------------------------------------------------------------------------------
# The build


def default_cache() -> Path:
    """Where the fuzzer's build, and by default its corpus and artifacts, go:
    the user's cache (outdir.cache_root()/fuzz), not the source tree."""
    return cache_root() / "fuzz"


def fuzzer_sources() -> list[Path]:
    """The runtime (core, app, every portable kernel), the host platform layer and the target."""
    return [*runtime_sources(), FIRMWARE / "host" / "platform_host.cc", FUZZ_SOURCE]


def build_fuzzer(defines: Sequence[str] = (), cache_dir: str | Path | None = None, jobs: int | None = None) -> Path:
    """The libFuzzer binary for fuzz_program.cc (every kernel linked), cached
    by the hash of its sources, headers, flags and compiler. `defines` are
    extra -D macros (e.g. UNVERIFIED)."""
    cxx = _require_toolchain()
    sources = fuzzer_sources()
    flags = [*FLAGS, *(f"-D{d}" for d in defines)]
    table = kernel_table.kernel_table_source(None)
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout
    digest = hashlib.sha256()
    for s in sources:
        digest.update(str(s.relative_to(REPO)).encode())
        digest.update(s.read_bytes())
    for h in sorted(FIRMWARE.rglob("*.h")):
        digest.update(h.read_bytes())
    digest.update(table.encode())
    digest.update(" ".join(flags).encode())
    digest.update(version.encode())
    key = digest.hexdigest()[:16]
    cache = Path(cache_dir) if cache_dir else default_cache()
    exe = cache / f"fuzz_program-{key}"
    if exe.exists():
        return exe
    work = cache / f"obj-{key}"
    work.mkdir(parents=True, exist_ok=True)
    table_src = work / "kernel_table_all.cc"
    _write_atomic(table_src, table)

    def compile_one(src: Path) -> tuple[Path, subprocess.CompletedProcess]:
        rel = src.relative_to(REPO) if src.is_relative_to(REPO) else Path(src.name)
        obj = work / rel.with_suffix(".o")
        obj.parent.mkdir(parents=True, exist_ok=True)
        tmp = obj.with_name(f"{obj.name}.{os.getpid()}.tmp")
        proc = subprocess.run([cxx, *flags, "-c", str(src), "-o", str(tmp)], capture_output=True, text=True)
        if proc.returncode == 0:
            tmp.replace(obj)
        return obj, proc

    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        results = list(pool.map(compile_one, [*sources, table_src]))
    failed = [(o, p) for o, p in results if p.returncode != 0]
    if failed:
        raise BuildError("fuzzer build failed:\n" + "\n".join(p.stderr for _, p in failed))
    tmp = exe.with_name(f"{exe.name}.{os.getpid()}.tmp")
    proc = subprocess.run([cxx, *flags, *(str(o) for o, _ in results), "-o", str(tmp)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"fuzzer link failed:\n{proc.stderr}")
    tmp.replace(exe)
    return exe


def _write_atomic(path: Path, text: str) -> None:
    if path.exists() and path.read_text() == text:
        return
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


# ---------------------------------------------------------------------------------------------
# Seeds


def _seed_models() -> list[tuple[str, Any, tuple, str, Any]]:
    """(name, module, example inputs, quant, calibration) of each seed program:
    small, so that the fuzzer's executions stay fast, and together using every
    op the compiler emits."""
    import numpy as np
    import torch
    from torch import nn

    sys.path.insert(0, str(REPO / "examples"))
    try:
        import digits
    finally:
        sys.path.remove(str(REPO / "examples"))

    class SmallConv(nn.Module):
        """conv + relu6 -> depthwise + residual add -> max pool -> mul, sigmoid,
        tanh -> concat -> avg pool -> mean -> linear -> softmax."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(2, 4, 3, padding=1)
            self.dw = nn.Conv2d(4, 4, 3, padding=1, groups=4)
            self.pool = nn.MaxPool2d(2)
            self.avg = nn.AvgPool2d(2)
            self.fc = nn.Linear(8, 5)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.clamp(self.conv(x), 0.0, 6.0)
            y = self.pool(y + self.dw(y))
            z = torch.cat([torch.sigmoid(y) * y, torch.tanh(y)], dim=1)
            z = self.avg(z).mean(dim=(2, 3))
            return torch.softmax(self.fc(z), dim=-1)

    class Shapes(nn.Module):
        """permute / transpose, standalone clamps, a constant subtracted, two
        inputs, and an output given twice (a copy)."""

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
            p = torch.clamp(a.permute(0, 2, 1), -0.5, 0.5) * b.transpose(1, 2) - 0.25
            q = torch.relu(torch.tanh(a))
            return p, q, q

    class Recurrent(nn.Module):
        """An LSTM, a bidirectional GRU and a relu RNN in a row."""

        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(3, 4)
            self.gru = nn.GRU(4, 2, bidirectional=True)
            self.rnn = nn.RNN(4, 3, nonlinearity="relu")

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.rnn(self.gru(self.lstm(x)[0])[0])[0]

    class Stream(nn.Module):
        """A streaming LSTM: one frame and its state per call (compile state=2)."""

        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(3, 4)

        def forward(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, ...]:
            y, (h, c) = self.lstm(x, (h, c))
            return torch.tanh(y), h, c

    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    mlp, (x_digits,) = digits.make()
    x_train, _ = digits.train_set()
    conv = SmallConv().eval()
    x_conv = torch.from_numpy(rng.uniform(-1, 1, (1, 2, 6, 6)).astype(np.float32))
    conv_cal = [rng.uniform(-1, 1, (1, 2, 6, 6)).astype(np.float32) for _ in range(8)]
    shapes = Shapes().eval()
    ab = (torch.from_numpy(rng.uniform(-1, 1, (1, 3, 4)).astype(np.float32)),
          torch.from_numpy(rng.uniform(-1, 1, (1, 3, 4)).astype(np.float32)))
    rec = Recurrent().eval()
    x_rec = torch.from_numpy(rng.uniform(-1, 1, (3, 1, 3)).astype(np.float32))
    rec_cal = [rng.uniform(-1, 1, (3, 1, 3)).astype(np.float32) for _ in range(8)]
    stream = Stream().eval()
    frame = (torch.from_numpy(rng.uniform(-1, 1, (1, 1, 3)).astype(np.float32)), torch.zeros(1, 1, 4),
             torch.zeros(1, 1, 4))
    stream_cal = [(rng.uniform(-1, 1, (1, 1, 3)).astype(np.float32),
                   *(rng.uniform(-0.5, 0.5, (1, 1, 4)).astype(np.float32) for _ in range(2))) for _ in range(8)]
    return [
        ("recurrent_f32", rec, (x_rec,), "float32", None),
        ("recurrent_s8", rec, (x_rec,), "int8", rec_cal),
        ("recurrent_a16w8", rec, (x_rec,), "a16w8", rec_cal),
        ("stream_s8", stream, frame, "int8", stream_cal),  # with a persistent arena (state=2)
        ("digits_f32", mlp, (x_digits,), "float32", None),
        ("digits_s8", mlp, (x_digits,), "int8", [x[None] for x in x_train[:32]]),
        ("smallconv_f32", conv, (x_conv,), "float32", None),
        ("smallconv_s8", conv, (x_conv,), "int8", conv_cal),
        ("shapes_f32", shapes, ab, "float32", None),
        ("shapes_s8", shapes, ab, "int8", [tuple(rng.uniform(-1, 1, t.shape).astype(np.float32) for t in ab)
                                           for _ in range(8)]),
    ]


def make_corpus(corpus_dir: str | Path) -> list[Path]:
    """Compiles the seed programs into CORPUS/<name>.pte; returns their paths."""
    import warnings

    from .compiler import compile

    corpus = Path(corpus_dir)
    corpus.mkdir(parents=True, exist_ok=True)
    seeds = []
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # int8 float fallbacks are expected here
        for name, model, example, quant, calibration in _seed_models():
            out = Path(tmp) / name
            compile(model, example, "mps3-an547", out, quant=quant, calibration=calibration, progress=False,
                    state=2 if name.startswith("stream") else None)
            seed = corpus / f"{name}.pte"
            seed.write_bytes((out / "model.pte").read_bytes())
            seeds.append(seed)
    return seeds


# ---------------------------------------------------------------------------------------------
# Running


_STATUS = re.compile(r"^#(\d+)\s+(\w+)\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\S+)(.*)$")
_EXEC_S = re.compile(r"exec/s: (\d+)")
_RSS = re.compile(r"rss: (\d+)Mb")
_STAT = re.compile(r"^stat::(\w+):\s+(\d+)")
_COUNTERS = re.compile(r"INFO: Loaded \d+ modules?\s+\((\d+) inline 8-bit counters\)")
_WRITTEN = re.compile(r"Test unit written to (\S+)")
_ERROR = re.compile(r"(==\d+==ERROR: .*|^\S+:\d+:\d+: runtime error: .*|ALARM: working on the last Unit.*)")
_SUMMARY = re.compile(r"^SUMMARY: (.*)")


def parse_output(text: str) -> dict[str, Any]:
    """What a libFuzzer run printed: executions, coverage, artifacts."""
    res: dict[str, Any] = {"executions": 0, "exec_per_sec": 0, "coverage": 0, "features": 0,
                           "counters": None, "corpus_units": 0, "corpus_size": "", "new_units": 0,
                           "peak_rss_mb": 0, "crashes": [], "slow_units": [], "stats": {}}
    error = summary = None
    for line in text.splitlines():
        m = _STATUS.match(line)
        if m:
            res["executions"] = int(m.group(1))
            res["coverage"], res["features"] = int(m.group(3)), int(m.group(4))
            res["corpus_units"], res["corpus_size"] = int(m.group(5)), m.group(6)
            if (e := _EXEC_S.search(m.group(7))):
                res["exec_per_sec"] = int(e.group(1))
            if (r := _RSS.search(m.group(7))):
                res["peak_rss_mb"] = max(res["peak_rss_mb"], int(r.group(1)))
            continue
        if (m := _STAT.match(line)):
            res["stats"][m.group(1)] = int(m.group(2))
        elif (m := _COUNTERS.search(line)):
            res["counters"] = int(m.group(1))
        elif (m := _SUMMARY.match(line)):
            summary = summary or m.group(1).strip()
        elif (m := _ERROR.search(line)) and error is None:
            error = m.group(1).strip()
        elif (m := _WRITTEN.search(line)):
            path = m.group(1)
            kind = Path(path).name.split("-", 1)[0]
            if Path(path).name.startswith("slow-unit-"):
                res["slow_units"].append(path)
            else:
                res["crashes"].append({"kind": kind if kind in ARTIFACT_KINDS else "crash", "path": path,
                                       "error": error, "summary": summary})
    stats = res["stats"]
    res["executions"] = stats.get("number_of_executed_units", res["executions"])
    res["exec_per_sec"] = stats.get("average_exec_per_sec", res["exec_per_sec"])
    res["new_units"] = stats.get("new_units_added", 0)
    res["peak_rss_mb"] = stats.get("peak_rss_mb", res["peak_rss_mb"])
    for crash in res["crashes"]:  # the summary follows the error; fill it in when it came later
        crash["error"] = crash["error"] or error
        crash["summary"] = crash["summary"] or summary
    return res


def run_fuzzer(seconds: int, corpus_dir: str | Path, artifacts_dir: str | Path, fuzzer: str | Path | None = None,
               extra_args: Sequence[str] = (), timeout: int = 10, log: str | Path | None = None) -> dict[str, Any]:
    """Runs the fuzzer for `seconds` over CORPUS (which it extends with the
    inputs that found new coverage), writing crash artifacts to ARTIFACTS.

    Returns {"executions", "exec_per_sec", "coverage" (edges covered),
    "counters" (edges instrumented), "features", "corpus_units", "new_units",
    "crashes": [{"kind", "path", "error", "summary"}], "slow_units",
    "returncode", "seconds" (wall), "log", "command"}. libFuzzer stops at the
    first crash; an input running over `timeout` seconds is one (kind
    "timeout")."""
    exe = Path(fuzzer) if fuzzer else build_fuzzer()
    corpus, artifacts = Path(corpus_dir), Path(artifacts_dir)
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    log_path = Path(log) if log else artifacts / "fuzz.log"
    cmd = [str(exe), f"-max_total_time={int(seconds)}", f"-timeout={int(timeout)}", "-print_final_stats=1",
           f"-artifact_prefix={artifacts.resolve()}/", *extra_args, str(corpus)]
    start = time.monotonic()
    with open(log_path, "w") as f:
        # libFuzzer stops itself at max_total_time; the margin covers loading
        # the corpus and a last slow input.
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=seconds + 120 + 2 * timeout)
    res = parse_output(log_path.read_text(errors="replace"))
    res.update(returncode=proc.returncode, seconds=round(time.monotonic() - start, 1), log=str(log_path),
               command=cmd)
    if proc.returncode != 0 and not res["crashes"]:
        res["crashes"].append({"kind": "crash", "path": None, "error": f"libFuzzer exited {proc.returncode}",
                               "summary": None})
    return res


def replay(inputs: Sequence[str | Path], fuzzer: str | Path | None = None, timeout: int = 10) -> subprocess.CompletedProcess:
    """Runs each input once through the fuzz target (no mutation): how a crash
    artifact is reproduced. returncode 0: every input ran cleanly."""
    exe = Path(fuzzer) if fuzzer else build_fuzzer()
    return subprocess.run([str(exe), f"-timeout={int(timeout)}", *map(str, inputs)], capture_output=True,
                          text=True, timeout=60 + timeout * len(inputs))


# ---------------------------------------------------------------------------------------------
# The command line (`make fuzz`)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m torchmcu.fuzz", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=600, help="how long to fuzz (default 600)")
    cache = default_cache()
    ap.add_argument("--corpus", default=str(cache / "corpus"),
                    help=f"corpus directory, kept between runs; seeded when it holds no .pte (default {cache}/corpus)")
    ap.add_argument("--artifacts", default=str(cache / "artifacts"),
                    help=f"where crash artifacts and fuzz.log go (default {cache}/artifacts)")
    ap.add_argument("--reseed", action="store_true", help="compile the seed programs again")
    ap.add_argument("--timeout", type=int, default=10, help="seconds one input may run before it counts as a hang")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    try:
        exe = build_fuzzer()
        corpus = Path(args.corpus)
        if args.reseed or not any(corpus.glob("*.pte")):
            print(f"fuzz: compiling seed programs into {corpus}", file=sys.stderr)
            make_corpus(corpus)
        print(f"fuzz: {exe} for {args.seconds} s (log: {Path(args.artifacts) / 'fuzz.log'})", file=sys.stderr)
        res = run_fuzzer(args.seconds, corpus, args.artifacts, fuzzer=exe, timeout=args.timeout)
    except (TorchMCUError, subprocess.TimeoutExpired) as e:
        print(f"fuzz: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({k: v for k, v in res.items() if k != "stats"}, indent=2))
    else:
        total = f"/{res['counters']}" if res["counters"] else ""
        print(f"fuzz: {res['executions']:,} executions in {res['seconds']} s ({res['exec_per_sec']}/s), "
              f"coverage {res['coverage']}{total} edges, {res['features']} features, "
              f"corpus {res['corpus_units']} units (+{res['new_units']})")
        for c in res["crashes"]:
            print(f"fuzz: {c['kind'].upper()}: {c['summary'] or c['error']}")
            if c["path"]:
                print(f"fuzz:   reproduce: {exe} {c['path']}")
    return 1 if res["crashes"] else 0


if __name__ == "__main__":
    sys.exit(main())
