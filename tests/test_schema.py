"""The program format: one schema file, the generated C++ kept in step, and
compiled programs readable by the reference flatbuffers tool."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torchmcu.compiler import compile
from torchmcu.program import schema, serialize
from torchmcu.program.schema.__main__ import DEFAULT_OUT, generate


def test_generated_header_is_current() -> None:
    assert DEFAULT_OUT.read_text() == generate(schema.load()), (
        "firmware/core/program_generated.h is stale: run `python -m torchmcu.program.schema`")


def test_encode_decode_round_trip() -> None:
    prog = {
        "version": 1,
        "tensors": [{"name": "x", "dtype": "I8", "dims": [1, 2, 3], "region": "ARENA", "arena": 1,
                     "offset": 32, "nbytes": 6, "scale": 0.5, "zero_point": -3}],
        "ops": [{"code": "CONCAT", "inputs": [0, -1], "outputs": [0], "params": ("ConcatParams", {"axis": 2}),
                 "name": "cat"}],
        "inputs": [0], "outputs": [0], "arenas": [{"name": "dtcm", "size": 64}],
        "constant_offset": 0, "constant_size": 0,
    }
    back = schema.decode(schema.encode(prog))
    assert back["tensors"][0]["dims"] == [1, 2, 3] and back["tensors"][0]["zero_point"] == -3
    assert back["ops"][0]["params"] == ("ConcatParams", {"axis": 2})
    assert back["ops"][0]["code"] == "CONCAT" and back["arenas"][0]["name"] == "dtcm"


@pytest.mark.skipif(shutil.which("flatc") is None, reason="flatc not installed (Debian: flatbuffers-compiler)")
def test_flatc_reads_a_compiled_program(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 5 * 5, 3)).eval()
    compile(model, (torch.randn(1, 2, 5, 5),), "mps3-an547", tmp_path)
    pte = tmp_path / "model.pte"
    # flatc names its output after the input: model.json, in a folder of its own
    # (the compiler's model.json sits beside model.pte).
    subprocess.run(["flatc", "--json", "--strict-json", "--defaults-json", "--raw-binary",
                    "-o", str(tmp_path / "flatc"), str(schema.SCHEMA_PATH), "--", str(pte)],
                   check=True, capture_output=True)
    text = (tmp_path / "flatc" / "model.json").read_text()
    js = json.loads(re.sub(r"(?<=: )(-?)inf\b", r"\1Infinity", text))  # flatc prints bare inf
    assert js["version"] == serialize.PROGRAM_VERSION
    assert [op["code"] for op in js["ops"]] == ["PERMUTE", "CONV2D_F32", "PERMUTE", "LINEAR_F32"]
    conv = js["ops"][1]
    assert conv["params_type"] == "Conv2dParams"
    assert conv["params"]["pad_top"] == 1 and conv["params"]["act_min"] == 0.0
    weight = js["tensors"][conv["inputs"][1]]
    assert weight["region"] == "CONSTANT" and weight["dims"] == [4, 3, 3, 2]  # OHWI
    # The constant segment starts where the flatbuffer says, 16-byte aligned,
    # and holds the re-laid-out weights.
    raw = pte.read_bytes()
    assert js["constant_offset"] % 16 == 0 and js["constant_offset"] + js["constant_size"] == len(raw)
    w = np.frombuffer(raw, "<f4", count=4 * 3 * 3 * 2, offset=js["constant_offset"] + weight["offset"])
    np.testing.assert_array_equal(w.reshape(4, 3, 3, 2), model[0].weight.detach().numpy().transpose(0, 2, 3, 1))
