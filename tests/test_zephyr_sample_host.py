"""The Zephyr sample's main.c (zephyr-module/samples/keyword_spotting) calls
the model's C API; without Zephyr at hand, it is built here for the host
with a stand-in for Zephyr's printk and the module's own io blob
(torchmcu_zephyr.py io-blob), and its lines must match the reference bit
for bit, as tests/test_zephyr.py checks them in QEMU when ZEPHYR_BASE is set."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from conftest import REPO
from torch import nn
from torchmcu.compiler import compile
from torchmcu.sim import runner
from torchmcu.sources import FIRMWARE, runtime_sources

SAMPLE = REPO / "zephyr-module" / "samples" / "keyword_spotting" / "src" / "main.c"
HELPER = REPO / "zephyr-module" / "scripts" / "torchmcu_zephyr.py"

KERNEL_H = """#include <stdio.h>
#define printk printf
#define KERNEL_VERSION_STRING "0.0.0-host"
/* The thread API the sample uses: the model thread runs to its end inside k_thread_create. */
struct k_thread { int unused; };
typedef void (*k_thread_entry_t)(void *, void *, void *);
#define K_THREAD_STACK_DEFINE(name, bytes) static char name[bytes]
#define K_THREAD_STACK_SIZEOF(name) sizeof(name)
#define K_PRIO_PREEMPT(p) (p)
#define K_NO_WAIT 0
#define K_FOREVER (-1)
#define ARG_UNUSED(x) (void)(x)
static inline void *k_thread_create(struct k_thread *t, char *stack, size_t size, k_thread_entry_t entry,
                                    void *p1, void *p2, void *p3, int prio, unsigned options, int delay)
{
	(void)stack; (void)size; (void)prio; (void)options; (void)delay;
	entry(p1, p2, p3);
	return t;
}
static inline int k_thread_join(struct k_thread *t, int timeout) { (void)t; (void)timeout; return 0; }
"""
# The figures `torchmcu build` writes into model_stack.h (a host build computes none).
STACK_H = """#define TMCU_MODEL_STACK_BYTES 4096
#define TMCU_MODEL_FIRMWARE_STACK_BYTES 4096
"""
PLATFORM = """#include <stdio.h>
#include <stdlib.h>
#include "boards/platform.h"
void tmcu_platform_init(void) {}
void tmcu_platform_write(const char* s, size_t n) { fwrite(s, 1, n, stdout); }
uint64_t tmcu_platform_ticks(void) { return 0; }
void tmcu_platform_exit(int code) { fflush(stdout); exit(code); }
"""


def test_sample_main_runs_the_c_api_bit_for_bit(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 5 * 4, 6)).eval()
    x = torch.randn(1, 1, 5, 4)
    out = tmp_path / "model"
    calib = {"x": np.random.RandomState(0).randn(8, 1, 1, 5, 4).astype(np.float32)}
    compile(model, (x,), "mps3-an547", out, quant="int8", io="int8", calibration=calib, progress=False)
    xs = np.random.RandomState(1).randn(3, 1, 1, 5, 4).astype(np.float32)
    np.save(tmp_path / "x.npy", xs)
    io_c = tmp_path / "model_io.c"
    subprocess.run([sys.executable, str(HELPER), "io-blob", str(out), str(tmp_path / "x.npy"), str(io_c)],
                   check=True, env={"PYTHONPATH": str(REPO / "aot"), "PATH": "/usr/bin:/bin"})
    stub = tmp_path / "stub"
    (stub / "zephyr" / "sys").mkdir(parents=True)
    (stub / "zephyr" / "kernel.h").write_text(KERNEL_H)
    (stub / "zephyr" / "sys" / "printk.h").write_text("")
    (stub / "zephyr" / "version.h").write_text("")
    (stub / "model_stack.h").write_text(STACK_H)
    (tmp_path / "platform.c").write_text(PLATFORM)
    flags = ["-O1", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", f"-I{FIRMWARE}",
             f"-I{FIRMWARE / 'include'}", f"-I{out}"]
    objs = []
    c_sources = [SAMPLE, io_c, tmp_path / "platform.c", out / "model_pte.c", out / "model_arenas.c"]
    cxx_sources = [s for s in runtime_sources() if s.parent.name != "app"] + [out / "model.cc", out / "kernel_table.cc"]
    for i, src in enumerate(c_sources + cxx_sources):
        obj = tmp_path / "obj" / f"{i:02d}_{src.stem}.o"
        obj.parent.mkdir(exist_ok=True)
        if src in c_sources:
            cmd = ["gcc", "-std=gnu11", "-Wall", "-Werror", "-Wno-format", f"-I{stub}", '-DCONFIG_BOARD="host"']
        else:
            cmd = ["g++", "-std=c++17", "-fno-rtti", "-fno-exceptions"]
        subprocess.run([*cmd, *flags, "-c", str(src), "-o", str(obj)], check=True)
        objs.append(obj)
    exe = tmp_path / "sample"
    subprocess.run(["g++", *flags, *map(str, objs), "-o", str(exe)], check=True)
    proc = subprocess.run([str(exe)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("torchmcu keyword spotting: Zephyr 0.0.0-host, board host\n")
    meta = runner.load_meta(out)
    info, outputs = runner.parse_protocol(proc.stdout, meta["outputs"])
    assert info["load_status"] == 0 and info["done_status"] == 0 and len(info["sample_ticks"]) == 3
    expected, tol = runner.expected(out, runner.split_samples(meta, [xs]))
    assert tol is None
    mismatch, _ = runner.compare(outputs, expected, tol)
    assert mismatch is None, mismatch
