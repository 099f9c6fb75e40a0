"""The torchmcu command line.

    torchmcu compile path.py:make --board mps3-an547 -o build/model
    torchmcu build build/model
    torchmcu run build/model --sim qemu --input x.npy [--check] [--json] [--profile]
    torchmcu inspect build/model/model.pte
    torchmcu boards
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from .errors import TorchMCUError


def _progress(msg: str) -> None:
    print(f"torchmcu: {msg}", file=sys.stderr, flush=True)


def cmd_compile(args: argparse.Namespace) -> int:
    from .capture import load_entry
    from .compiler import compile

    t0 = time.monotonic()
    _progress(f"loading {args.model}")
    model, example = load_entry(args.model)
    calibration = None
    if args.calibration:
        calibration = dict(np.load(args.calibration))
    _progress(f"compiling for {args.board} ({args.quant})")
    c = compile(model, example, args.board, args.output, quant=args.quant, calibration=calibration, io=args.io)
    _progress(f"done in {time.monotonic() - t0:.1f} s")
    print((c.out_dir / "report.txt").read_text())
    print(f"wrote {c.out_dir}/ (model.pte, model_pte.c/.h, model_arenas.c/.h, kernel_table.cc, "
          "kernels.txt, memory_plan.json, report.json)")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    from .build import build_firmware, elf_size, kernel_set

    elf = build_firmware(args.dir, board=args.board, opt=args.opt, verbose=args.verbose, kernels=args.kernels)
    size = elf_size(elf)
    by_set: dict[str, list[str]] = {}
    for code, kset in kernel_set(args.dir).items():
        by_set.setdefault(kset, []).append(code)
    print("kernels: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(by_set.items())))
    print(f"{elf}: text {size.text} B, data {size.data} B, bss {size.bss} B "
          f"(flash {size.text + size.data} B, static RAM {size.data + size.bss} B)")
    return 0


def _load_inputs(paths: list[str], out_dir: str) -> list[np.ndarray]:
    if not paths:
        with np.load(Path(out_dir) / "example_inputs.npz") as z:
            return [z[k] for k in z.files]
    arrays = []
    for p in paths:
        if p.endswith(".npz"):
            with np.load(p) as z:
                arrays += [z[k] for k in z.files]
        else:
            arrays.append(np.load(p))
    return arrays


def cmd_run(args: argparse.Namespace) -> int:
    from . import runner

    inputs = _load_inputs(args.input, args.dir)
    meta = runner.load_meta(args.dir)
    # The first sample also runs once op by op, so every result carries a profile.
    res = runner.run(args.dir, inputs, sim=args.sim, profile=True, timeout_s=args.timeout)
    report = json.loads((Path(args.dir) / "report.json").read_text())
    ops = []
    for i, op in enumerate(report["ops"]):
        entry: dict[str, Any] = {"name": op["name"], "kind": op["kind"], "backend": op["backend"]}
        if i < len(res.op_ticks):
            entry["instructions"] = res.instructions(res.op_ticks[i])
        ops.append(entry)
    per_inference = [res.instructions(t) for t in res.sample_ticks]
    # Inputs shaped like the example inputs are one sample: outputs then come
    # back shaped as PyTorch gives them, without the sample axis.
    single = [list(x.shape) for x in inputs] == [m["shape"] for m in meta["inputs"]]
    outputs = [o[0] if single and len(o) else o for o in res.outputs]
    result: dict[str, Any] = {
        "exit_code": res.exit_code,
        "outputs": [o.tolist() for o in outputs],
        "instructions": per_inference[0] if per_inference else None,
        "instructions_per_sample": per_inference,
        "load_instructions": res.instructions(res.load_ticks),
        "ops": ops,
        "note": "instruction counts from QEMU -icount shift=0, not cycles" if args.sim == "qemu" else
                "the host runner counts no instructions",
    }
    status = res.exit_code
    if status != 0:
        print(f"torchmcu: firmware exited with status {status}\n{res.raw[-2000:]}", file=sys.stderr)
    if args.check and status == 0:
        samples = runner.split_samples(meta, inputs)
        expected, tol = runner.expected(args.dir, samples)
        mismatch, worst = runner.compare(res.outputs, expected, tol)
        result["check"] = {"passed": mismatch is None, "max_abs_error": worst,
                           "reference": "torchmcu (bit for bit)" if tol is None else "PyTorch",
                           "tolerance": tol, "first_mismatch": str(mismatch) if mismatch else None}
        if tol is None:
            result["check"]["max_lsb_vs_pytorch_qdq"] = runner.lsb_error(args.dir, res.outputs, samples)
        if mismatch is not None:
            print(f"torchmcu: check failed: {mismatch}", file=sys.stderr)
            status = 1
    if args.profile:  # the table below, as data: costliest first
        profile = {"sim": args.sim, "instructions": result["instructions"],
                   "load_instructions": result["load_instructions"], "note": result["note"],
                   "ops": sorted(({"index": i, **op} for i, op in enumerate(ops)),
                                 key=lambda op: -(op.get("instructions") or 0))}
        (Path(args.dir) / "profile.json").write_text(json.dumps(profile, indent=2) + "\n")
    if args.json:
        print(json.dumps(result))
    else:
        for k, o in enumerate(outputs):
            print(f"output {k}: shape {list(o.shape)}\n{o}")
        if result["instructions"] is not None:
            print(f"instructions per inference: {result['instructions']:,} (QEMU -icount, not cycles); "
                  f"load: {result['load_instructions']:,}")
        if args.profile:
            print(f"{'#':>3}  {'op':<24} {'kind':<12} {'instructions':>12}")
            for i, op in sorted(enumerate(ops), key=lambda e: -(e[1].get("instructions") or 0)):
                print(f"{i:>3}  {op['name'][:24]:<24} {op['kind']:<12} {op.get('instructions') or 0:>12,}")
        if "check" in result:
            c = result["check"]
            print(f"check against {c['reference']}: " + ("passed" if c["passed"] else f"FAILED: {c['first_mismatch']}")
                  + f" (max abs error {c['max_abs_error']:.3g})")
            if "max_lsb_vs_pytorch_qdq" in c:
                print(f"difference from PyTorch's q/dq model: {c['max_lsb_vs_pytorch_qdq']} LSB")
    return status


def cmd_inspect(args: argparse.Namespace) -> int:
    from .inspect import describe

    print(describe(Path(args.program).read_bytes(), values=args.values))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .tflite_export import export_tflite, summary

    pte_path = Path(args.dir) / "model.pte"
    if not pte_path.is_file():
        raise TorchMCUError(f"{pte_path} not found: pass a build directory written by `torchmcu compile`")
    data = export_tflite(pte_path.read_bytes())
    out = Path(args.tflite)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    s = summary(data)
    ops = ", ".join(f"{name} x{n}" for name, n in sorted(s["op_counts"].items(), key=lambda e: (-e[1], e[0])))
    print(f"wrote {out}: {s['bytes']:,} bytes, {s['operators']} operators, {s['tensors']} tensors "
          f"({s['inputs']} input(s), {s['outputs']} output(s))\n  {ops}")
    return 0


def cmd_boards(args: argparse.Namespace) -> int:
    from .boards import list_boards, load_board

    for name in list_boards():
        b = load_board(name)
        print(f"{name:<14} {b.description}")
    return 0


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="torchmcu", description="PyTorch models compiled into microcontroller firmware")
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("compile", help="compile a model into a build directory")
    c.add_argument("model", help="path.py:function returning (nn.Module, example_inputs)")
    c.add_argument("--board", required=True, help="board name (see `torchmcu boards`) or a .toml path")
    c.add_argument("-o", "--output", required=True, help="output directory")
    c.add_argument("--quant", default="float32", choices=["float32", "int8"],
                   help="int8: CMSIS-NN/TFLite Micro scheme, post-training quantization (default float32)")
    c.add_argument("--io", default="float", choices=["float", "int8"],
                   help="int8: the program takes and gives int8 (with --quant int8); `run --input` "
                        "still takes float arrays and quantizes them as the device would")
    c.add_argument("--calibration", help=".npz with one array per model input, samples along axis 0 "
                                         "(a single-input model takes any one key); default: the example inputs")
    c.set_defaults(fn=cmd_compile)

    b = sub.add_parser("build", help="build firmware.elf for a compiled model")
    b.add_argument("dir")
    b.add_argument("--board", help="override the board the model was compiled for")
    b.add_argument("--opt", default="-Os", help="optimisation flag (default -Os)")
    b.add_argument("--kernels", default="portable", choices=["portable", "cmsis-nn"],
                   help="int8 kernel set (cmsis-nn: CMSIS-NN from $TORCHMCU_CMSIS_NN_DIR)")
    b.add_argument("-v", "--verbose", action="store_true", help="show the compiler commands")
    b.set_defaults(fn=cmd_build)

    r = sub.add_parser("run", help="run a compiled model in a simulator or on the host")
    r.add_argument("dir")
    r.add_argument("--sim", default="qemu", choices=["qemu", "host"])
    r.add_argument("--input", action="append", default=[],
                   help=".npy per model input (or one .npz); a leading extra axis is a batch of samples. "
                        "Default: the example inputs")
    r.add_argument("--check", action="store_true", help="compare with the reference; exit 1 on a mismatch")
    r.add_argument("--json", action="store_true", help="print the result as JSON")
    r.add_argument("--profile", action="store_true", help="print instructions per op, costliest first, and write DIR/profile.json")
    r.add_argument("--timeout", type=float, default=300.0, help="seconds before the simulator is stopped")
    r.set_defaults(fn=cmd_run)

    i = sub.add_parser("inspect", help="print a model.pte readably")
    i.add_argument("program")
    i.add_argument("--values", action="store_true", help="also print constant values (abridged)")
    i.set_defaults(fn=cmd_inspect)

    e = sub.add_parser("export", help="write a compiled int8 program as a TensorFlow Lite model")
    e.add_argument("dir", help="build directory holding model.pte")
    e.add_argument("--tflite", required=True, metavar="OUT.tflite", help="the .tflite file to write")
    e.set_defaults(fn=cmd_export)

    bl = sub.add_parser("boards", help="list the known boards")
    bl.set_defaults(fn=cmd_boards)
    return p


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except TorchMCUError as e:
        print(f"torchmcu: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
