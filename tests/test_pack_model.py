"""A user's compiled model in a CMSIS-Pack (`torchmcu export DIR --pack OUT`):
a Model component beside the runtime, whose description validates, and from
whose file lists alone (Runtime, Kernels:Portable, Model, the board's
platform variant) one's own main.c (examples/c_api/main.c) builds and runs
in QEMU through the model's C API."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from xml.etree import ElementTree

import pytest
from conftest import REPO, needs_arm_gcc, needs_qemu
from torchmcu.boards import load_board

SCHEMA = REPO.parent / "shared" / "schemas" / "PACK.xsd"
EXAMPLE = REPO / "examples" / "c_api" / "main.c"


def cli(*args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "torchmcu", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONWARNINGS": "ignore", "TORCHMCU_PLOT": "0"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture(scope="module")
def packed(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("pack_model")
    model = tmp / "digits"
    cli("compile", "examples/digits.py:make", "--board", "mps3-an547", "-o", str(model), "--quant", "int8")
    out = tmp / "pack"
    printed = cli("export", str(model), "--pack", str(out)).stdout
    assert "Machine Learning:Model:model" in printed
    return next(out.glob("*.pack")), model


def _root(pack: Path) -> ElementTree.Element:
    with zipfile.ZipFile(pack) as z:
        name = next(n for n in z.namelist() if n.endswith(".pdsc"))
        return ElementTree.fromstring(z.read(name))


def test_model_component_lists_the_models_files(packed) -> None:
    pack, model = packed
    root = _root(pack)
    comp = next(c for c in root.iter("component") if c.get("Cgroup") == "Model")
    assert comp.get("Csub") == "model" and comp.get("condition") == "torchmcu Model"
    names = {f.get("name") for f in comp.iter("file")}
    assert names == {f"models/model/{n}" for n in ("model.h", "model.cc", "model_pte.h", "model_pte.c",
                                                   "model_arenas.h", "model_arenas.c", "kernel_table.cc")}
    with zipfile.ZipFile(pack) as z:
        assert z.read("models/model/model_pte.c") == (model / "model_pte.c").read_bytes()
    cond = next(c for c in root.iter("condition") if c.get("id") == "torchmcu Model")
    assert {"Cclass": "Machine Learning", "Cbundle": "torchmcu", "Cgroup": "Kernels", "Csub": "Portable"} in [
        r.attrib for r in cond.findall("require")]
    if SCHEMA.is_file():
        import xmlschema

        with zipfile.ZipFile(pack) as z:
            text = z.read(next(n for n in z.namelist() if n.endswith(".pdsc"))).decode()
        errors = [f"{e.path}: {e.reason}" for e in xmlschema.XMLSchema(str(SCHEMA)).iter_errors(text)]
        assert errors == []


@needs_arm_gcc
@needs_qemu
def test_own_main_builds_from_the_packs_components(packed, tmp_path: Path) -> None:
    pack, _ = packed
    root_dir = tmp_path / "pack"
    with zipfile.ZipFile(pack) as z:
        z.extractall(root_dir)
    board = load_board("mps3-an547")
    wanted = [("Runtime", None, None), ("Kernels", "Portable", None), ("Model", "model", None),
              ("Platform", "Arm MPS", board.name)]
    comps = {(c.get("Cgroup"), c.get("Csub"), c.get("Cvariant")): c for c in _root(pack).iter("component")}
    sources, includes, scripts, pre_includes = [], set(), [], []
    for key in wanted:
        comp = comps[key]
        pre = comp.findtext("Pre_Include_Local_Component_h")
        extra = []
        if pre:
            header = tmp_path / f"pre_{len(pre_includes)}.h"
            header.write_text(pre + "\n")
            pre_includes.append(header)
            extra = ["-include", str(header)]
        for f in comp.iter("file"):
            path = root_dir / f.get("name")
            if f.get("category") == "header":
                includes.add(root_dir / (f.get("path") or Path(f.get("name")).parent.as_posix()))
            elif f.get("category") == "source":
                sources.append((path, extra))
            elif f.get("category") == "linkerScript":
                scripts.append(path)
    sources.append((EXAMPLE, ["-include", str(pre_includes[0])]))  # main.c includes boards/platform.h
    common = [*board.cflags, "-Os", "-ffunction-sections", "-fdata-sections", *(f"-I{p}" for p in sorted(includes))]
    objs = []
    for i, (src, extra) in enumerate(sources):
        obj = tmp_path / "obj" / f"{i:03d}_{src.name}.o"
        obj.parent.mkdir(exist_ok=True)
        tool, lang = (("arm-none-eabi-gcc", ["-std=c99"]) if src.suffix == ".c" else
                      ("arm-none-eabi-g++", ["-std=c++17", "-fno-rtti", "-fno-exceptions", "-fno-threadsafe-statics"]))
        proc = subprocess.run([tool, *common, *lang, *extra, "-c", str(src), "-o", str(obj)], capture_output=True,
                              text=True)
        assert proc.returncode == 0, f"{src}:\n{proc.stderr}"
        objs.append(obj)
    elf = tmp_path / "own.elf"
    proc = subprocess.run(["arm-none-eabi-g++", *map(str, objs), *board.ldflags(scripts[0]), "-o", str(elf)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    from torchmcu.sim.qemu import QemuRunner

    res = QemuRunner().run(board, elf, None, timeout_s=60)
    m = re.search(r"class (\d)\n", res.stdout)
    assert m is not None and res.exit_code == int(m.group(1)), res.stdout
