"""Patch-based inference (plan/tiling.py): RAM and instructions, layer by
layer against band by band, int8, NHWC int8 I/O, in QEMU, bit-checked.

    PYTHONPATH=aot .venv/bin/python bench/patch.py [--boards mps3-an547 mps2-an386]
        [--models mobilenet_v1 mobilenet_v2_035] [--recompute 0.05 0.10]

mobilenet_v1 is MLPerf Tiny's VWW model (96x96; TFLM + CMSIS-NN's arena in
bench/baselines.json); mobilenet_v2_035 is torchvision's MobileNetV2 at
width 0.35 on 144x144 inputs (2 classes), against its own layer-by-layer
bound. For each: compile with tile=False and with each recompute budget,
build, run one sample, check the bits against the program's reference, and
print activation RAM, the layer-by-layer lower bound, the MACs executed,
and the instructions (QEMU -icount shift=0: instructions, not cycles).
Writes bench/patch.md.
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parent))
from commit import measured_at  # noqa: E402

import argparse
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples"))
sys.path.insert(0, str(REPO / "bench"))

import baselines  # noqa: E402
import mlperf_tiny as mt  # noqa: E402
from torchmcu.builder.firmware import build_firmware  # noqa: E402
from torchmcu.compiler import compile  # noqa: E402
from torchmcu.frontend.compat import import_torchvision  # noqa: E402
from torchmcu.sim import runner  # noqa: E402


def mobilenet_v2_035():
    tv = import_torchvision()
    torch.manual_seed(0)
    model = tv.models.mobilenet_v2(width_mult=0.35, num_classes=2).eval()
    g = torch.Generator().manual_seed(1)
    calibration = [(torch.rand(1, 3, 144, 144, generator=g) * 2 - 1,) for _ in range(16)]
    return model, calibration[0], calibration, torch.rand(1, 1, 3, 144, 144, generator=g) * 2 - 1


def mlperf(name: str):
    def make():
        model, example = mt.MODELS[name]()
        return model, example, list(mt.CALIBRATION[name](32, 0)), mt.CALIBRATION[name](1, 1)
    return make


MODELS = {"mobilenet_v1": mlperf("mobilenet_v1"), "mobilenet_v2_035": mobilenet_v2_035}


def measure(name: str, board: str, tile: bool, recompute: float, out: Path) -> dict:
    model, example, calibration, x = MODELS[name]()
    c = compile(model, example, board, out, quant="int8", calibration=calibration, io="int8",
                io_layout="nhwc", tile=tile, tile_recompute=recompute, progress=False)
    build_firmware(out)
    res = runner.run(out, [x], sim="qemu", profile=True)
    expected, _ = runner.expected(out, runner.split_samples(runner.load_meta(out), [x]))
    mismatch, _ = runner.compare(res.outputs, expected, None)
    mem = c.report["memory"]
    return {"model": name, "board": board, "tile": f"{recompute:.2f}" if tile else "off",
            "runs": mem["aliasing"].get("tiled_runs", 0), "activations": mem["activation_bytes"],
            "layer_bound": mem["classic_lower_bound_bytes"], "macs": c.report["macs"],
            "macs_executed": c.report["macs_executed"], "instructions": res.inference_instructions(),
            "bit_exact": res.exit_code == 0 and mismatch is None}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--boards", nargs="*", default=["mps3-an547", "mps2-an386"])
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--recompute", nargs="*", type=float, default=[0.05, 0.10])
    ap.add_argument("--out", default=str(REPO / "build" / "patch"))
    args = ap.parse_args()
    tflm = baselines.load()
    lines = ["| model | board | tiling | runs | activations B | × layer bound | × TFLM arena | MACs executed | "
             "instructions | × untiled | bit-exact |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    ok = True
    for name in args.models:
        for board in args.boards:
            rows = [measure(name, board, False, 0.0, Path(args.out) / f"{name}-{board}-off")]
            rows += [measure(name, board, True, r, Path(args.out) / f"{name}-{board}-{r}") for r in args.recompute]
            for r in rows:
                arena = tflm.get(board, {}).get(name, {}).get("arena_bytes")
                x_tflm = f"{r['activations'] / arena:.3f}" if arena else "—"
                lines.append(f"| {name} | {board} | {r['tile']} | {r['runs']} | {r['activations']:,} | "
                             f"{r['activations'] / r['layer_bound']:.3f} | {x_tflm} | {r['macs_executed']:,} "
                             f"(+{100 * (r['macs_executed'] / r['macs'] - 1):.1f} %) | {r['instructions']:,} | "
                             f"{r['instructions'] / rows[0]['instructions']:.3f} | "
                             f"{'yes' if r['bit_exact'] else 'NO'} |")
                print(lines[-1], flush=True)
                ok &= r["bit_exact"]
    text = ("# Patch-based inference: layer by layer against band by band\n\n"
            "int8, NHWC int8 I/O, portable kernels, QEMU -icount shift=0 (instructions, not cycles); "
            "`tiling` is the recompute budget (tile_recompute); the layer bound is the layer-by-layer "
            "liveness lower bound (no tiling, no aliasing). Command: `PYTHONPATH=aot .venv/bin/python "
            f"bench/patch.py`. Measured at commit {measured_at()}.\n\n" + "\n".join(lines) + "\n")
    (REPO / "bench" / "patch.md").write_text(text)
    print("wrote bench/patch.md")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
