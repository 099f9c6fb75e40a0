"""docs/ci/torchmcu-model.yml, the GitHub Actions workflow users copy: every
`torchmcu` command in it must parse with torchmcu's own argument parser, and
its compile, build and QEMU steps, run here as GitHub would run them (bash
-eo pipefail) on the digits example, must pass, and fail when the firmware
and PyTorch disagree.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from conftest import needs_arm_gcc, needs_qemu
from torchmcu.cli import make_parser

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / "docs" / "ci" / "torchmcu-model.yml"
FVP_GATE = "steps.fvp.outputs.found == 'true'"


def _workflow() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text())


def _steps() -> list[dict[str, Any]]:
    jobs = _workflow()["jobs"]
    assert list(jobs) == ["model"]
    return jobs["model"]["steps"]


def _expand(text: str, env: dict[str, str]) -> str:
    """$VAR and ${VAR} from `env` (others left alone), as bash expands them."""
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env.get(m.group(1) or m.group(2), m.group(0)), text)


def _commands(script: str, env: dict[str, str]) -> list[list[str]]:
    """The `torchmcu ...` commands of a step's script, after variable
    expansion and word splitting; pipes, lists and redirections cut them."""
    commands = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(_expand(line, env), posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        segment: list[str] = []
        for token in [*lexer, ";"]:
            if token and set(token) <= set("();<>|&"):
                if segment and segment[0] == "torchmcu":
                    commands.append(segment)
                segment = []  # after a redirection comes its file: not a command
            else:
                segment.append(token)
    return commands


def _parses(argv: list[str]) -> str | None:
    """None when torchmcu's parser takes argv, else its complaint."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            make_parser().parse_args(argv)
    except SystemExit as e:
        return None if e.code == 0 else err.getvalue().strip()
    return None


def test_workflow_shape() -> None:
    wf = _workflow()
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` key as true
    assert {"push", "pull_request"} <= set(triggers)
    assert wf["defaults"]["run"]["shell"] == "bash"  # -eo pipefail: a failing command fails its step
    for key in ("MODEL", "BOARD", "QUANT", "COMPILE_ARGS", "RUN_ARGS", "TORCHMCU", "FVP_MODEL"):
        assert key in wf["env"], key
    scripts = [s.get("run", "") for s in _steps()]
    assert not any("|| true" in s or "set +e" in s for s in scripts)
    installs = " ".join(scripts)
    for package in ("gcc-arm-none-eabi", "libnewlib-arm-none-eabi", "libstdc++-arm-none-eabi-newlib",
                    "qemu-system-arm"):
        assert package in installs
    env = dict(wf["env"])
    subcommands = [c[1] for s in scripts for c in _commands(s, env)]
    assert subcommands[:3] == ["compile", "build", "run"]
    qemu = next(c for s in scripts for c in _commands(s, env) if c[1] == "run" and "qemu" in c)
    assert "--check" in qemu


def test_every_torchmcu_command_parses() -> None:
    wf = _workflow()
    env = dict(wf["env"])
    sim_choices = next(a.choices for a in make_parser()._subparsers._group_actions[0].choices["run"]._actions
                       if "--sim" in a.option_strings)
    checked = 0
    for step in _steps():
        for argv in _commands(step.get("run", ""), env):
            argv = argv[1:]
            problem = _parses(argv)
            if problem and "fvp" in argv and "fvp" not in sim_choices:
                # torchmcu has no FVP runner yet: the step must stay gated on it.
                assert step.get("if") == FVP_GATE, step
                gate = next(s for s in _steps() if s.get("id") == "fvp")["run"]
                assert 'torchmcu run --help | grep -q "fvp"' in gate
                continue
            assert problem is None, f"step {step.get('name')!r}: torchmcu {' '.join(argv)}\n{problem}"
            checked += 1
    assert checked >= 4


def _run_step(step: dict[str, Any], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # What GitHub runs for `shell: bash`.
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], check=False,
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@needs_arm_gcc
@needs_qemu
def test_steps_run_on_the_digits_model(tmp_path: Path) -> None:
    wf = _workflow()
    assert wf["env"]["MODEL"] == "model.py:make"
    # The user's repository: model.py at its root, here the digits MLP of
    # examples/digits.py (trained for fewer epochs than the demo, to save time).
    (tmp_path / "model.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(REPO / 'examples')!r})\n"
        "import digits\n\n\n"
        "def make():\n"
        "    x, _ = digits.test_set()\n"
        "    return digits.train(epochs=50), (digits.torch.from_numpy(x[:1]),)\n")
    outputs = tmp_path / "github_output"
    outputs.touch()
    env = {**os.environ, **{k: str(v) for k, v in wf["env"].items()}, "GITHUB_OUTPUT": str(outputs),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    ran = []
    qemu_step = None
    for step in _steps():
        script = step.get("run")
        if script is None or "apt-get" in script or "pip install" in script:
            continue  # actions and installers: the machine has what they install
        if step.get("if") == FVP_GATE and "found=true" not in outputs.read_text():
            continue
        proc = _run_step(step, env, tmp_path)
        assert proc.returncode == 0, f"{step['name']}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        ran.append(step["name"])
        if "--sim qemu" in script:
            qemu_step = step
    assert len(ran) >= 4 and qemu_step is not None
    result = json.loads((tmp_path / "build" / "qemu.json").read_text())
    assert result["exit_code"] == 0 and result["check"]["passed"] is True
    assert (tmp_path / "build" / "model" / "firmware.elf").is_file()

    # The same step fails when firmware and PyTorch disagree: PyTorch's side
    # becomes a model of the same shapes with other weights.
    sys.path.insert(0, str(REPO / "examples"))
    try:
        import digits
    finally:
        sys.path.pop(0)
    torch.manual_seed(123)
    other = torch.export.export(digits.DigitsMLP().eval(), (torch.zeros(1, 64),))
    torch.export.save(other, str(tmp_path / "build" / "model" / "model.pt2"))
    proc = _run_step(qemu_step, env, tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "check failed" in proc.stderr


def test_fvp_step_is_skipped_without_fvp(tmp_path: Path) -> None:
    step = next(s for s in _steps() if s.get("id") == "fvp")
    outputs = tmp_path / "github_output"
    outputs.touch()
    env = {**os.environ, "FVP_MODEL": "no-such-fvp-model", "GITHUB_OUTPUT": str(outputs),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = _run_step(step, env, tmp_path)
    assert proc.returncode == 0 and "FVP run skipped" in proc.stdout
    assert "found=true" not in outputs.read_text()


@pytest.mark.parametrize("line, expected", [
    ('torchmcu run build/model --sim qemu --check --json $RUN_ARGS > build/qemu.json',
     [["torchmcu", "run", "build/model", "--sim", "qemu", "--check", "--json", "--input", "x.npy"]]),
    ('if command -v "$FVP_MODEL" >/dev/null && torchmcu run --help | grep -q "fvp"; then',
     [["torchmcu", "run", "--help"]]),
])
def test_command_extraction(line: str, expected: list[list[str]]) -> None:
    assert _commands(line, {"RUN_ARGS": "--input x.npy", "FVP_MODEL": "FVP"}) == expected
