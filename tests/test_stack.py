"""Honest RAM: the worst-case stack computed ahead of time from -fstack-usage
over the linked call graph (torchmcu.builder.stack), confirmed by the
high-water mark the startup measures in QEMU (it paints the stack at reset),
the stack sized from it, and one total-RAM line and one flash line that are
the linked image's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import needs_arm_gcc, needs_qemu
from torch import nn
from torchmcu import cli
from torchmcu.builder.firmware import REPORT_MARK, build_firmware
from torchmcu.builder.size import elf_size
from torchmcu.builder.stack import _sp_decrement, read_frames, stack_with_margin
from torchmcu.compiler import compile
from torchmcu.sim import runner

pytestmark = [needs_arm_gcc]


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("stack_model")
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5)).eval()
    compile(model, (torch.randn(1, 1, 6, 6),), "mps2-an505", out, quant="int8", progress=False)
    return out


@needs_qemu
def test_computed_bounds_measured_and_sizes_the_stack(small: Path, capsys) -> None:
    assert cli.main(["build", str(small)]) == 0
    printed = capsys.readouterr().out
    record = json.loads((small / "size.json").read_text())
    s = record["stack"]
    assert s["computed_bytes"] is not None and s["unbounded"] == []
    assert s["reserved_bytes"] == stack_with_margin(s["computed_bytes"]) and s["source"] == "computed + margin"
    assert s["path"][0]["function"] == "Reset_Handler" and any(p["function"] == "main" for p in s["path"])
    assert s["su_functions"] > 0.8 * s["functions"]  # nearly every function's frame is GCC's own figure
    x = np.random.RandomState(0).randn(2, 1, 1, 6, 6).astype(np.float32)
    res = runner.run(small, [x], sim="qemu")
    assert res.exit_code == 0, res.raw[-500:]
    assert res.stack_size == s["reserved_bytes"]
    # What the run used never exceeds the bound, and the bound is not wildly above it.
    assert 200 < res.stack_used <= s["computed_bytes"] < 4 * res.stack_used, (res.stack_used, s)
    # One total-RAM line (the ELF's data + bss) and one flash line (text + data), in the build's output,
    # size.json, report.txt and report.json alike.
    size = elf_size(small / "firmware.elf")
    ram = record["ram"]
    assert ram["total"] == size.data + size.bss == sum(ram["parts"].values())
    assert ram["parts"]["stack"] == s["reserved_bytes"]
    arenas = sum(a["size"] for a in runner.load_meta(small)["arenas"])
    assert arenas <= ram["parts"]["arenas"] < arenas + 16
    assert record["flash"] == size.text + size.data
    ram_line = f"RAM {ram['total']:,} B = arenas {ram['parts']['arenas']:,} B"
    flash_line = f"flash {record['flash']:,} B = "
    report_txt = (small / "report.txt").read_text()
    linked = report_txt.split(REPORT_MARK)[1]
    for text in (printed, linked):
        assert ram_line in text and flash_line in text and "computed worst case" in text
    assert report_txt.count(REPORT_MARK) == 1
    report = json.loads((small / "report.json").read_text())
    assert report["firmware"]["ram"]["total"] == ram["total"] and report["firmware"]["flash"] == record["flash"]
    # The program's flash figure in the report is the linked array (with its alignment padding at most).
    linked_array = next(n for f, n in record["files"].items() if f.endswith("model_pte.o"))
    assert report["flash"]["program_bytes"] <= linked_array < report["flash"]["program_bytes"] + 16


@needs_qemu
def test_stack_override(small: Path, tmp_path: Path) -> None:
    build_firmware(small, stack=8192)  # above the computed need (the fast int8 paths take about 5 KB)
    record = json.loads((small / "size.json").read_text())
    assert record["stack"]["reserved_bytes"] == 8192 and record["stack"]["source"] == "--stack"
    assert record["ram"]["parts"]["stack"] == 8192
    res = runner.run(small, [np.zeros((1, 1, 6, 6), np.float32)], sim="qemu")
    assert res.exit_code == 0 and res.stack_size == 8192


DEEP_APP = r"""
#include "model.h"
/* A frame of 4000 bytes reached only through a function pointer in a table:
   the analysis must take it as a possible target of the indirect call. */
typedef int (*fn)(int);
static int __attribute__((noinline)) shallow(int n) { return n + 1; }
static int __attribute__((noinline)) deep(int n) {
  volatile unsigned char buf[4000];
  for (int i = 0; i < 4000; ++i) buf[i] = (unsigned char)(i + n);
  return buf[n] + buf[3999];
}
fn volatile table[2] = {shallow, deep};
int main(void) {
  if (tmcu_model_init() != TMCU_OK) return 1;
  return table[1](5) == (5 + 3999 + 5) % 256 + 5 ? 0 : 2;
}
"""

RECURSIVE_APP = r"""
#include "model.h"
static volatile int depth = 10;
static int __attribute__((noinline)) down(int n) {
  volatile int pad[8];
  pad[0] = n;
  return n > 0 ? down(n - 1) + pad[0] : 0;
}
int main(void) { return down(depth) == 55 ? 0 : 3; }
"""


@needs_qemu
def test_indirect_call_to_a_deep_frame(small: Path, tmp_path: Path) -> None:
    src = tmp_path / "deep.c"
    src.write_text(DEEP_APP)
    build_firmware(small, app=[src])
    s = json.loads((small / "size.json").read_text())["stack"]
    res = runner.run_app(small)
    assert res.exit_code == 0, res.output
    assert res.stack_used >= 4000
    assert s["computed_bytes"] >= res.stack_used
    assert any("deep" in p["function"] for p in s["path"]), s["path"]


@needs_qemu
def test_recursion_is_not_bounded_and_keeps_the_boards_stack(small: Path, tmp_path: Path) -> None:
    from torchmcu.boards import load_board

    src = tmp_path / "rec.c"
    src.write_text(RECURSIVE_APP)
    build_firmware(small, app=[src])
    s = json.loads((small / "size.json").read_text())["stack"]
    assert s["computed_bytes"] is None and any("recursion" in u and "down" in u for u in s["unbounded"])
    assert s["reserved_bytes"] == load_board("mps2-an505").stack_size and "not bounded" in s["source"]
    res = runner.run_app(small)
    assert res.exit_code == 0 and res.stack_used > 10 * 32


def test_prologue_decrements() -> None:
    assert _sp_decrement("push", "{r4, r5, r6, lr}") == 16
    assert _sp_decrement("push.w", "{r4, r5, r6, r7, r8, r9, sl, fp, lr}") == 36
    assert _sp_decrement("stmdb", "sp!, {r4, r5, r6, r7, r8, lr}") == 24
    assert _sp_decrement("vpush", "{d8-d15}") == 64
    assert _sp_decrement("vpush", "{s16-s17}") == 8
    assert _sp_decrement("sub", "sp, #28") == 28
    assert _sp_decrement("sub.w", "sp, sp, #1024") == 1024
    assert _sp_decrement("subw", "sp, sp, #1200") == 1200
    assert _sp_decrement("str.w", "lr, [sp, #-4]!") == 4
    assert _sp_decrement("strd", "r4, r5, [sp, #-8]!") == 8
    assert _sp_decrement("sub", "r3, #28") == 0 and _sp_decrement("add", "sp, #28") == 0


def test_su_lines_get_their_assembler_names(tmp_path: Path) -> None:
    (tmp_path / "a.su").write_text("a.cc:3:5:int f(int)\t24\tstatic\n"
                                   "a.cc:9:1:void g()\t48\tdynamic\n"
                                   "a.cc:12:1:void h()\t40\tdynamic,bounded\n"
                                   "a.c:20:6:plain_c\t8\tstatic\n")
    (tmp_path / "a.ci").write_text(
        'graph: { title: "a.cc"\n'
        'node: { title: "_Z1fi" label: "int f(int)\\na.cc:3:5\\n24 bytes (static)" }\n'
        'node: { title: "a.cc:_Z1gv" label: "void g()\\na.cc:9:1\\n48 bytes (dynamic)" }\n'
        'node: { title: "_Z1hv" label: "void h()\\na.cc:12:1\\n40 bytes (dynamic,bounded)" }\n}\n')
    frames = read_frames([tmp_path / "a.su"])
    assert frames["_Z1fi"].bytes == 24 and frames["_Z1fi"].kind == "static"
    assert frames["_Z1gv"].kind == "dynamic" and frames["_Z1hv"].kind == "bounded"
    assert frames["plain_c"].bytes == 8


def test_margin() -> None:
    assert stack_with_margin(100) == 360  # at least 256 B
    assert stack_with_margin(2000) == 2504  # 25 %, rounded up to 8
