"""The compile driver's shape (torchmcu.driver): one options record checked
in one place, a list of stages each adding to one context what later ones
need, and backends in a compile half and a build half."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torchmcu import backends
from torchmcu.backends.base import Backend
from torchmcu.builder.firmware import firmware_backend
from torchmcu.compiler import CompileOptions, compile
from torchmcu.driver import STAGES, Context
from torchmcu.errors import CompileError


def _model() -> tuple[nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5)).eval(), \
        (torch.randn(1, 3, 8, 8),)


def test_each_stage_needs_only_what_the_caller_gave_or_an_earlier_stage_added() -> None:
    fields = set(Context.__dataclass_fields__)
    have = {"model", "example_inputs", "board", "options"}
    for s in STAGES:
        assert set(s.needs) <= have, (s.name, set(s.needs) - have)
        assert set(s.adds) <= fields, (s.name, set(s.adds) - fields)
        have |= set(s.adds)
    assert [s.name for s in STAGES][:2] == ["resolve", "prepare"]


@pytest.mark.parametrize("bad", [dict(quant="int3"), dict(stack=12), dict(io="int8"), dict(io_layout="nwc"),
                                 dict(tile_recompute=11), dict(symbol="2x"), dict(precision={"c": "int16"})])
def test_options_are_checked_when_made(bad: dict) -> None:
    with pytest.raises(CompileError):
        CompileOptions(**bad)


def test_compile_takes_keywords_or_an_options_record(tmp_path: Path) -> None:
    model, x = _model()
    cal = [(torch.randn(1, 3, 8, 8),) for _ in range(4)]
    a = compile(model, x, "mps3-an547", tmp_path / "a", quant="int8", calibration=cal, progress=False, crc=True)
    opts = CompileOptions(quant="int8", calibration=cal, progress=False)
    b = compile(model, x, "mps3-an547", tmp_path / "b", options=opts, crc=True)  # keywords change the record
    assert a.pte == b.pte and a.options == b.options
    assert (tmp_path / "a" / "report.json").read_bytes() == (tmp_path / "b" / "report.json").read_bytes()
    with pytest.raises(TypeError):
        compile(model, x, "mps3-an547", tmp_path / "c", quantize="int8")


def test_backends_have_a_compile_and_a_build_half() -> None:
    assert list(backends.all_backends()) == list(backends.builds())
    with pytest.raises(ValueError):  # the halves of two backends
        Backend(backends.get("portable"), backends.builds()["cmsis-nn"])


def test_the_build_half_that_builds_the_whole_firmware_says_what_it_made(tmp_path: Path) -> None:
    model, x = _model()
    compile(model, x, "mps3-an547", tmp_path / "m", progress=False)
    assert firmware_backend(tmp_path / "m") is None  # arm-none-eabi: the builder's own firmware.elf
    cal = [(torch.randn(1, 3, 8, 8),) for _ in range(4)]
    compile(model, x, "imxrt600-hifi4", tmp_path / "h", quant="int8", calibration=cal, progress=False)
    owner = firmware_backend(tmp_path / "h")
    assert owner is backends.builds()["hifi"]
    elf = tmp_path / "h" / "firmware-xtensa.elf"
    assert owner.describe_image(elf) == f"{elf}: built for Xtensa (commands: {tmp_path / 'h' / 'fw-xtensa' / 'build.sh'})"
