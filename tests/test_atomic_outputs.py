"""Atomic outputs (issue #18): `compile` replaces its directory whole, under
a lock (torchmcu/outdir.py), and the tools' caches live outside the source
tree.

- A second compile into a directory while one runs (another process) is
  refused with one line naming the directory and the holder's pid; the
  first finishes intact (model.pt2 loads).
- Ctrl-C early or late in a compile leaves the previous directory byte for
  byte, with no temporary directory beside it; so does a killed compile,
  whose leftovers the next compile removes.
- A new compile leaves nothing of the old directory (a previous build's
  firmware.elf would otherwise pass for the new program's), and names no
  temporary path in its files.
- The host runner and the fuzzer build into $TORCHMCU_CACHE_DIR, never
  under the repository's build/ (a stand-in compiler: the paths are what is
  tested, not g++).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
import torchmcu
from torch import nn
from torchmcu import fuzz, outdir
from torchmcu.builder import host
from torchmcu.compiler import compile
from torchmcu.errors import TorchMCUError
from torchmcu.export import pack

REPO = Path(__file__).resolve().parents[1]
BOARD = "mps3-an547"


def _linear(n_out: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(n_out)
    return nn.Linear(4, n_out).eval(), (torch.randn(1, 4),)


def _compile(n_out: int, out: Path) -> torchmcu.compiler.Compiled:
    model, x = _linear(n_out)
    return compile(model, x, BOARD, out, progress=False)


def _files(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _beside(out: Path) -> list[str]:
    """What compiles into `out` keep beside it: temporary or set-aside directories, the lock."""
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def _outputs(out: Path) -> list[list[int]]:
    return [o["shape"] for o in json.loads((out / "model.json").read_text())["outputs"]]


# A compile in another process that stops just before it writes model.pt2 until told to go on.
CHILD = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    import torch
    from torchmcu.compiler import compile

    out, ready, go = map(Path, sys.argv[1:4])
    save = torch.export.save

    def held_save(ep, f, *args, **kwargs):
        ready.write_text(str(os.getpid()))
        deadline = time.monotonic() + 300
        while not go.exists():
            if time.monotonic() > deadline:
                sys.exit(3)
            time.sleep(0.05)
        return save(ep, f, *args, **kwargs)

    torch.export.save = held_save
    torch.manual_seed(3)
    compile(torch.nn.Linear(4, 3).eval(), (torch.randn(1, 4),), "mps3-an547", out, progress=False)
""")


def _start_child(out: Path, tmp: Path) -> tuple[subprocess.Popen, Path]:
    ready, go = tmp / "ready", tmp / "go"
    env = dict(os.environ, PYTHONPATH=str(Path(torchmcu.__file__).parents[1]), TORCHMCU_PLOT="0")
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(out), str(ready), str(go)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not ready.exists():
        if child.poll() is not None:
            pytest.fail(f"the child compile ended early ({child.returncode}): {child.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            child.kill()
            pytest.fail("the child compile never reached model.pt2")
        time.sleep(0.1)
    return child, go


def test_second_compile_refused_while_one_runs(tmp_path: Path) -> None:
    out = tmp_path / "model"
    _compile(2, out)
    before = _files(out)
    child, go = _start_child(out, tmp_path)
    try:
        with pytest.raises(TorchMCUError) as e:
            _compile(5, out)
        msg = str(e.value)
        assert "\n" not in msg
        assert str(out) in msg and f"pid {child.pid}" in msg
        # The refused compile touched nothing: neither the directory nor the running compile's work.
        assert _files(out) == before
        assert f".model.tmp-{child.pid}" in _beside(out)
    finally:
        go.write_text("")
        _, err = child.communicate(timeout=300)
    assert child.returncode == 0, err[-2000:]
    assert _outputs(out) == [[1, 3]]  # the first compile's program, whole
    ep = torch.export.load(str(out / "model.pt2"))
    assert tuple(ep.module()(torch.randn(1, 4)).shape) == (1, 3)
    assert _beside(out) == []  # the lock went with the compile
    _compile(5, out)  # and the directory is free again
    assert _outputs(out) == [[1, 5]]


def test_killed_compile_leaves_the_previous_directory_and_is_cleaned_up(tmp_path: Path) -> None:
    out = tmp_path / "model"
    _compile(2, out)
    before = _files(out)
    child, _ = _start_child(out, tmp_path)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=60)
    assert _files(out) == before
    assert f".model.tmp-{child.pid}" in _beside(out)  # what a killed compile leaves...
    _compile(5, out)  # ...does not block the next (the kernel released the flock)...
    assert _outputs(out) == [[1, 5]]
    assert _beside(out) == []  # ...which removes it


@pytest.mark.parametrize("step", ["capture", "format_report"])
def test_interrupt_keeps_the_previous_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    """Ctrl-C early (capture) or late (the report, after model.pt2 and the
    program were written): the previous directory, and the firmware built
    from it, stay byte for byte."""
    import torchmcu.compiler
    import torchmcu.driver.stages

    out = tmp_path / "model"
    _compile(2, out)
    (out / "firmware.elf").write_bytes(b"\x7fELF built from the previous program")
    before = _files(out)
    seen = []

    def interrupt(*args, **kwargs):
        seen.extend(p.name for p in out.parent.glob(".model.tmp-*/*"))
        raise KeyboardInterrupt

    # capture: a stage (torchmcu.driver.stages); format_report: the report writer's (torchmcu.compiler).
    monkeypatch.setattr(torchmcu.driver.stages if step == "capture" else torchmcu.compiler, step, interrupt)
    with pytest.raises(KeyboardInterrupt):
        _compile(5, out)
    if step == "format_report":  # the interrupt really came after the new program was written
        assert {"model.pt2", "model.pte", "model.json", "report.json"} <= set(seen)
    assert _files(out) == before
    assert _beside(out) == []


def test_compile_killed_between_its_renames_is_repaired(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compile killed after setting the old directory aside and before
    renaming the new one in: the next compile puts the old one back first,
    so that its own interruption still leaves it."""
    import torchmcu.compiler as driver

    out = tmp_path / "model"
    _compile(2, out)
    before = _files(out)
    os.rename(out, tmp_path / ".model.old-999999999")
    monkeypatch.setattr(driver, "format_report", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        _compile(5, out)
    assert _files(out) == before
    assert _beside(out) == []


def test_new_compile_leaves_nothing_of_the_old_directory(tmp_path: Path) -> None:
    out = tmp_path / "model"
    _compile(2, out)
    (out / "firmware.elf").write_bytes(b"\x7fELF built from the previous program")
    (out / "size.json").write_text("{}")
    (out / "fw" / "obj").mkdir(parents=True)
    (out / "fw" / "obj" / "app.o").write_bytes(b"old")
    os.chmod(out, 0o750)
    c = _compile(5, out)
    assert c.out_dir == out  # the final path, not the temporary one
    files = _files(out)
    assert not {"firmware.elf", "size.json", "fw/obj/app.o"} & set(files)
    assert not (out / "fw").exists()
    assert {"model.pte", "model.pt2", "model.json", "report.json", "model.h"} <= set(files)
    assert _outputs(out) == [[1, 5]]
    assert (out.stat().st_mode & 0o777) == 0o750  # the user's permissions on the directory stay
    tmp_name = f".{out.name}.tmp-".encode()
    assert [name for name, data in files.items() if tmp_name in data] == []
    assert _beside(out) == []


def test_compile_through_a_symlink_keeps_the_link(tmp_path: Path) -> None:
    real = tmp_path / "real"
    _compile(2, real)
    link = tmp_path / "link"
    link.symlink_to(real)
    c = _compile(5, link)
    assert c.out_dir == link and link.is_symlink()
    assert _outputs(real) == [[1, 5]]


def test_refuses_directories_it_would_destroy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = tmp_path / "project"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(TorchMCUError, match="not empty and not a torchmcu build directory"):
        _compile(2, mine)
    assert _files(mine) == {"notes.txt": b"mine"}
    assert _beside(mine) == []
    out = tmp_path / "model"
    _compile(2, out)
    monkeypatch.chdir(out)
    with pytest.raises(TorchMCUError, match="current directory"):
        _compile(5, Path("."))
    assert _outputs(out) == [[1, 2]]
    (tmp_path / "file").write_text("")
    with pytest.raises(TorchMCUError, match="not a directory"):
        _compile(2, tmp_path / "file")


def test_a_held_directory_is_not_replaced(tmp_path: Path) -> None:
    """outdir.holding: what a step reading and writing a compiled directory
    (a firmware build) takes, so that no compile swaps it halfway."""
    out = tmp_path / "model"
    _compile(2, out)
    before = _files(out)
    with outdir.holding(out):
        with pytest.raises(TorchMCUError, match=f"pid {os.getpid()}"):
            _compile(5, out)
        assert _files(out) == before
    assert _beside(out) == []
    _compile(5, out)
    assert _outputs(out) == [[1, 5]]


# ---------------------------------------------------------------------------------------------
# Caches outside the source tree


def _tree(d: Path) -> dict[str, tuple[int, int]] | None:
    if not d.exists():
        return None
    return {str(p.relative_to(d)): (p.stat().st_size, p.stat().st_mtime_ns) for p in d.rglob("*")}


@pytest.fixture
def fake_compilers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """g++ and clang++ stand-ins that write each -o file: the builds' paths
    are what is tested here, without minutes of compiling."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "g++"
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import sys
        args = sys.argv[1:]
        if "--version" in args:
            print("fake c++ 1.0")
        elif "-o" in args:
            open(args[args.index("-o") + 1], "wb").write(b"built")
    """))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("TORCHMCU_FUZZ_CXX", str(script))
    cache = tmp_path / "cache"
    monkeypatch.setenv("TORCHMCU_CACHE_DIR", str(cache))
    return cache


def test_host_runner_builds_in_the_user_cache(fake_compilers: Path) -> None:
    before = _tree(REPO / "build")
    exe = host.build_host_runner(sanitize=False, verify="minimal")
    assert exe.is_relative_to(fake_compilers / "host") and exe.read_bytes() == b"built"
    assert host.build_host_runner(sanitize=False, verify="minimal") == exe  # cached
    assert sorted(p.name for p in (fake_compilers / "host").iterdir() if p.name.endswith(".tmp")) == []
    assert _tree(REPO / "build") == before


def test_fuzzer_builds_and_keeps_its_corpus_in_the_user_cache(fake_compilers: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    before = _tree(REPO / "build")
    exe = fuzz.build_fuzzer(jobs=1)
    assert exe.is_relative_to(fake_compilers / "fuzz") and exe.read_bytes() == b"built"
    calls = {}

    def make_corpus(corpus):
        calls["corpus"] = Path(corpus)
        return []

    def run_fuzzer(seconds, corpus, artifacts, **kwargs):
        calls["run"] = (Path(corpus), Path(artifacts), Path(kwargs["fuzzer"]))
        return {"executions": 0, "seconds": 0, "exec_per_sec": 0, "coverage": 0, "counters": 0, "features": 0,
                "corpus_units": 0, "new_units": 0, "crashes": []}

    monkeypatch.setattr(fuzz, "make_corpus", make_corpus)
    monkeypatch.setattr(fuzz, "run_fuzzer", run_fuzzer)
    assert fuzz.main(["--seconds", "1"]) == 0
    assert calls["corpus"] == fake_compilers / "fuzz" / "corpus"
    assert calls["run"] == (fake_compilers / "fuzz" / "corpus", fake_compilers / "fuzz" / "artifacts", exe)
    assert _tree(REPO / "build") == before


def test_pack_needs_an_output_folder(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as e:
        pack.main([])
    assert e.value.code == 2
    assert "-o/--output" in capsys.readouterr().err


def test_cache_root_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TORCHMCU_CACHE_DIR", str(tmp_path / "c"))
    assert outdir.cache_root() == tmp_path / "c"
    monkeypatch.delenv("TORCHMCU_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert outdir.cache_root() == tmp_path / "xdg" / "torchmcu"
