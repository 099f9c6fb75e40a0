"""Where the firmware's flash goes: `torchmcu build` attributes every byte the
ELF loads (text + data) to startup/libc, the runtime core, the kernels, the
model (the program array) or the test app, from the linker map, writes it to
size.json beside the ELF and prints it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import needs_arm_gcc
from torch import nn
from torchmcu import cli
from torchmcu.builder.size import SIZE_PARTS, elf_size, size_part
from torchmcu.compiler import compile
from torchmcu.program import serialize


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, str]:
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("size_model")
    model = nn.Sequential(nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 3)).eval()
    compile(model, (torch.randn(1, 12),), "mps2-an505", out, progress=False)
    return out, out.name


@needs_arm_gcc
def test_build_writes_and_prints_the_breakdown(built, capsys) -> None:
    out, _ = built
    assert cli.main(["build", str(out)]) == 0
    printed = capsys.readouterr().out
    b = json.loads((out / "size.json").read_text())
    size = elf_size(out / "firmware.elf")
    assert (b["text"], b["data"]) == (size.text, size.data)
    assert set(b["parts"]) == set(SIZE_PARTS)
    assert sum(b["parts"].values()) == size.text + size.data == b["flash"]
    assert all(n > 0 for n in b["parts"].values()), b["parts"]
    assert sum(b["files"].values()) == b["flash"]
    # The model part is the program array (the device image of model.pte:
    # what the runtime reads) and the arena table: at least the image, and
    # little more.
    image = len(serialize.device_image((out / "model.pte").read_bytes()))
    assert image <= b["parts"]["model"] < image + 64, (b["parts"]["model"], image)
    assert f"flash {b['flash']:,} B = startup/libc {b['parts']['startup_libc']:,} B" in printed


def test_input_files_are_attributed_to_their_part() -> None:
    assert size_part("/r/build/m/fw/obj/firmware/core/method.o") == "runtime"
    assert size_part("/r/build/m/fw/obj/firmware/kernels/portable/conv/conv2d_s8.o") == "kernels"
    assert size_part("/r/build/m/fw/obj/firmware/kernels/cmsis_nn/conv_s8.o") == "kernels"
    assert size_part("/r/build/cmsis-nn/x/libcmsis-nn.a(arm_convolve_s8.o)") == "kernels"
    assert size_part("/r/build/m/fw/obj/build/m/kernel_table.o") == "kernels"
    assert size_part("/r/build/m/fw/obj/build/m/model_pte.o") == "model"
    assert size_part("/r/build/m/fw/obj/firmware/app/app.o") == "app"
    assert size_part("/r/build/m/fw/obj/firmware/boards/startup.o") == "startup_libc"
    assert size_part("/usr/lib/gcc/arm-none-eabi/12/thumb/libc_nano.a(lib_a-memcpy.o)") == "startup_libc"


def test_device_image_keeps_what_the_runtime_reads(built) -> None:
    """The C array leaves out the tool-only tables; what the runtime reads
    (the executable section, constants, arenas) is byte for byte the same."""
    from torchmcu.program import schema

    out, _ = built
    pte = (out / "model.pte").read_bytes()
    image = serialize.device_image(pte)
    full, dev = schema.decode(pte, derived=True), schema.decode(image, derived=True)
    assert len(image) < len(pte)
    assert dev["tensors"] == [] and dev["ops"] == [] and full["tensors"] and full["ops"]
    for key in ("version", "exec", "constant_size", "init_copies"):
        assert dev[key] == full[key], key
    assert [a["size"] for a in dev["arenas"]] == [a["size"] for a in full["arenas"]]
    assert image[dev["constant_offset"]:] == pte[full["constant_offset"]:]


class _Streaming(nn.Module):
    """A GRU cell step: forward(x, h) -> (y, h), h kept as state."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(6, 16)
        self.fc = nn.Linear(16, 3)

    def forward(self, x, h):
        h = self.cell(x, h)
        return self.fc(h), h


@needs_arm_gcc
def test_build_counts_a_streaming_models_state_as_state(tmp_path, capsys) -> None:
    """The persistent arena shares its memory's section with the activations;
    the build's RAM line gives its bytes as state, as report.txt does (#26)."""
    torch.manual_seed(0)
    out = tmp_path / "stream"
    c = compile(_Streaming().eval(), (torch.randn(1, 6), torch.zeros(1, 16)), "mps3-an547", out, progress=False,
                state=1)
    state = c.report["memory"]["state"]["bytes"]
    assert state > 0
    assert cli.main(["build", str(out)]) == 0
    ram = json.loads((out / "size.json").read_text())["ram"]
    assert ram["parts"]["state"] == state
    assert sum(ram["parts"].values()) == ram["total"]
    assert f"persistent state {state:,} B" in capsys.readouterr().out
