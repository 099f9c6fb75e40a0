"""The Zephyr module (zephyr-module/).

Always run (no Zephyr tree needed): module.yml, the Kconfig tree (every symbol
typed, with help, and every CONFIG_TORCHMCU_* the module uses defined), the
runtime sources the module's CMake lists against aot/torchmcu/sources.py's, the
Zephyr platform layer against firmware/boards/platform.h, the twister files,
and the module's build helper (io blob, kernel table, arrays).

With ZEPHYR_BASE pointing at a Zephyr tree (3.1 or newer) and its cmsis module:
the keyword-spotting sample is built with `west build` (inside a west
workspace) or cmake + ninja for the MPS3 AN547 (Cortex-M55) and
qemu_cortex_m3, run in QEMU with a semihosting exit, and its line-protocol
output must equal the compiled program's NumPy reference bit for bit. With
Zephyr's cmsis-nn module present, the CMSIS-NN variant is built and checked too.

Toolchain: with ZEPHYR_TOOLCHAIN_VARIANT unset, the test uses Debian's
arm-none-eabi toolchain as Zephyr's `gnuarmemb` variant: GNUARMEMB_TOOLCHAIN_PATH
is a folder (made under pytest's tmp) whose bin/ links the arm-none-eabi-*
tools and whose arm-none-eabi/ links /usr/lib/arm-none-eabi, so that Zephyr
finds newlib's multilibs (hard-float newlib fails to link otherwise).
Zephyr's Python requirements (pyelftools, PyYAML, pykwalify, packaging; see
$ZEPHYR_BASE/scripts/requirements-base.txt), cmake, ninja and dtc must be
installed; without them the Zephyr tests skip and say which is missing.
Outside a west workspace, name Zephyr's modules (at least hal/cmsis, and
cmsis-nn for the CMSIS-NN variant) in ZEPHYR_MODULES, separated by ';'.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO
from torchmcu import sources as build
from torchmcu.backends.ethos_u.build import DELEGATE_SOURCES
from torchmcu.builder import kernel_table
from torchmcu.compiler import compile
from torchmcu.sim import runner

MODULE = REPO / "zephyr-module"
SAMPLE = MODULE / "samples" / "keyword_spotting"
HELPER = MODULE / "scripts" / "torchmcu_zephyr.py"
PLATFORM_H = REPO / "firmware" / "boards" / "platform.h"
PLATFORM_ZEPHYR = MODULE / "runtime" / "platform_zephyr.cc"
ETHOS_U_DELEGATE = REPO / "firmware" / "delegates" / "ethos_u" / "ethos_u.cc"
# DELEGATE_SOURCES' bare-metal NPU start: never built on Zephyr.
NPU_BOARD_SUPPORT = "boards/npu/ethos_u.cc"

yaml = pytest.importorskip("yaml", reason="PyYAML not installed (make setup installs it with tflite-micro)")


# ---------------------------------------------------------------------------------------------
# module.yml and Kconfig


def test_module_yml_names_existing_build_files() -> None:
    meta = yaml.safe_load((MODULE / "zephyr" / "module.yml").read_text())
    assert meta["name"] == "torchmcu"
    assert (MODULE / meta["build"]["cmake"] / "CMakeLists.txt").is_file()
    assert (MODULE / meta["build"]["kconfig"]).is_file()
    for folder in meta.get("samples", []):
        assert (MODULE / folder).is_dir(), folder


_TYPES = ("bool", "tristate", "int", "hex", "string")


def _kconfig_entries(path: Path, conditions: tuple[str, ...] = ()) -> list[dict]:
    """config/menuconfig/choice entries of a Kconfig file and the files it
    rsources, with their type, prompt, help text, depends on and the `if`
    blocks around them. `source` of Zephyr's own files is not followed."""
    entries: list[dict] = []
    stack = list(conditions)
    lines = path.read_text().splitlines()
    current: dict | None = None
    i = 0
    while i < len(lines):
        raw = lines[i]
        line = raw.strip()
        i += 1
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        if word in ("config", "menuconfig", "choice"):
            current = {"kind": word, "name": rest.strip(), "type": None, "prompt": False, "help": "",
                       "depends": [], "ifs": list(stack), "file": path.name}
            entries.append(current)
        elif word == "if":
            stack.append(rest.strip())
            current = None
        elif word == "endif":
            stack.pop()
            current = None
        elif word in ("endchoice", "menu", "endmenu", "comment"):
            current = None
        elif word == "rsource":
            entries += _kconfig_entries(path.parent / rest.strip().strip('"'), tuple(stack))
            current = None
        elif word in ("source", "osource") or re.match(r"[\w-]+\s*:?=", line):
            current = None  # Zephyr's own files, or a preprocessor assignment (module = ...)
        elif current is not None:
            if word in _TYPES:
                current["type"] = word
                current["prompt"] = current["prompt"] or '"' in rest
            elif word == "prompt":
                current["prompt"] = True
            elif line.startswith("depends on"):
                current["depends"].append(line[len("depends on"):].strip())
            elif word == "help":
                # The help text: the following lines indented deeper than `help`.
                indent = len(raw.expandtabs()) - len(raw.expandtabs().lstrip())
                text = []
                while i < len(lines) and (not lines[i].strip() or len(lines[i].expandtabs())
                                          - len(lines[i].expandtabs().lstrip()) > indent):
                    text.append(lines[i].strip())
                    i += 1
                current["help"] = " ".join(t for t in text if t)
    assert stack == list(conditions), f"{path}: unbalanced if/endif"
    return entries


@pytest.fixture(scope="module")
def kconfig() -> list[dict]:
    return _kconfig_entries(MODULE / "Kconfig")


def test_kconfig_symbols_have_type_help_and_dependencies(kconfig) -> None:
    names = [e["name"] for e in kconfig]
    assert "TORCHMCU" in names and len(names) == len(set(names))
    for e in kconfig:
        where = f"{e['file']}: {e['kind']} {e['name']}"
        assert len(e["help"]) >= 40, f"{where} has no real help text"
        if e["kind"] == "choice":
            assert e["prompt"], f"{where} has no prompt"
        else:
            assert e["type"] in _TYPES, f"{where} has no type"
        # The root symbol says what it needs; every other one sits under it.
        assert e["depends"] or e["ifs"], f"{where} depends on nothing"
    root = next(e for e in kconfig if e["name"] == "TORCHMCU")
    assert root["kind"] == "menuconfig" and root["depends"]
    assert all("TORCHMCU" in e["ifs"] for e in kconfig if e["name"] != "TORCHMCU")


def test_kconfig_cmsis_nn_needs_the_zephyr_module(kconfig) -> None:
    cmsis = next(e for e in kconfig if e["name"] == "TORCHMCU_KERNELS_CMSIS_NN")
    assert "ZEPHYR_CMSIS_NN_MODULE" in cmsis["depends"]


def test_kconfig_ethos_u_needs_zephyrs_ethos_u_driver(kconfig) -> None:
    """The delegate depends on the Ethos-U driver option of either name:
    ARM_ETHOS_U (modules/hal_ethos_u/Kconfig until Zephyr renamed it) or
    ETHOS_U (after), and sits under TORCHMCU like every other option."""
    ethos = next(e for e in kconfig if e["name"] == "TORCHMCU_ETHOS_U")
    assert ethos["type"] == "bool" and ethos["prompt"]
    driver = next(d for d in ethos["depends"] if "||" in d)
    assert set(re.split(r"\s*\|\|\s*", driver)) == {"ARM_ETHOS_U", "ETHOS_U"}
    assert "ZEPHYR_HAL_ETHOS_U_MODULE" in ethos["depends"]  # the driver's sources: Zephyr's hal_ethos_u module
    assert "TORCHMCU" in ethos["ifs"]
    for name in ("CONFIG_ARM_ETHOS_U_NPU_NAME", "CONFIG_ETHOS_U_NPU_NAME"):
        assert name.removeprefix("CONFIG_") in ethos["help"]  # the help says where the NPU comes from


def _module_sources() -> dict[Path, str]:
    return {p: p.read_text() for p in MODULE.rglob("*")
            if p.is_file() and p.suffix in (".txt", ".cmake", ".cc", ".c", ".conf", ".yaml", ".py")}


def test_every_torchmcu_option_used_is_defined_and_every_one_defined_is_used(kconfig) -> None:
    defined = {e["name"] for e in kconfig if e["kind"] != "choice"}
    # The logging template Zephyr's Kconfig.template.log_config makes for module = TORCHMCU.
    defined_elsewhere = {"TORCHMCU_LOG_LEVEL"}
    used: dict[str, Path] = {}
    for path, text in _module_sources().items():
        for name in re.findall(r"CONFIG_(TORCHMCU\w*)", text):
            used.setdefault(name, path)
    undefined = {n: str(p.relative_to(REPO)) for n, p in used.items() if n not in defined | defined_elsewhere}
    assert not undefined, f"options used but not in Kconfig: {undefined}"
    unused = defined - set(used) - {"TORCHMCU_KERNELS_PORTABLE"}  # the choice's default: nothing to test
    assert not unused, f"Kconfig options nothing reads: {sorted(unused)}"


# ---------------------------------------------------------------------------------------------
# The runtime sources and the platform layer


def _cmake_lists(path: Path) -> dict[str, list[str]]:
    text = re.sub(r"#.*", "", path.read_text())
    return {m.group(1): m.group(2).split() for m in re.finditer(r"set\((\w+)\s+([^)]*)\)", text)}


def test_cmake_lists_the_runtime_sources_torchmcu_builds() -> None:
    lists = _cmake_lists(MODULE / "runtime" / "sources.cmake")
    fw = build.FIRMWARE

    def rel(paths) -> list[str]:
        return sorted(str(Path(p).relative_to(fw)) for p in paths)

    assert sorted(lists["TORCHMCU_CORE_SOURCES"]) == sorted(build.CORE_SOURCES)
    assert sorted(lists["TORCHMCU_APP_SOURCES"]) == sorted(build.APP_SOURCES)
    assert sorted(lists["TORCHMCU_PORTABLE_KERNEL_SOURCES"]) == rel(build.kernel_sources())
    # The CMSIS-NN kernel set (torchmcu.backends.cmsis_nn.build): every .cc of firmware/kernels/cmsis_nn/.
    assert sorted(lists["TORCHMCU_CMSIS_NN_KERNEL_SOURCES"]) == rel((fw / "kernels" / "cmsis_nn").glob("*.cc"))
    # The Ethos-U delegate (torchmcu.backends.ethos_u.build) less its bare-metal NPU board support, which
    # would start the NPU a second time beside Zephyr's driver.
    assert sorted(lists["TORCHMCU_ETHOS_U_SOURCES"]) == sorted(
        s for s in DELEGATE_SOURCES if s != NPU_BOARD_SUPPORT)
    assert NPU_BOARD_SUPPORT in DELEGATE_SOURCES
    for name, files in lists.items():
        for f in files:
            assert (fw / f).is_file(), f"{name}: firmware/{f} does not exist"


def test_every_source_list_is_built_under_its_option() -> None:
    """runtime/CMakeLists.txt adds each list of sources.cmake: the core and
    portable kernels always, the others under their Kconfig option."""
    lists = set(_cmake_lists(MODULE / "runtime" / "sources.cmake"))
    text = re.sub(r"#.*", "", (MODULE / "runtime" / "CMakeLists.txt").read_text())
    options = {"TORCHMCU_APP_SOURCES": "CONFIG_TORCHMCU_APP",
               "TORCHMCU_CMSIS_NN_KERNEL_SOURCES": "CONFIG_TORCHMCU_KERNELS_CMSIS_NN",
               "TORCHMCU_ETHOS_U_SOURCES": "CONFIG_TORCHMCU_ETHOS_U"}
    always = re.search(r"set\(torchmcu_sources ([^)]*)\)", text).group(1).split()
    assert sorted(always) == ["${TORCHMCU_CORE_SOURCES}", "${TORCHMCU_PORTABLE_KERNEL_SOURCES}"]
    assert lists == {"TORCHMCU_CORE_SOURCES", "TORCHMCU_PORTABLE_KERNEL_SOURCES", *options}
    for name, option in options.items():
        assert re.search(rf"if\({option}\)\s*list\(APPEND torchmcu_sources \${{{name}}}\)", text), name


def _run_runtime_cmake(tmp_path: Path, config: dict[str, str]) -> subprocess.CompletedProcess:
    """runtime/CMakeLists.txt in CMake's script mode with Zephyr's functions
    replaced by ones that print what they are given, for a configuration."""
    script = tmp_path / "run.cmake"
    lines = [f'set({k} "{v}")' for k, v in {"TORCHMCU_FIRMWARE_DIR": str(REPO / "firmware"), **config}.items()]
    for fn in ("zephyr_library_named", "zephyr_library_sources", "zephyr_library_compile_definitions",
               "zephyr_library_compile_options", "target_include_directories"):
        lines += [f"function({fn})", f'  message(STATUS "{fn}: ${{ARGN}}")', "endfunction()"]
    lines.append(f"include({MODULE / 'runtime' / 'CMakeLists.txt'})")
    script.write_text("\n".join(lines) + "\n")
    return subprocess.run(["cmake", "-P", str(script)], capture_output=True, text=True,
                          check=False, timeout=60)


def _reported(out: str, fn: str) -> list[str]:
    return [item for line in re.findall(rf"-- {fn}: (.*)", out) for item in line.split(";") if item]


ETHOS_U_CASES = [  # Kconfig values -> the NPU the delegate checks command streams against
    ({"CONFIG_ARM_ETHOS_U_NPU_NAME": "ethos-u55-128"}, ("0", "128")),  # Zephyr 3.x option names
    ({"CONFIG_ARM_ETHOS_U_NPU_NAME": "ethos-u65-512"}, ("1", "512")),
    ({"CONFIG_ETHOS_U_NPU_NAME": "ethos-u85-256"}, ("2", "256")),      # after the rename
]


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")
@pytest.mark.parametrize(("npu", "expected"), ETHOS_U_CASES, ids=[next(iter(n.values())) for n, _ in ETHOS_U_CASES])
def test_cmake_adds_the_delegate_for_the_configured_npu(tmp_path: Path, npu: dict[str, str],
                                                        expected: tuple[str, str]) -> None:
    fw = REPO / "firmware"
    ethos = _cmake_lists(MODULE / "runtime" / "sources.cmake")["TORCHMCU_ETHOS_U_SOURCES"]
    base = {"CONFIG_TORCHMCU": "y", "CONFIG_TORCHMCU_VERIFY": "y"}

    off = _run_runtime_cmake(tmp_path, base)
    assert off.returncode == 0, off.stderr
    sources = _reported(off.stdout, "zephyr_library_sources")
    assert f"{fw}/core/program.cc" in sources and not any("ethos_u" in s for s in sources)
    assert not any("NPU" in d for d in _reported(off.stdout, "zephyr_library_compile_definitions"))

    on = _run_runtime_cmake(tmp_path, {**base, "CONFIG_TORCHMCU_ETHOS_U": "y", **npu})
    assert on.returncode == 0, on.stderr
    sources = _reported(on.stdout, "zephyr_library_sources")
    assert {f"{fw}/{s}" for s in ethos} <= set(sources)
    assert f"{fw}/{NPU_BOARD_SUPPORT}" not in sources
    defs = _reported(on.stdout, "zephyr_library_compile_definitions")
    assert {f"TMCU_BOARD_NPU_ARCH={expected[0]}", f"TMCU_BOARD_NPU_MACS={expected[1]}"} <= set(defs)
    # The codes are the ones torchmcu.boards gives the same accelerator.
    arch = {"0": "u55", "1": "u65", "2": "u85"}[expected[0]]
    from torchmcu.boards import Npu
    npu_defines = Npu(f"ethos-{arch}-{expected[1]}", "", "", (), base=0, irq=0).defines
    assert (npu_defines["TMCU_BOARD_NPU_ARCH"], npu_defines["TMCU_BOARD_NPU_MACS"]) == expected


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")
def test_cmake_stops_on_an_unknown_npu_name(tmp_path: Path) -> None:
    proc = _run_runtime_cmake(tmp_path, {"CONFIG_TORCHMCU": "y", "CONFIG_TORCHMCU_ETHOS_U": "y",
                                         "CONFIG_ARM_ETHOS_U_NPU_NAME": "ethos-n78"})
    assert proc.returncode != 0
    assert "CONFIG_TORCHMCU_ETHOS_U needs the Ethos-U driver's NPU name" in proc.stderr


def _platform_functions() -> list[str]:
    return re.findall(r"\b(tmcu_platform_\w+)\s*\(", re.sub(r"//.*", "", PLATFORM_H.read_text()))


def test_zephyr_platform_defines_every_platform_function(tmp_path: Path, tiny_model: Path) -> None:
    """platform_zephyr.cc defines all but the io window, which the generated
    model_io.c defines; nothing is declared twice."""
    declared = set(_platform_functions())
    assert {"tmcu_platform_write", "tmcu_platform_ticks", "tmcu_platform_exit"} <= declared
    # The Ethos-U delegate's own question to the platform, declared where it is asked.
    delegate = re.findall(r'extern "C" [\w\s*]+?\b(tmcu_platform_\w+)\s*\(', ETHOS_U_DELEGATE.read_text())
    assert delegate == ["tmcu_platform_npu_status"]
    declared |= set(delegate)
    ours = set(re.findall(r'extern "C" [\w\s*]+?\b(tmcu_platform_\w+)\s*\(', PLATFORM_ZEPHYR.read_text()))
    io_c = tmp_path / "model_io.c"
    _helper("io-blob", tiny_model, tiny_model / "example_inputs.npz", io_c)
    generated = set(re.findall(r"\b(tmcu_platform_\w+)\s*\(void\)\s*\{", io_c.read_text()))
    assert ours | generated == declared, f"missing: {declared - ours - generated}"
    assert not ours & generated


# ---------------------------------------------------------------------------------------------
# The build helper


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("zephyr_tiny")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3)).eval()
    compile(model, (torch.randn(1, 6),), "mps3-an547", out, progress=False)
    return out


def _helper(*args: object) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "aot")}
    proc = subprocess.run([sys.executable, str(HELPER), *map(str, args)], capture_output=True, text=True, check=False,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc


def _c_array_bytes(text: str) -> bytes:
    body = text[text.index("{", text.index("tmcu_io_blob[")) + 1:text.index("};")]
    return bytes(int(v, 16) for v in re.findall(r"0x([0-9a-f]{2})", body))


def test_io_blob_is_the_runners_blob(tmp_path: Path, tiny_model: Path) -> None:
    x = np.random.default_rng(1).standard_normal((3, 1, 6)).astype(np.float32)  # three samples
    np.save(tmp_path / "x.npy", x)
    meta = runner.load_meta(tiny_model)
    samples = runner.program_samples(meta, runner.split_samples(meta, [x]))
    for profile in (False, True):
        out = tmp_path / f"io_{profile}.c"
        _helper("io-blob", tiny_model, tmp_path / "x.npy", out, *(["--profile"] if profile else []))
        assert _c_array_bytes(out.read_text()) == runner.io_blob(samples, profile=profile)


def test_io_blob_compiles_as_c(tmp_path: Path, tiny_model: Path) -> None:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no host C compiler (gcc) to compile the generated file with")
    out = tmp_path / "model_io.c"
    _helper("io-blob", tiny_model, tiny_model / "example_inputs.npz", out)
    proc = subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{REPO / 'firmware'}", "-c",
                           str(out), "-o", str(tmp_path / "model_io.o")], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("kernels", ["portable", "cmsis-nn"])
def test_kernel_table_is_the_one_torchmcu_build_writes(tmp_path: Path, tiny_model: Path, kernels: str) -> None:
    out = tmp_path / "table.cc"
    _helper("kernel-table", tiny_model, kernels, out)
    codes = (tiny_model / "kernels.txt").read_text().split()
    assert out.read_text() == kernel_table.kernel_table_source(codes, kernels)
    if kernels == "portable":  # what `torchmcu compile` itself wrote
        assert out.read_text() == (tiny_model / "kernel_table.cc").read_text()


def test_arrays_saves_what_the_function_returns(tmp_path: Path) -> None:
    entry = tmp_path / "data.py"
    entry.write_text("import numpy as np\n"
                     "def one():\n    return np.arange(6, dtype=np.float32).reshape(2, 3)\n"
                     "def two():\n    return (np.zeros(2, np.int8), np.ones(3, np.float32))\n"
                     "def named():\n    return {'a': np.full(4, 7, np.int32)}\n")
    expected: dict[str, dict[str, np.ndarray]] = {"one": {"arr_0": np.arange(6, dtype=np.float32).reshape(2, 3)},
                "two": {"arr_0": np.zeros(2, np.int8), "arr_1": np.ones(3, np.float32)},
                "named": {"a": np.full(4, 7, np.int32)}}
    for fn, arrays in expected.items():
        out = tmp_path / f"{fn}.npz"
        _helper("arrays", f"{entry}:{fn}", out)
        with np.load(out) as z:
            assert sorted(z.files) == sorted(arrays)
            for k, v in arrays.items():
                assert z[k].dtype == v.dtype and np.array_equal(z[k], v)


# ---------------------------------------------------------------------------------------------
# Twister files


def _twister(name: str) -> dict:
    return yaml.safe_load((SAMPLE / name).read_text())


def test_twister_files_agree_and_use_a_console_harness() -> None:
    old, new = _twister("sample.yaml"), _twister("tests.yaml")
    assert old == new, "sample.yaml (older Zephyr) and tests.yaml (current Zephyr) must hold the same scenarios"
    assert set(old["tests"]) == {"sample.torchmcu.keyword_spotting", "sample.torchmcu.keyword_spotting.cmsis_nn"}
    common = old["common"]
    assert common["harness"] == "console"
    config = common["harness_config"]
    assert config["type"] == "multi_line" and config["ordered"] is True
    for regex in config["regex"]:
        re.compile(regex)
    cmsis = old["tests"]["sample.torchmcu.keyword_spotting.cmsis_nn"]
    assert cmsis["modules"] == ["cmsis-nn"]
    assert "CONFIG_TORCHMCU_KERNELS_CMSIS_NN=y" in cmsis["extra_configs"]


# ---------------------------------------------------------------------------------------------
# Zephyr builds (need ZEPHYR_BASE)

ZEPHYR_BASE = Path(os.environ["ZEPHYR_BASE"]).expanduser() if os.environ.get("ZEPHYR_BASE") else None
_ZEPHYR_PYTHON_MODULES = {"elftools": "pyelftools", "yaml": "PyYAML", "pykwalify": "pykwalify",
                          "packaging": "packaging"}


def _zephyr_version(base: Path) -> tuple[int, int, int]:
    text = (base / "VERSION").read_text()
    fields = dict(re.findall(r"^(VERSION_MAJOR|VERSION_MINOR|PATCHLEVEL)\s*=\s*(\d+)", text, re.MULTILINE))
    return int(fields["VERSION_MAJOR"]), int(fields["VERSION_MINOR"]), int(fields.get("PATCHLEVEL", 0))


def _west_workspace(base: Path) -> bool:
    if shutil.which("west") is None:
        return False
    return subprocess.run(["west", "topdir"], cwd=base, capture_output=True, check=False).returncode == 0


def _modules() -> list[Path]:
    """The modules named in ZEPHYR_MODULES (';'-separated), if any."""
    return [Path(p) for p in os.environ.get("ZEPHYR_MODULES", "").split(";") if p]


def _zephyr_skip_reason() -> str | None:
    if ZEPHYR_BASE is None:
        return ("ZEPHYR_BASE is not set: point it at a Zephyr tree (3.1 or newer) with its cmsis module "
                "(a west workspace, or list module directories in ZEPHYR_MODULES=a;b), install Zephyr's "
                "Python requirements, cmake, ninja and dtc (see zephyr-module/README.md)")
    if not (ZEPHYR_BASE / "VERSION").is_file():
        return f"ZEPHYR_BASE={ZEPHYR_BASE} is not a Zephyr tree (no VERSION file)"
    if _zephyr_version(ZEPHYR_BASE) < (3, 1, 0):
        return f"Zephyr {'.'.join(map(str, _zephyr_version(ZEPHYR_BASE)))} is older than 3.1"
    missing = [t for t in ("cmake", "ninja", "dtc", "qemu-system-arm") if shutil.which(t) is None]
    if "ZEPHYR_TOOLCHAIN_VARIANT" not in os.environ and shutil.which("arm-none-eabi-gcc") is None:
        missing.append("arm-none-eabi-gcc (or set ZEPHYR_TOOLCHAIN_VARIANT)")
    if missing:
        return f"not installed: {', '.join(missing)} (Debian: cmake ninja-build device-tree-compiler)"
    python = [pkg for mod, pkg in _ZEPHYR_PYTHON_MODULES.items() if importlib.util.find_spec(mod) is None]
    if python:
        return (f"Zephyr's build needs {', '.join(python)} in {sys.executable}: "
                f"pip install -r {ZEPHYR_BASE}/scripts/requirements-base.txt")
    if not _modules() and not _west_workspace(ZEPHYR_BASE):
        return (f"{ZEPHYR_BASE} is not in a west workspace: set ZEPHYR_MODULES to Zephyr's module "
                "directories (at least modules/hal/cmsis), ';'-separated")
    return None


needs_zephyr = pytest.mark.skipif(_zephyr_skip_reason() is not None, reason=_zephyr_skip_reason() or "")


def _has_module(module: str, marker: str) -> bool:
    """A Zephyr module is among the modules the build will see (in
    ZEPHYR_MODULES, or else a cloned project of the west workspace) and holds
    the file `marker`."""
    assert ZEPHYR_BASE is not None
    candidates = _modules()
    if not candidates:
        proc = subprocess.run(["west", "list", module, "-f", "{abspath}"], cwd=ZEPHYR_BASE,
                              capture_output=True, text=True, check=False)
        candidates = [Path(proc.stdout.strip())] if proc.returncode == 0 and proc.stdout.strip() else []
    for path in candidates:
        yml = path / "zephyr" / "module.yml"
        name = yaml.safe_load(yml.read_text()).get("name") if yml.is_file() else None
        if (name or path.name) == module and (path / marker).is_file():
            return True
    return False


def _has_cmsis_nn_module() -> bool:
    return _has_module("cmsis-nn", "Include/arm_nnfunctions.h")


def _ethos_u_driver_option(base: Path) -> str | None:
    """The Kconfig option that enables Zephyr's Ethos-U driver in this tree
    (modules/hal_ethos_u/Kconfig): ARM_ETHOS_U, later renamed ETHOS_U; None
    when the tree has no Ethos-U glue."""
    kconfig = base / "modules" / "hal_ethos_u" / "Kconfig"
    text = kconfig.read_text() if kconfig.is_file() else ""
    return next((n for n in ("ETHOS_U", "ARM_ETHOS_U") if re.search(rf"^config {n}\s*$", text, re.MULTILINE)), None)


def _mps3_an547(base: Path) -> str:
    """The AN547's board name in this tree: mps3_an547 before the hardware
    model v2 (Zephyr 3.6), then mps3/an547 (the AN547 as the board's SoC) and
    mps3/corstone300/an547 (a variant of the Corstone-300 SoC, Zephyr 4).
    board.yml is read first: hardware model v2 trees up to 4.0 also hold an
    mps3_an547_defconfig, named after board and SoC."""
    for yml in base.glob("boards/**/mps3/board.yml"):
        board = yaml.safe_load(yml.read_text())["board"]
        for soc in board.get("socs", []):
            if soc["name"] == "an547":
                return "mps3/an547"
            if any(v["name"] == "an547" for v in soc.get("variants", [])):
                return f"mps3/{soc['name']}/an547"
    if list(base.glob("boards/**/mps3_an547_defconfig")):
        return "mps3_an547"
    raise AssertionError(f"no MPS3 AN547 board in {base}")


# The three layouts, as the trees have them (boards/arm/...): Zephyr 3.1-3.5,
# 3.6-3.7 and 4.x.
_AN547_LAYOUTS = {
    "mps3_an547": {"mps3_an547/mps3_an547_defconfig": ""},
    "mps3/an547": {"mps3/mps3_an547_defconfig": "",
                   "mps3/board.yml": "board:\n  name: mps3\n  vendor: arm\n  socs:\n  - name: an547\n"
                                     "    variants:\n    - name: ns\n"},
    "mps3/corstone300/an547": {"mps3/mps3_corstone300_an547_defconfig": "",
                               "mps3/board.yml": "board:\n  name: mps3\n  vendor: arm\n  socs:\n"
                                                 "  - name: an536\n  - name: corstone300\n    variants:\n"
                                                 "    - name: an547\n      variants:\n      - name: ns\n"
                                                 "    - name: an552\n"},
}


@pytest.mark.parametrize("expected", list(_AN547_LAYOUTS))
def test_an547_board_name_follows_the_tree(tmp_path: Path, expected: str) -> None:
    for rel, text in _AN547_LAYOUTS[expected].items():
        path = tmp_path / "boards" / "arm" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert _mps3_an547(tmp_path) == expected


# QEMU as torchmcu.sim runs it: -icount shift=0 (a deterministic instruction
# clock: the cycle counts below follow instructions, they are not cycles of real
# hardware), UART and semihosting on stdout, semihosting exit status as ours.
_QEMU_MACHINE = {"mps3": ["-M", "mps3-an547"], "qemu_cortex_m3": ["-M", "lm3s6965evb", "-cpu", "cortex-m3"]}


def _qemu(board: str, elf: Path) -> subprocess.CompletedProcess:
    machine = _QEMU_MACHINE["mps3" if board.startswith("mps3") else board]
    cmd = ["qemu-system-arm", *machine, "-icount", "shift=0,align=off,sleep=off", "-display", "none",
           "-monitor", "none", "-chardev", "stdio,id=serial0,mux=on,signal=off", "-serial", "chardev:serial0",
           "-semihosting-config", "enable=on,target=native,chardev=serial0", "-kernel", str(elf)]
    return subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
                          check=False)


@pytest.fixture(scope="module")
def zephyr_env(tmp_path_factory) -> dict[str, str]:
    """The environment of the Zephyr builds: this Python first on PATH (Zephyr's
    CMake runs its scripts with the python3 it finds), and Debian's toolchain as
    the gnuarmemb variant unless a toolchain is already chosen."""
    env = {**os.environ, "ZEPHYR_BASE": str(ZEPHYR_BASE)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if "ZEPHYR_TOOLCHAIN_VARIANT" not in env:
        found = shutil.which("arm-none-eabi-gcc")
        assert found is not None  # checked by the skip condition
        gcc = Path(found).resolve()
        root = tmp_path_factory.mktemp("gnuarmemb")
        (root / "bin").mkdir()
        for tool in gcc.parent.glob("arm-none-eabi-*"):
            (root / "bin" / tool.name).symlink_to(tool)
        sysroot = gcc.parent.parent / "lib" / "arm-none-eabi"
        (root / "arm-none-eabi").symlink_to(sysroot if sysroot.is_dir() else Path("/usr/lib/arm-none-eabi"))
        env["ZEPHYR_TOOLCHAIN_VARIANT"] = "gnuarmemb"
        env["GNUARMEMB_TOOLCHAIN_PATH"] = str(root)
    return env


def _build_sample(env: dict[str, str], board: str, build_dir: Path, cmake_args: list[str]) -> Path:
    assert ZEPHYR_BASE is not None
    cmake_args = [f"-DZEPHYR_EXTRA_MODULES={MODULE}", *cmake_args]
    if _modules():
        cmake_args.append(f"-DZEPHYR_MODULES={';'.join(map(str, _modules()))}")
    if _west_workspace(ZEPHYR_BASE):
        steps = [["west", "build", "-b", board, "-d", str(build_dir), str(SAMPLE), "--", *cmake_args]]
    else:
        steps = [["cmake", "-S", str(SAMPLE), "-B", str(build_dir), "-GNinja", f"-DBOARD={board}", *cmake_args],
                 ["ninja", "-C", str(build_dir)]]
    for cmd in steps:
        proc = subprocess.run(cmd, cwd=ZEPHYR_BASE, env=env, capture_output=True, text=True, timeout=1200,
                              check=False)
        assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-4000:]}"
    return build_dir / "zephyr" / "zephyr.elf"


CASES = [("mps3_an547", "portable"), ("qemu_cortex_m3", "portable"), ("mps3_an547", "cmsis-nn"),
         ("mps3_an547", "ethos-u")]


@needs_zephyr
@pytest.mark.parametrize(("board", "kernels"), CASES, ids=[f"{b}-{k}" for b, k in CASES])
def test_sample_in_qemu_matches_the_reference(board: str, kernels: str, zephyr_env, tmp_path: Path) -> None:
    assert ZEPHYR_BASE is not None
    if kernels == "cmsis-nn" and not _has_cmsis_nn_module():
        pytest.skip("Zephyr's cmsis-nn module (CMSIS-NN 7 or newer) not found: list it in ZEPHYR_MODULES "
                    "or clone it into the west workspace (west.yml project cmsis-nn)")
    args = ["-DCONFIG_TORCHMCU_KERNELS_CMSIS_NN=y"] if kernels == "cmsis-nn" else []
    if kernels == "ethos-u":
        # The delegate compiled and linked beside Zephyr's own Ethos-U driver.
        # The sample's model has no NPU partitions (QEMU has no NPU): its
        # output must not change.
        option = _ethos_u_driver_option(ZEPHYR_BASE)
        if option is None:
            pytest.skip(f"Zephyr {'.'.join(map(str, _zephyr_version(ZEPHYR_BASE)))} at {ZEPHYR_BASE} has no Ethos-U "
                        "driver glue (modules/hal_ethos_u/Kconfig defines neither ETHOS_U nor ARM_ETHOS_U)")
        if not _has_module("hal_ethos_u", "include/ethosu_driver.h"):
            pytest.skip("Zephyr's hal_ethos_u module not found: list it in ZEPHYR_MODULES or clone it into the "
                        "west workspace (west.yml project hal_ethos_u)")
        args = ["-DCONFIG_TORCHMCU_ETHOS_U=y", f"-DCONFIG_{option}=y"]
    if board == "mps3_an547":
        board = _mps3_an547(ZEPHYR_BASE)
    elf = _build_sample(zephyr_env, board, tmp_path / "build", args)
    if kernels == "ethos-u":
        config = (tmp_path / "build" / "zephyr" / ".config").read_text()
        assert "CONFIG_TORCHMCU_ETHOS_U=y" in config
        objects = [p.as_posix() for p in (tmp_path / "build").rglob("*.obj")]
        for src in ("delegates/ethos_u/blob.cc", "delegates/ethos_u/ethos_u.cc"):
            assert any(o.endswith(f"{src}.obj") for o in objects), src
        assert not any(o.endswith(f"{NPU_BOARD_SUPPORT}.obj") for o in objects)  # Zephyr's driver starts the NPU

    res = _qemu(board, elf)
    text = res.stdout
    version = ".".join(map(str, _zephyr_version(ZEPHYR_BASE)))
    print(f"\nZephyr {version}, {board}, {kernels} kernels, QEMU exit status {res.returncode}:\n{text}")
    assert res.returncode == 0, f"{text}\n{res.stderr}"

    gen = tmp_path / "build" / "torchmcu"
    meta = runner.load_meta(gen / "model")
    info, outputs = runner.parse_protocol(text, meta["outputs"])
    assert info["load_status"] == 0 and info["done_status"] == 0
    with np.load(gen / "input.npz") as z:  # the input the build compiled into the image
        inputs = [z[k] for k in z.files]
    samples = runner.split_samples(meta, inputs)
    assert len(info["sample_ticks"]) == len(samples) == 1
    expected, tol = runner.expected(gen / "model", samples)
    assert tol is None  # int8: bit for bit
    mismatch, _ = runner.compare(outputs, expected, tol)
    assert mismatch is None, str(mismatch)

    # The model thread's stack is the build's figure (model_stack.h) plus the sample's own, with
    # CONFIG_HW_STACK_PROTECTION=y where the board has a guard, and what it used (Zephyr painted it)
    # stays within it.
    config = (tmp_path / "build" / "zephyr" / ".config").read_text()
    if "CONFIG_ARCH_HAS_STACK_PROTECTION=y" in config:  # an MPU guard (the AN547; not qemu_cortex_m3's board)
        assert "CONFIG_HW_STACK_PROTECTION=y" in config
    figure = int(re.search(r"#define TMCU_MODEL_STACK_BYTES (\d+)",
                           (gen / "model" / "model_stack.h").read_text()).group(1))
    sized = re.search(r"model thread stack (\d+) B = model (\d+) B \(computed\) \+ app (\d+) B", text)
    assert sized and int(sized.group(2)) == figure and int(sized.group(1)) == figure + int(sized.group(3)), text
    used = re.search(r"model thread stack used (\d+) of (\d+) B \(measured\)", text)
    assert used and 0 < int(used.group(1)) <= int(sized.group(1)) <= int(used.group(2)), text
    ticks = info["sample_ticks"][0]
    assert 0 < ticks < 2**31, ticks  # no backward step of the counter read as a wrap

    # The twister harness would pass on this output: its regexes, in order.
    position = 0
    for regex in _twister("sample.yaml")["common"]["harness_config"]["regex"]:
        m = re.compile(regex).search(text, position)
        assert m is not None, f"twister regex {regex!r} not found in order"
        position = m.end()

    if kernels == "cmsis-nn":
        table = (gen / "kernel_table_cmsis_nn.cc").read_text()
        assert "cmsis_nn::" in table


@needs_zephyr
def test_module_yml_passes_zephyrs_schema() -> None:
    assert ZEPHYR_BASE is not None
    spec = importlib.util.spec_from_file_location("zephyr_module", ZEPHYR_BASE / "scripts" / "zephyr_module.py")
    assert spec is not None and spec.loader is not None
    zephyr_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(zephyr_module)
    import pykwalify.core

    schema = yaml.safe_load(zephyr_module.METADATA_SCHEMA)
    meta = yaml.safe_load((MODULE / "zephyr" / "module.yml").read_text())
    pykwalify.core.Core(source_data=meta, schema_data=schema).validate(raise_exception=True)
