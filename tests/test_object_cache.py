"""Builds share the objects of the runtime, the kernels and the board
support (builder.firmware.object_cache_root): a second model built with the
same flags compiles only its own sources, and the image is the same, byte
for byte, as one built with every object its own (TORCHMCU_OBJECT_CACHE=0)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from conftest import needs_arm_gcc
from torch import nn
from torchmcu.builder.firmware import build_firmware
from torchmcu.compiler import compile

pytestmark = needs_arm_gcc


def _model(width: int) -> tuple[nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(width)
    return nn.Sequential(nn.Linear(8, width), nn.ReLU(), nn.Linear(width, 4)).eval(), (torch.randn(1, 8),)


def test_second_build_reuses_the_shared_objects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHMCU_CACHE_DIR", str(tmp_path / "cache"))
    outs = []
    for width in (16, 24):
        out = tmp_path / f"m{width}"
        compile(*_model(width), "mps2-an505", out, quant="int8", progress=False)
        build_firmware(out)
        outs.append(out)
    (shared,) = (tmp_path / "cache" / "objects").iterdir()
    objects = sorted(shared.rglob("*.o"))
    assert objects and all(o.with_suffix(".su").is_file() and o.with_suffix(".d").is_file() for o in objects)
    assert not [p for p in shared.rglob("*") if ".tmp" in p.name or re.search(r"\.o\.\d+\.", p.name)]
    for out in outs:  # each build compiled only its model's sources, the app and the kernel table itself
        own = sorted(p.name for p in (out / "fw" / "obj").rglob("*.o"))
        assert own == sorted(["main_firmware.o", "kernel_table.o", "model_pte.o", "model_arenas.o", "model.o"]), own
        makefile = (out / "fw" / "Makefile").read_text()
        assert str(shared) in makefile and f"-I{out}" not in makefile.split("SHARED_CXXFLAGS :=")[1].split("\n")[0]
    # The same image as a build with no sharing, and the stack analysis sees the same objects.
    elf, size = (outs[1] / "firmware.elf").read_bytes(), json.loads((outs[1] / "size.json").read_text())
    monkeypatch.setenv("TORCHMCU_OBJECT_CACHE", "0")
    build_firmware(outs[1])
    assert "SHARED_CXXFLAGS" not in (outs[1] / "fw" / "Makefile").read_text()
    assert (outs[1] / "firmware.elf").read_bytes() == elf
    alone = json.loads((outs[1] / "size.json").read_text())
    assert alone["parts"] == size["parts"] and alone["stack"]["computed_bytes"] == size["stack"]["computed_bytes"]


def test_shared_objects_carry_their_dependencies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each shared object's dependency file names the object itself (not
    its temporary name) and the headers it includes, so that make rebuilds
    it when one of them changes."""
    monkeypatch.setenv("TORCHMCU_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "m"
    compile(*_model(16), "mps2-an505", out, quant="int8", progress=False)
    build_firmware(out)
    (shared,) = (tmp_path / "cache" / "objects").iterdir()
    method = next(shared.rglob("method.o"))
    deps = method.with_suffix(".d").read_text()
    assert deps.startswith(f"{method}:") and "core/method.h" in deps
