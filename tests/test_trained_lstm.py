"""int8 and a16w8 numerics on trained weights, judged against PyTorch's own
quantized model (issue #26, item 3).

silero-vad's trained LSTM tail (LSTMCell 128 -> ReLU -> 1x1 conv -> sigmoid,
its weights from the silero-vad package on PyPI, never committed), fed the
real outputs of silero's own encoder on synthetic speech-like audio, with the
hidden and cell states it carries from chunk to chunk. Compiled, built and
checked as users run it: `compile`, `build` and `run --check` as separate
processes. The check compares the firmware with the float model and with
PyTorch's q/dq model of the same program (model.pt2): it warns, and fails
with --strict, when an output is more than 1 dB below the q/dq model's SQNR
against float or more than --qdq-lsb steps from it.

torchmcu's scheme (the default) is within a step of the q/dq model at int8.
TFLite's integer LSTM (--recurrent-weights per-gate: one weight scale per
gate, each side of a gate saturated on its own) sits several steps away on
the same trained weights.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO, needs_arm_gcc, needs_qemu

silero_vad = pytest.importorskip("silero_vad", reason="silero-vad (pip) ships the trained weights: make setup")
pytest.importorskip("safetensors", reason="safetensors (pip) reads silero-vad's weights: make setup")

MODEL = '''
import os

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def weights():
    import silero_vad
    from safetensors.torch import load_file
    return load_file(os.path.join(os.path.dirname(silero_vad.__file__), "data", "silero_vad_16k.safetensors"))


def encoder(w, x):
    """silero-vad v5's 16 kHz front end and encoder (its published structure)."""
    x = F.pad(x, (0, 64), "reflect").unsqueeze(1)
    x = F.conv1d(x, w["stft_conv.weight"], stride=128)
    x = (x[:, :129] ** 2 + x[:, 129:] ** 2).sqrt()
    x = F.relu(F.conv1d(x, w["conv1.weight"], w["conv1.bias"], padding=1))
    x = F.relu(F.conv1d(x, w["conv2.weight"], w["conv2.bias"], stride=2, padding=1))
    x = F.relu(F.conv1d(x, w["conv3.weight"], w["conv3.bias"], stride=2, padding=1))
    return F.relu(F.conv1d(x, w["conv4.weight"], w["conv4.bias"], padding=1)).squeeze(-1)


class Tail(nn.Module):
    """The decoder: LSTMCell(128, 128), ReLU, 1x1 conv, sigmoid."""

    def __init__(self, w):
        super().__init__()
        self.cell = nn.LSTMCell(128, 128)
        self.final = nn.Conv1d(128, 1, 1)
        sd = {"cell." + k.split(".", 1)[1]: v for k, v in w.items() if k.startswith("lstm_cell")}
        sd.update({"final.weight": w["final_conv.weight"], "final.bias": w["final_conv.bias"]})
        self.load_state_dict(sd)

    def forward(self, x, h, c):
        h, c = self.cell(x, (h, c))
        return torch.sigmoid(self.final(F.relu(h).unsqueeze(-1))).squeeze(-1), h, c


def audio(seconds, seed):
    """Voiced bursts (gliding harmonic tones, amplitude-modulated) between
    stretches of low noise, 16 kHz."""
    rng = np.random.default_rng(seed)
    sr = 16000
    t = np.arange(int(sr * seconds)) / sr
    out = 0.003 * rng.standard_normal(t.size)
    pos = 0.3
    while pos < seconds - 0.5:
        dur = rng.uniform(0.3, 0.9)
        m = (t >= pos) & (t < pos + dur)
        f0 = rng.uniform(90, 220) * (1 + 0.2 * (t[m] - pos))
        ph = 2 * np.pi * np.cumsum(f0) / sr
        sig = sum(np.sin(k * ph) / k for k in range(1, 12))
        sig *= 0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(3, 7) * (t[m] - pos))
        out[m] += rng.uniform(0.05, 0.3) * sig * np.hanning(m.sum())
        pos += dur + rng.uniform(0.2, 0.8)
    return out.astype(np.float32)


@torch.no_grad()
def frames(seconds, seed):
    """The tail's inputs at every 32 ms chunk: (x, h, c) as float arrays."""
    w = weights()
    tail = Tail(w).eval()
    wav = F.pad(torch.from_numpy(audio(seconds, seed)), (64, 0))
    h, c = torch.zeros(1, 128), torch.zeros(1, 128)
    xs, hs, cs = [], [], []
    for i in range(64, wav.numel() - 512, 512):
        x = encoder(w, wav[i - 64:i + 512][None])
        xs.append(x); hs.append(h); cs.append(c)
        _, h, c = tail(x, h, c)
    return {k: torch.cat(v).numpy() for k, v in zip("xhc", (xs, hs, cs))}


def tail():
    data = frames(1.0, 1)
    return Tail(weights()).eval(), tuple(torch.from_numpy(data[k][10:11]) for k in "xhc")


if __name__ == "__main__":
    import sys
    for path, seconds, seed in ((sys.argv[1], 6.0, 0), (sys.argv[2], 3.0, 7)):  # calibration, test
        np.savez(path, **{k: v[:, None] for k, v in frames(seconds, seed).items()})  # [N, 1, 128]: N samples
'''


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchmcu.cli", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"}, check=False)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("silero")
    (d / "silero_tail.py").write_text(MODEL)
    subprocess.run([sys.executable, str(d / "silero_tail.py"), str(d / "cal.npz"), str(d / "test.npz")],
                   check=True, cwd=d)
    return d


def _checked(data, tmp_path, quant, *extra):
    """compile, build, run --check --json in QEMU (M55): the check's record."""
    out = tmp_path / "out"
    for args in (["compile", f"{data / 'silero_tail.py'}:tail", "--board", "mps3-an547", "-o", str(out),
                  "--quant", quant, "--calibration", str(data / "cal.npz"), *extra],
                 ["build", str(out)]):
        proc = cli(*args)
        assert proc.returncode == 0, (args[0], proc.stderr[-2000:])
    proc = cli("run", str(out), "--sim", "qemu", "--input", str(data / "test.npz"), "--check", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])["check"], proc.stderr


@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("quant,lsb", [("int8", 1 + 1e-4), pytest.param("a16w8", 16.0, marks=pytest.mark.zoo)])
def test_trained_lstm_is_as_close_to_float_as_pytorchs_qdq_model(data, tmp_path, quant, lsb):
    check, stderr = _checked(data, tmp_path, quant)
    assert check["passed"], check["first_mismatch"]
    assert check["warnings"] == [], check["warnings"]
    assert "warning" not in stderr, stderr
    for name, s, err in zip(("probability", "h", "c"), check["vs_float"], check["max_lsb_vs_pytorch_qdq"]):
        print(f"{quant} {name}: ours {s['sqnr_db']} dB, q/dq {s['qdq_sqnr_db']} dB against float; {err:g} LSB apart")
        assert s["sqnr_db"] >= s["qdq_sqnr_db"] - 1.0, (name, s)
        assert err <= lsb, (name, err)
    assert check["vs_float"][0]["sqnr_db"] > 30  # the speech probability: trained weights, real inputs


@needs_qemu
@needs_arm_gcc
@pytest.mark.zoo
def test_tflite_scheme_on_trained_lstm_is_flagged(data, tmp_path):
    """TFLite's LSTM scheme on the same weights (per-gate scales, each side
    of a gate saturated on its own, the cell rounded twice): its hidden state
    sits steps away from the q/dq model's where torchmcu's sits within one.
    A user who asks for a tight bound (--qdq-lsb 2) is warned, and --strict
    fails (exit 1)."""
    check, _ = _checked(data, tmp_path, "int8", "--recurrent-weights", "per-gate")
    assert check["passed"], check["first_mismatch"]
    h_lsb = check["max_lsb_vs_pytorch_qdq"][1]
    assert h_lsb > 2, h_lsb
    proc = cli("run", str(tmp_path / "out"), "--sim", "qemu", "--input", str(data / "test.npz"), "--strict",
               "--qdq-lsb", "2")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "LSB from PyTorch's q/dq model, past the bound of 2" in proc.stderr, proc.stderr
