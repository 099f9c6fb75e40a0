"""The CMSIS-Pack (`make pack`, torchmcu.export.pack) and `torchmcu deps cmsis-nn`.

The pack's description validates against the Open-CMSIS-Pack schema (found at
<repo>/../shared/schemas/PACK.xsd; the validation skips without it), lists
every runtime source, and its example builds from nothing but the description's
file lists and runs in QEMU. `torchmcu deps cmsis-nn` is run for real with
cmsis-pack-manager: against a refused local port (offline), and, when
TORCHMCU_CMSIS_NN_DIR names a CMSIS-NN checkout to pack, against a pack index
served on 127.0.0.1.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest
from conftest import REPO, needs_arm_gcc, needs_qemu
from torchmcu import __version__
from torchmcu import sources as build
from torchmcu.backends.cmsis_nn import build as cmsis_build
from torchmcu.backends.cmsis_nn.build import CMSIS_NN_ENV
from torchmcu.backends.ethos_u.build import DELEGATE_SOURCES, ETHOSU_DRIVER_ENV
from torchmcu.boards import board_sources, list_boards, load_board
from torchmcu.export import pack
from torchmcu.sim import runner

SCHEMA = REPO.parent / "shared" / "schemas" / "PACK.xsd"
needs_schema = pytest.mark.skipif(not SCHEMA.is_file(), reason=f"the Open-CMSIS-Pack schema is not at {SCHEMA}")
FIRMWARE = REPO / "firmware"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """`make pack` into a temporary folder: (the .pack, the output folder)."""
    out = tmp_path_factory.mktemp("pack")
    return pack.build_pack(out), out


def _pdsc(pack_path: Path) -> tuple[str, ElementTree.Element]:
    with zipfile.ZipFile(pack_path) as z:
        text = z.read(pack.template_meta().pdsc_name).decode()
    return text, ElementTree.fromstring(text)


def _files(root: ElementTree.Element) -> set[str]:
    return {f.get("name") for f in root.iter("file")}


# ---------------------------------------------------------------------------------------------
# The description


@needs_schema
def test_pdsc_validates_against_the_pack_schema(built) -> None:
    import xmlschema

    schema = xmlschema.XMLSchema(str(SCHEMA))
    text, _ = _pdsc(built[0])
    errors = [f"{e.path}: {e.reason}" for e in schema.iter_errors(text)]
    assert errors == []
    # The validator does reject a broken description: a component without Cgroup.
    broken = text.replace('<component Cgroup="App"', "<component", 1)
    assert any("Cgroup" in str(e.reason) for e in schema.iter_errors(broken))


def test_pack_lists_every_runtime_source(built) -> None:
    """Everything torchmcu's own builds compile (aot/torchmcu/sources.py: the
    runtime, the board support, the Ethos-U delegate and its NPU board
    support), the CMSIS-NN kernels, and every file under firmware/core,
    firmware/kernels, firmware/include and firmware/delegates/ethos_u (less its
    CMSIS-Core stand-in) is in the description and the zip."""
    _, root = _pdsc(built[0])
    listed = _files(root)
    rel = lambda p: p.relative_to(REPO).as_posix()
    expected = {rel(p) for p in build.runtime_sources()}
    expected |= {rel(p) for p in (FIRMWARE / "kernels" / "cmsis_nn").glob("*.cc")}
    expected |= {rel(p) for p in board_sources()}
    expected |= {f"firmware/{s}" for s in DELEGATE_SOURCES}
    for top in ("core", "kernels", "include", "delegates/ethos_u"):
        expected |= {rel(p) for p in (FIRMWARE / top).rglob("*")
                     if p.is_file() and not {"test", "tests"} & set(p.relative_to(FIRMWARE).parts)
                     and not any(p.relative_to(FIRMWARE).as_posix().startswith(d + "/") for d in pack.EXCLUDED_DIRS)}
    assert {"firmware/delegates/ethos_u/ethos_u.cc", "firmware/boards/npu/ethos_u.cc"} <= expected
    assert expected - listed == set()
    with zipfile.ZipFile(built[0]) as z:
        names = set(z.namelist())
    assert expected - names == set()
    # The stand-in for CMSIS-Core's cmsis_compiler.h would shadow the real one.
    assert not any("cmsis_compiler.h" in n for n in names | listed)


def test_pack_is_named_and_laid_out_as_the_spec_says(built) -> None:
    pack_path, out = built
    meta = pack.template_meta()
    assert pack_path.name == f"torchmcu.runtime.{__version__}.pack" == meta.pack_name
    text, root = _pdsc(pack_path)
    assert (out / meta.pdsc_name).read_text() == text  # beside the pack, for an index
    assert root.findtext("vendor") == "torchmcu" and root.findtext("name") == "runtime"
    assert [r.get("version") for r in root.iter("release")] == [__version__]
    with zipfile.ZipFile(pack_path) as z:
        names = set(z.namelist())
    assert meta.pdsc_name in names and "/" not in meta.pdsc_name  # at the root
    assert _files(root) - names == set()  # every listed file is there
    example = root.find("examples/example")
    assert f"{example.get('folder')}/{example.get('doc')}" in names
    # Nothing else: the description's files, the overview, the example.
    unlisted = {n for n in names - _files(root) if not n.startswith(example.get("folder") + "/")}
    assert unlisted == {meta.pdsc_name, "README.md"}
    assert {f"ld/{b}.ld" for b in list_boards()} <= names


def test_components_conditions_and_dependencies(built) -> None:
    _, root = _pdsc(built[0])
    conditions = {c.get("id"): c for c in root.iter("condition")}
    bundle = root.find("components/bundle")
    comps = {(c.get("Cgroup"), c.get("Csub"), c.get("Cvariant")): c for c in bundle.findall("component")}
    # CMSIS-NN kernels require ARM::CMSIS-NN's component, and the pack names the pack.
    nn = conditions[comps[("Kernels", "CMSIS-NN", None)].get("condition")]
    assert {"Cclass": "CMSIS", "Cgroup": "NN Lib"} in [r.attrib for r in nn.findall("require")]
    assert [p.attrib for p in root.iter("package") if p.get("vendor")] == [
        {"vendor": "ARM", "name": "CMSIS-NN"}, {"vendor": "ARM", "name": "ethos-u-core-driver"}]
    # Every Cortex-M the runtime is built for.
    cores = {a.get("Dcore") for a in conditions["Cortex-M"].findall("accept")}
    assert {"Cortex-M0+", "Cortex-M3", "Cortex-M4", "Cortex-M7", "Cortex-M33", "Cortex-M55", "Cortex-M85"} <= cores
    # One platform variant per board, requiring its exact core.
    variants = {v for g, _, v in comps if g == "Platform"}
    assert variants == set(list_boards())
    cores_of = {
        "mps3-an547": {"Dcore": "Cortex-M55", "Dfpu": "DP_FPU", "Ddsp": "DSP", "Dmve": "FP_MVE"},
        "mps2-an386": {"Dcore": "Cortex-M4", "Dfpu": "SP_FPU", "Ddsp": "DSP"},
        "mps2-an385": {"Dcore": "Cortex-M3", "Dfpu": "NO_FPU", "Ddsp": "NO_DSP"},
    }
    for board, want in cores_of.items():
        cond = conditions[comps[("Platform", "Arm MPS", board)].get("condition")]
        assert want in [r.attrib for r in cond.findall("require")]
    # The board's -D macros reach its platform code through the pre-include.
    pre = comps[("Platform", "Arm MPS", "mps3-an547")].findtext("Pre_Include_Local_Component_h")
    assert "#define TMCU_BOARD_UART_BASE 0x49303000u" in pre


# What ARM::ethos-u-core-driver's component is called, as Arm's pack description
# names it (3rdparty-build/ethos-u-driver/contributions/merge/ARM.ethos-u-core-driver.pdsc.tpl
# of the pack build in github.com/MDK-Packs/tensorflow-pack), and what each of its
# variants' global pre-include defines.
ETHOS_U_DRIVER = {"Cclass": "Machine Learning", "Cgroup": "NPU Support", "Csub": "Ethos-U Driver"}
DRIVER_VARIANTS = {"Generic U55": ("u55", 0), "Generic U65": ("u65", 1), "Generic U85": ("u85", 2)}


def test_ethos_u_delegate_component_requires_arms_driver(built) -> None:
    _, root = _pdsc(built[0])
    conditions = {c.get("id"): c for c in root.iter("condition")}
    bundle = root.find("components/bundle")
    comps = {(c.get("Cgroup"), c.get("Csub"), c.get("Cvariant")): c for c in bundle.findall("component")}
    delegate = comps[("Delegates", "Ethos-U", None)]
    files = {f.get("name") for f in delegate.iter("file")}
    assert files == {f"firmware/{p.relative_to(FIRMWARE).as_posix()}"
                     for p in (FIRMWARE / "delegates" / "ethos_u").glob("*") if p.is_file()}

    def requires(cond_id: str) -> list[dict]:
        """Every require of a condition, through the conditions it requires."""
        out = []
        for r in conditions[cond_id].findall("require"):
            out += requires(r.get("condition")) if r.get("condition") else [r.attrib]
        return out

    cond = delegate.get("condition")
    assert ETHOS_U_DRIVER in requires(cond)
    assert {"Cclass": "Machine Learning", "Cbundle": "torchmcu", "Cgroup": "Runtime"} in requires(cond)
    # Only the cores Ethos-U is paired with: an accept list under the condition.
    accepts = [{a.get("Dcore") for a in conditions[r.get("condition")].findall("accept")}
               for r in conditions[cond].findall("require") if r.get("condition")]
    assert {"Cortex-M33", "Cortex-M55", "Cortex-M85"} in accepts
    # One NPU board-support variant per board with an NPU, on that board's core
    # and platform variant, with the NPU's register block and interrupt.
    npu_boards = {n for n in list_boards() if load_board(n).npu is not None}
    assert npu_boards >= {"corstone-300-u55-128", "corstone-320-u85-256"}
    assert {v for g, s, v in comps if (g, s) == ("Platform", "Ethos-U NPU")} == npu_boards
    for name in npu_boards:
        comp = comps[("Platform", "Ethos-U NPU", name)]
        assert {f.get("name") for f in comp.iter("file")} == {"firmware/boards/npu/ethos_u.cc"}
        reqs = requires(comp.get("condition"))
        assert ETHOS_U_DRIVER in reqs
        assert {"Dcore": pack._CORE_NAMES[load_board(name).core.cpu]}.items() <= next(
            r for r in reqs if "Dcore" in r).items()
        pre = comp.findtext("Pre_Include_Local_Component_h")
        for key in ("TMCU_BOARD_NPU_BASE", "TMCU_BOARD_NPU_IRQ"):
            assert f"#define {key} {load_board(name).defines[key]}" in pre


def _npu_macros(cpp: str, headers: list[str], tmp_path: Path) -> dict[str, str]:
    """TMCU_BOARD_NPU_ARCH and _MACS as the delegate sees them after the
    pre-includes (texts, in order), through the preprocessor `cpp`."""
    files = []
    for i, text in enumerate(headers):
        files += ["-include", str(tmp_path / f"pre_{i}.h")]
        (tmp_path / f"pre_{i}.h").write_text(text + "\n")
    probe = tmp_path / "probe.cc"
    probe.write_text("int arch = TMCU_BOARD_NPU_ARCH;\nint macs = TMCU_BOARD_NPU_MACS;\n")
    proc = subprocess.run([cpp, "-E", "-P", *files, str(probe)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return dict(re.findall(r"int (\w+) = (\w+);", proc.stdout))


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host g++ to preprocess with")
@pytest.mark.parametrize("variant", list(DRIVER_VARIANTS))
def test_ethos_u_delegate_takes_the_npu_from_the_driver_variant(built, variant: str, tmp_path: Path) -> None:
    """Each variant of the driver component gives the delegate the NPU code
    torchmcu.boards uses for it (0 U55, 1 U65, 2 U85) and its MAC count; a
    board's own TMCU_BOARD_NPU_* macros win over the driver's."""
    _, root = _pdsc(built[0])
    local = _component(root.find("components/bundle"), {"Cgroup": "Delegates", "Csub": "Ethos-U"}).findtext(
        "Pre_Include_Local_Component_h")
    arch, code = DRIVER_VARIANTS[variant]
    from torchmcu.boards import Npu

    want = Npu(f"ethos-{arch}-256", "", "", (), base=0, irq=0).defines
    assert want["TMCU_BOARD_NPU_ARCH"] == str(code)
    got = _npu_macros("g++", [_driver_pre_include(variant, 256), local], tmp_path)
    assert got == {"arch": want["TMCU_BOARD_NPU_ARCH"], "macs": "256"}
    board = "#define TMCU_BOARD_NPU_ARCH 7\n#define TMCU_BOARD_NPU_MACS 64"
    assert _npu_macros("g++", [board, _driver_pre_include(variant, 256), local], tmp_path) == {"arch": "7", "macs": "64"}


def _driver_pre_include(variant: str, macs: int) -> str:
    """What the driver component's global pre-include defines (as the driver's
    pack description writes it for the variant)."""
    arch, _ = DRIVER_VARIANTS[variant]
    return f"#define ETHOSU_ARCH {arch}\n#define ETHOS{arch.upper()}\n#define ETHOSU_MACS {macs}\n"


@needs_arm_gcc
@pytest.mark.skipif(not os.environ.get(ETHOSU_DRIVER_ENV),
                    reason=f"{ETHOSU_DRIVER_ENV} is not set: the Ethos-U delegate compiles against the "
                           "Ethos-U core driver's headers, which torchmcu does not ship")
@pytest.mark.parametrize("board", ["corstone-300-u55-128", "corstone-320-u85-256"])
def test_ethos_u_components_compile_from_the_description(built, board: str, tmp_path: Path) -> None:
    """The delegate and the board's NPU support compile for the board's core
    from the description alone, as a pack tool would build them beside the
    driver component (its global pre-include first, then each component's
    local one), and the delegate checks command streams against the NPU the
    driver is configured for."""
    pack_path, _ = built
    root_dir = tmp_path / "pack"
    with zipfile.ZipFile(pack_path) as z:
        z.extractall(root_dir)
    _, root = _pdsc(pack_path)
    bundle = root.find("components/bundle")
    b = load_board(board)
    cpu = subprocess.run(["arm-none-eabi-g++", *b.cflags, "-E", "-x", "c++", "-", "-o", os.devnull],
                         input="", capture_output=True, text=True, check=False)
    if cpu.returncode != 0:
        pytest.skip(f"this arm-none-eabi-g++ cannot compile for {b.core.cpu} ({board}): {cpu.stderr.splitlines()[0]}")
    arch, macs = b.npu.accelerator.removeprefix("ethos-").split("-")
    variant = next(v for v, (a, _) in DRIVER_VARIANTS.items() if a == arch)
    driver_inc = Path(os.environ[ETHOSU_DRIVER_ENV]) / "include"
    global_h = tmp_path / "Pre_Include_Global.h"
    global_h.write_text(_driver_pre_include(variant, int(macs)))

    includes: set[Path] = set()
    jobs: list[tuple[Path, Path | None]] = []  # (source, its component's local pre-include)
    wanted = [{"Cgroup": "Runtime"}, {"Cgroup": "Platform", "Csub": "Arm MPS", "Cvariant": board},
              {"Cgroup": "Delegates", "Csub": "Ethos-U"}, {"Cgroup": "Platform", "Csub": "Ethos-U NPU", "Cvariant": board}]
    for i, want in enumerate(wanted):
        comp = _component(bundle, want)
        local = None
        if comp.findtext("Pre_Include_Local_Component_h"):
            local = tmp_path / f"Pre_Include_Local_{i}.h"
            local.write_text(comp.findtext("Pre_Include_Local_Component_h") + "\n")
        for f in comp.iter("file"):
            if f.get("category") == "header":
                includes.add(root_dir / f.get("path"))
            elif f.get("category") == "source" and want["Cgroup"] != "Runtime" and want.get("Csub") != "Arm MPS":
                jobs.append((root_dir / f.get("name"), local))
    assert {s.name for s, _ in jobs} == {"blob.cc", "ethos_u.cc"}
    flags = [*b.cflags, "-std=c++17", "-fno-rtti", "-fno-exceptions", "-Os", "-Wall", "-Werror",
             *(f"-I{p}" for p in sorted(includes)), f"-isystem{driver_inc}", "-include", str(global_h)]

    def compile_one(src: Path, local: Path | None) -> subprocess.CompletedProcess:
        pre = ["-include", str(local)] if local else []
        return subprocess.run(["arm-none-eabi-g++", *flags, *pre, "-c", str(src),
                               "-o", str(tmp_path / f"{src.parent.name}_{src.stem}.o")],
                              capture_output=True, text=True, check=False)

    for src, local in jobs:
        proc = compile_one(src, local)
        assert proc.returncode == 0, f"{src}:\n{proc.stderr}"
    # The delegate's NPU (checked against each command stream's header at load)
    # is the driver's: the architecture code and MAC count torchmcu.boards gives.
    delegate_local = next(local for src, local in jobs if src.name == "blob.cc")
    assert delegate_local is not None
    values = _npu_macros("arm-none-eabi-g++", [global_h.read_text(), delegate_local.read_text()], tmp_path)
    assert values == {"arch": b.defines["TMCU_BOARD_NPU_ARCH"], "macs": b.defines["TMCU_BOARD_NPU_MACS"]}
    # Without the driver component's pre-include, the delegate does not build.
    blob = next(src for src, _ in jobs if src.name == "blob.cc")
    flags.remove(str(global_h))
    flags.remove("-include")
    proc = compile_one(blob, delegate_local)
    assert proc.returncode != 0 and "TMCU_BOARD_NPU_ARCH" in proc.stderr


def test_a_directory_without_a_placeholder_stops_the_pack() -> None:
    template = pack.TEMPLATE.read_text().replace("<!-- @files:kernels/cmsis_nn -->", "")
    with pytest.raises(pack.PackError, match=r"firmware/kernels/cmsis_nn is not in the pack"):
        pack.render_pdsc("file:///tmp/", template=template)


# ---------------------------------------------------------------------------------------------
# The example, built the way a pack tool would: from the description alone


def _component(bundle: ElementTree.Element, want: dict[str, str]) -> ElementTree.Element:
    keys = ("Cgroup", "Csub", "Cvariant")
    found = [c for c in bundle.findall("component") if all(c.get(k) == want.get(k) for k in keys)]
    assert len(found) == 1, want
    return found[0]


@needs_arm_gcc
@needs_qemu
def test_pack_example_builds_from_the_description_and_runs_in_qemu(built, tmp_path: Path) -> None:
    from torchmcu.sim import run_qemu

    pack_path, out = built
    root_dir = tmp_path / "pack"
    with zipfile.ZipFile(pack_path) as z:
        z.extractall(root_dir)
    _, root = _pdsc(pack_path)
    bundle = root.find("components/bundle")
    example = root.find("examples/example")
    folder = root_dir / example.get("folder")
    board = load_board(pack.EXAMPLE_BOARD)

    sources: list[tuple[Path, list[str]]] = []  # (file, extra flags)
    includes: set[Path] = {folder / "model"}
    scripts = []
    for i, attrs in enumerate(example.findall("attributes/component")):
        comp = _component(bundle, attrs.attrib)
        extra = []
        pre = comp.findtext("Pre_Include_Local_Component_h")
        if pre:  # what a pack tool does: a header included first in this component's files
            header = tmp_path / f"pre_include_{i}.h"
            header.write_text(pre + "\n")
            extra = ["-include", str(header)]
        for f in comp.iter("file"):
            path = root_dir / f.get("name")
            if f.get("category") == "header":
                includes.add(root_dir / (f.get("path") or Path(f.get("name")).parent.as_posix()))
            elif f.get("category") == "source":
                sources.append((path, extra))
            elif f.get("category") == "linkerScript":
                scripts.append(path)
    sources += [(p, []) for p in [folder / "main.c", *sorted((folder / "model").glob("*.c*"))]]
    assert len(scripts) == 1

    common = [*board.cflags, "-Os", "-ffunction-sections", "-fdata-sections", *(f"-I{p}" for p in sorted(includes))]
    cxx = ["-std=c++17", "-fno-rtti", "-fno-exceptions", "-fno-threadsafe-statics"]

    def compile_one(job: tuple[int, tuple[Path, list[str]]]) -> Path:
        i, (src, extra) = job
        obj = tmp_path / "obj" / f"{i:03d}_{src.name}.o"
        obj.parent.mkdir(exist_ok=True)
        tool, lang = (("arm-none-eabi-gcc", ["-std=c11"]) if src.suffix == ".c" else ("arm-none-eabi-g++", cxx))
        proc = subprocess.run([tool, *common, *lang, *extra, "-c", str(src), "-o", str(obj)],
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, f"{src}:\n{proc.stderr}"
        return obj

    with ThreadPoolExecutor(max_workers=2) as ex:
        objs = list(ex.map(compile_one, enumerate(sources)))
    elf = tmp_path / "digits.elf"
    proc = subprocess.run(["arm-none-eabi-g++", *map(str, objs), *board.ldflags(scripts[0]), "-o", str(elf)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr

    res = run_qemu(board, elf, None, timeout_s=60)
    assert res.exit_code == 0, res.stdout[-2000:]
    label = int(re.search(r"#define TMCU_DIGIT_LABEL (\d+)", (folder / "model" / "digit_io.h").read_text()).group(1))
    assert f"digits example: the digit is a {label}" in res.stdout
    model_dir = out / "work" / "model"
    # The example checks the stack the platform's linker script gives against the figure `torchmcu build`
    # computed for it (model/model_stack.h, the build's size.json), and says both.
    stack = re.search(r"stack: (\d+) B linked, (\d+) B needed \(computed by torchmcu build\)", res.stdout)
    computed = json.loads((model_dir / "size.json").read_text())["stack"]["computed_bytes"]
    assert stack and int(stack.group(2)) == computed <= int(stack.group(1)) == board.stack_size, res.stdout[-2000:]
    meta = runner.load_meta(model_dir)
    info, outputs = runner.parse_protocol(res.stdout, meta["outputs"])
    assert info["done_status"] == 0 and len(info["sample_ticks"]) == 1
    expected, tol = runner.expected(model_dir, [[np.load(out / "work" / "digit.npy")]])
    mismatch, worst = runner.compare(outputs, expected, tol)
    assert mismatch is None, f"{mismatch} (max abs error {worst})"
    assert int(np.argmax(outputs[0])) == label  # the MLP gets this digit right


# ---------------------------------------------------------------------------------------------
# torchmcu deps cmsis-nn


def _deps(cache: Path, index_url: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != CMSIS_NN_ENV}
    env["TORCHMCU_CACHE_DIR"] = str(cache)
    return subprocess.run([sys.executable, "-m", "torchmcu.cli", "deps", "cmsis-nn", "--index-url", index_url],
                          env=env, capture_output=True, text=True, timeout=120, check=False)


def _refused_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_deps_offline_fails_with_the_manual_alternative(tmp_path: Path) -> None:
    proc = _deps(tmp_path / "cache", f"http://127.0.0.1:{_refused_port()}/index.pidx")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "could not fetch the ARM::CMSIS-NN pack description" in proc.stderr
    assert "unreachable" in proc.stderr
    assert f"set {CMSIS_NN_ENV} to a CMSIS-NN checkout" in proc.stderr
    assert not (tmp_path / "cache" / "cmsis-nn.json").exists()


def test_builds_fall_back_to_the_cached_pack_only_when_it_is_there(tmp_path: Path, monkeypatch) -> None:
    from torchmcu.errors import BuildError

    monkeypatch.delenv(CMSIS_NN_ENV, raising=False)
    monkeypatch.setenv("TORCHMCU_CACHE_DIR", str(tmp_path))
    with pytest.raises(BuildError, match=r"torchmcu deps cmsis-nn"):
        cmsis_build.cmsis_nn_dir()
    gone = tmp_path / "cmsis-nn" / "9.9.9"
    (tmp_path / "cmsis-nn.json").write_text(json.dumps({"path": str(gone)}))
    with pytest.raises(BuildError):  # a record of a folder since deleted is no CMSIS-NN
        cmsis_build.cmsis_nn_dir()
    (gone / "Include").mkdir(parents=True)
    (gone / "Include" / "arm_nnfunctions.h").write_text("")
    (gone / "Source").mkdir()
    assert cmsis_build.cmsis_nn_dir() == gone
    monkeypatch.setenv(CMSIS_NN_ENV, str(tmp_path / "elsewhere"))  # the variable wins
    with pytest.raises(BuildError, match="not a CMSIS-NN checkout"):
        cmsis_build.cmsis_nn_dir()


@pytest.mark.skipif(not os.environ.get(CMSIS_NN_ENV),
                    reason=f"{CMSIS_NN_ENV} is not set: the test packs that CMSIS-NN checkout into a local "
                           "pack index to fetch from")
def test_deps_fetches_caches_and_points_builds_at_the_pack(tmp_path: Path, monkeypatch) -> None:
    """A pack index on 127.0.0.1 listing an ARM.CMSIS-NN pack made from the
    checkout; cmsis-pack-manager fetches it; builds then find it."""
    src = Path(os.environ[CMSIS_NN_ENV])
    serve = tmp_path / "serve"
    serve.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(serve))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    pdsc = (src / "ARM.CMSIS-NN.pdsc").read_text() if (src / "ARM.CMSIS-NN.pdsc").is_file() else (
        '<?xml version="1.0"?><package schemaVersion="1.7.36"><name>CMSIS-NN</name><vendor>ARM</vendor>'
        '<description>CMSIS-NN</description><url>x</url><releases><release version="0.0.0">test</release>'
        "</releases></package>")
    pdsc = re.sub(r"<url>[^<]*</url>", f"<url>{url}</url>", pdsc, count=1)
    version = re.search(r'<release version="([^"]+)"', pdsc).group(1)
    (serve / "ARM.CMSIS-NN.pdsc").write_text(pdsc)
    with zipfile.ZipFile(serve / f"ARM.CMSIS-NN.{version}.pack", "w") as z:
        z.writestr("ARM.CMSIS-NN.pdsc", pdsc)
        for p in sorted([*(src / "Include").rglob("*"), *(src / "Source").rglob("*")]):
            if p.is_file():
                z.write(p, p.relative_to(src).as_posix())
    (serve / "index.pidx").write_text(
        f'<?xml version="1.0" encoding="UTF-8"?>\n<index schemaVersion="1.0.0">\n  <vendor>local</vendor>\n'
        f"  <url>{url}</url>\n  <pindex>\n"
        f'    <pdsc url="{url}" vendor="ARM" name="CMSIS-NN" version="{version}"/>\n  </pindex>\n</index>\n')
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    cache = tmp_path / "cache"
    try:
        proc = _deps(cache, url + "index.pidx")
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads((cache / "cmsis-nn.json").read_text())
    fetched = Path(record["path"])
    assert record["version"] == version and fetched == cache / "cmsis-nn" / version
    assert (fetched / "Include" / "arm_nnfunctions.h").read_bytes() == (src / "Include" / "arm_nnfunctions.h").read_bytes()
    assert len(list((fetched / "Source").rglob("*.c"))) == len(list((src / "Source").rglob("*.c")))
    # Builds use it while the variable is unset.
    monkeypatch.delenv(CMSIS_NN_ENV)
    monkeypatch.setenv("TORCHMCU_CACHE_DIR", str(cache))
    assert cmsis_build.cmsis_nn_dir() == fetched
    # Offline again (the server is gone): the cached descriptions and pack serve.
    again = _deps(cache, url + "index.pidx")
    assert again.returncode == 0, again.stdout + again.stderr


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:
        pass
