"""The torchmcu command line.

    torchmcu compile path.py:make --board mps3-an547 -o build/model   (or model.pt2, model.jit, model.onnx)
    torchmcu build build/model [--app main.c ...] [--lib] [--stack BYTES]
    torchmcu run build/model --sim qemu --input x.npy [--check] [--json] [--profile]
    torchmcu run build/model --device /dev/ttyACM0 [--baud 115200] [--check]
    torchmcu export build/model --arduino OUT [--name NAME]
    torchmcu inspect build/model/model.pte
    torchmcu boards
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from . import __version__
from .backends import all_backends
from .board_text import describe_board
from .builder import kernel_table
from .cli_errors import (check_calibration, firmware_failure, guarded, load_inputs, program_source_differs,
                         read_arrays, require_build_dir, run_epilog, run_status, summarized_warnings)
from .cli_values import _bytes, _pairs, _precision, _recompute  # noqa: F401  (tests import _precision)
from .errors import TorchMCUError
from .frontend.shipped import add_model_arguments
from .sim import RUNNERS


def _progress(msg: str) -> None:
    print(f"torchmcu: {msg}", file=sys.stderr, flush=True)


def _state(text: str | None):
    """--state N, or --state IN:OUT[,IN:OUT...] (compile's state=)."""
    if not text:
        return None
    if text.isdigit():
        return int(text)
    try:
        return [tuple(int(v) for v in pair.split(":")) for pair in text.split(",")]
    except ValueError:
        raise TorchMCUError(f"--state {text!r}: a count N, or IN:OUT index pairs separated by commas") from None


def cmd_compile(args: argparse.Namespace) -> int:
    """torch's warnings (and other libraries') summed up in one line before the result or the error
    (--verbose: each one); torchmcu's own one line each."""
    with summarized_warnings(args.verbose):
        return _compile(args)


def _compile(args: argparse.Namespace) -> int:
    from .compiler import compile
    from .frontend.shipped import load_model

    t0 = time.monotonic()
    calibration = read_arrays(args.calibration, "--calibration") if args.calibration else None
    _progress(f"loading {args.model}")
    model, example = load_model(args.model, args.input, args.fix)
    if calibration is not None:
        calibration = check_calibration(args.calibration, calibration, model, example)
    _progress(f"compiling for {args.board} ({args.quant})")
    c = compile(model, example, args.board, args.output, quant=args.quant, calibration=calibration, io=args.io,
                budgets=_pairs(args.budget, "--budget", _bytes), pins=_pairs(args.pin, "--pin", str),
                inplace=not args.no_inplace, tile=not args.no_tile, tile_recompute=_recompute(args.tile_recompute),
                copy_hot_weights=args.copy_hot_weights,
                symbol=args.symbol, precision=_precision(args.precision), backend_names=args.backends,
                io_layout=args.io_layout, stack=None if args.stack is None else _bytes(args.stack),
                state=_state(args.state), strict=args.strict, crc=args.crc,
                recurrent_weights=args.recurrent_weights, reparam=not args.no_reparam,
                avg_pool_rounding=args.avg_pool_rounding)
    _progress(f"done in {time.monotonic() - t0:.1f} s")
    if args.verbose:
        print((c.out_dir / "report.txt").read_text())
    else:
        from .report import summary_lines
        print("\n".join(summary_lines(c.report)))
    print(f"wrote {c.out_dir}/ ({args.symbol}.h/.cc: the C API; model.pte, model_pte.c/.h, model_arenas.c/.h, "
          "kernel_table.cc, kernels.txt, memory_plan.json, report.json); the full report: "
          f"{c.out_dir / 'report.txt'}{'' if args.verbose else ' (--verbose prints it)'}")
    return 0


def _opt(name: str) -> dict[str, str]:
    """build --opt NAME as the builder's arguments: its goal, and -O/-D flags."""
    if name == "generic":
        return {"opt": "-Os -DTMCU_S8_GENERIC", "optimize": "speed"}
    return {"opt": "-Os", "optimize": name}


def cmd_build(args: argparse.Namespace) -> int:
    from .builder.firmware import build_firmware, build_library, firmware_backend, kernel_set, linked_lines
    from .builder.size import elf_size

    require_build_dir(args.dir)
    stack = None if args.stack is None else _bytes(args.stack)
    if args.lib:
        if args.app:
            raise TorchMCUError("--lib and --app: a library has no main; choose one")
        archive = build_library(args.dir, board=args.board, verbose=args.verbose, kernels=args.kernels,
                                verify=args.verify, **_opt(args.opt))
        print(f"wrote {archive} and {archive.parent / 'include'}/ (the model's header, torchmcu/torchmcu.h); "
              "link the archive with -Wl,--gc-sections")
        return 0
    from .outdir import holding

    stale = program_source_differs(args.dir)
    if stale:
        print(f"torchmcu: warning: {stale}", file=sys.stderr)
    with holding(args.dir):  # no compile swaps the directory while its firmware is built from it
        elf = build_firmware(args.dir, board=args.board, verbose=args.verbose, kernels=args.kernels,
                             verify=args.verify, app=args.app or None, stack=stack, **_opt(args.opt))
    owner = firmware_backend(args.dir, args.board)
    if owner is not None:  # its own toolchain built it (a HiFi board: Cadence's tools and nnlib)
        print(owner.describe_image(elf))
        return 0
    size = elf_size(elf)
    by_set: dict[str, list[str]] = {}
    for code, kset in kernel_set(args.dir).items():
        by_set.setdefault(kset, []).append(code)
    print("kernels: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(by_set.items())))
    print(f"{elf}: text {size.text} B, data {size.data} B, bss {size.bss} B")
    record = json.loads((elf.parent / "size.json").read_text())  # written by the build
    for line in linked_lines(record):
        print(line)
    print(f"(per input file and section: {elf.parent / 'size.json'})")
    return 0


def _stack_line(out_dir: str, used: int | None, size: int | None) -> str | None:
    """Measured against computed: the high-water mark the startup read, and
    the build's worst case (size.json)."""
    if used is None:
        return None
    path = Path(out_dir) / "size.json"
    computed = json.loads(path.read_text()).get("stack", {}).get("computed_bytes") if path.is_file() else None
    text = f"stack: {used:,} B used (high-water mark, measured)"
    if computed is not None:
        text += f", {computed:,} B computed worst case"
    return text + (f", {size:,} B reserved" if size else "")


def cmd_run_app(args: argparse.Namespace) -> int:
    """Firmware from the user's own sources: its output, and main's return value as the exit status."""
    from .sim import runner

    res = runner.run_app(args.dir, sim=args.sim, timeout_s=300.0 if args.timeout is None else args.timeout)
    line = _stack_line(args.dir, res.stack_used, res.stack_size)
    if args.json:
        print(json.dumps({"exit_code": res.exit_code, "output": res.output, "stack_used": res.stack_used,
                          "stack_size": res.stack_size}))
    else:
        sys.stdout.write(res.output)
        if line:
            print(f"torchmcu: {line}", file=sys.stderr)
    return res.exit_code


def _is_app_build(out_dir: str) -> bool:
    path = Path(out_dir) / "size.json"
    return path.is_file() and json.loads(path.read_text()).get("kind") == "app"


def cmd_run(args: argparse.Namespace) -> int:
    from . import numerics
    from .sim import runner
    from .sim.cycles import annotate_ops, cycle_columns, record_latency, write_profile_png

    require_build_dir(args.dir)
    args.check = args.check or args.strict
    if args.repeat < 1:
        raise TorchMCUError(f"--repeat {args.repeat}: give 1 or more runs")
    if args.timeout is not None and not args.timeout > 0:
        raise TorchMCUError(f"--timeout {args.timeout}: give a positive number of seconds")
    if args.sqnr_floor is not None and not abs(args.sqnr_floor) < float("inf"):  # NaN or inf
        raise TorchMCUError(f"--sqnr-floor {args.sqnr_floor}: give a finite number of dB")

    if _is_app_build(args.dir) and not args.device:
        if args.input or args.check or args.profile:
            raise TorchMCUError(f"{args.dir}/firmware.elf runs your own main (built with --app): it takes no "
                                "--input, --check or --profile; rebuild without --app for those")
        return cmd_run_app(args)
    inputs = load_inputs(args.input, args.dir)
    meta = runner.load_meta(args.dir)
    # The first sample also runs once op by op, so every result carries a profile.
    if args.device:  # a real board over a serial port: ticks are its own counter, no instruction counts
        from .sim.serial import run_device
        res = run_device(args.dir, inputs, args.device, baud=args.baud, profile=True,
                         timeout_s=30.0 if args.timeout is None else args.timeout)
    else:
        res = runner.run(args.dir, inputs, sim=args.sim, profile=True, cycles=args.sim == "qemu" and not args.no_cycles,
                         timeout_s=300.0 if args.timeout is None else args.timeout, repeat=args.repeat)
    report = json.loads((Path(args.dir) / "report.json").read_text())
    ops = []
    kernels = res.kernel_instructions()  # each op's kernel, the profiler's own cost taken out
    for i, op in enumerate(report["ops"]):
        entry: dict[str, Any] = {"name": op["name"], "kind": op["kind"], "backend": op["backend"]}
        if i < len(kernels):
            entry["instructions"] = kernels[i]
        ops.append(entry)
    cyc = annotate_ops(ops, res.cycles)  # the cycle model's estimate (QEMU, a core with a timing table), or None
    record_latency(args.dir, cyc)  # report.json "latency", report.txt's last section
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
        # One inference less its kernels' own instructions, per op (means over --repeat runs).
        "framework_overhead_per_op": None if res.overhead_per_op() is None else round(res.overhead_per_op(), 1),
        "ops": ops,
        "note": "instruction counts from QEMU -icount shift=0, not cycles" if args.sim == "qemu" else
                "the host runner counts no instructions",
        "stack_used": res.stack_used, **({"cycles": cyc.to_json()} if cyc else {}),
    }
    if res.sim_instructions is not None:  # Renode: its own count of the whole run (load, every sample, output)
        result["simulator_instructions"] = res.sim_instructions
        result["note"] = "Renode: ticks of its virtual clock; simulator_instructions: the whole run, Renode's count"
    if res.npu:  # the NPU's own counts, per partition (the Ethos-U delegate's PMU, profiled run)
        result["npu"] = {str(k): v for k, v in sorted(res.npu.items())}
        result["note"] = "an FVP counts no instructions; npu: the NPU's PMU cycles and beats per call"
    if args.device:
        result["note"] = "a board over a serial port: no instruction counts; ticks are its own counter"
        result["ticks_per_sample"] = res.sample_ticks
    status = res.exit_code
    if status != 0:
        print(firmware_failure(status, res.raw), file=sys.stderr)
        if not args.json:  # no outputs to show (--json still gives the result, its exit_code the firmware's)
            return run_status(status)
        status = run_status(status)
    if args.check and status == 0:
        result["check"], failed = numerics.run_check(args.dir, res.outputs, runner.split_samples(meta, inputs),
                                                     args.sqnr_floor, args.qdq_lsb, args.strict)
        status = 1 if failed else status
    if args.profile:  # the table below, as data: costliest first
        profile = {"sim": f"device {args.device}" if args.device else args.sim,
                   "instructions": result["instructions"], "load_instructions": result["load_instructions"],
                   "framework_overhead_per_op": result["framework_overhead_per_op"], "repeat": args.repeat,
                   "note": result["note"], "cycles": result.get("cycles"),
                   "ops": sorted(({"index": i, **op} for i, op in enumerate(ops)),
                                 key=lambda op: -(op.get("instructions") or 0))}
        (Path(args.dir) / "profile.json").write_text(json.dumps(profile, indent=2) + "\n")
        write_profile_png(args.dir, ops, meta.get("board", ""), cyc)
    if args.json:
        print(json.dumps(result))
    else:
        for k, o in enumerate(outputs):
            print(f"output {k}: shape {list(o.shape)}\n{o}")
        if result["instructions"] is not None:
            print(f"instructions per inference: {result['instructions']:,} (QEMU -icount, not cycles); "
                  f"load: {result['load_instructions']:,}")
            if cyc is not None and cyc.latency_line():
                print(cyc.latency_line())
            if result["framework_overhead_per_op"] is not None:
                print(f"framework overhead: {result['framework_overhead_per_op']:,} instructions per op "
                      f"(inference less the kernels' own, over {len(ops)} ops; mean of {args.repeat} run(s))")
        if res.sim_instructions is not None:
            print(f"instructions of the whole run (Renode's count; load, {len(res.sample_ticks)} sample(s) and "
                  f"output): {res.sim_instructions:,}")
        for k, figures in sorted(res.npu.items()):
            counts = ", ".join(f"{name} {v:,.0f}" for name, v in figures.items() if name not in ("cycles", "calls"))
            print(f"NPU partition {k}: {figures.get('cycles', 0):,.0f} cycles per call (PMU; {counts})")
        if args.profile:
            print(f"{'#':>3}  {'op':<24} {'kind':<12} {'instructions':>12}" + cycle_columns(None, cyc))
            for i, op in sorted(enumerate(ops), key=lambda e: -(e[1].get("instructions") or 0)):
                print(f"{i:>3}  {op['name'][:24]:<24} {op['kind']:<12} {op.get('instructions') or 0:>12,}"
                      + cycle_columns(op, cyc))
        stack = _stack_line(args.dir, res.stack_used, res.stack_size)
        if stack:
            print(stack)
        if "check" in result:
            print("\n".join(numerics.check_lines(result["check"])))
    return status


def cmd_inspect(args: argparse.Namespace) -> int:
    import struct

    from .frontend.user_code import one_line
    from .program import schema
    from .program.inspect import describe

    path = Path(args.program)
    if path.is_dir() and (path / "model.pte").is_file():  # a build directory: its program
        path = path / "model.pte"
    if not path.is_file():
        raise TorchMCUError(f"{args.program}: no such file" + (" (a directory without model.pte)" if path.is_dir()
                                                               else "") + "; pass a model.pte")
    buf = path.read_bytes()
    ident = schema.load().identifier.encode()
    if len(buf) < 8 or buf[4:8] != ident:
        raise TorchMCUError(f"{path} is not a torchmcu program (no {ident.decode()!r} identifier at byte 4): pass a "
                            "model.pte written by `torchmcu compile`")
    try:
        text = describe(buf, values=args.values)
    except (ValueError, IndexError, KeyError, struct.error, UnicodeDecodeError) as e:
        kind = "truncated or out of bounds" if isinstance(e, struct.error) else type(e).__name__
        raise TorchMCUError(f"{path} is a corrupted torchmcu program ({kind}: {one_line(str(e))})") from None
    print(text)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    if args.pack:
        from .export.pack import build_pack

        pack = build_pack(args.pack, url=args.url, models=[args.dir])
        print(f"wrote {pack}: the runtime, its kernels and platforms, and this model as the component "
              f"Machine Learning:Model:{runner_symbol(args.dir)} (its C API and arrays under models/)")
        return 0
    if args.arduino:
        from .export.arduino import export_arduino

        lib = export_arduino(args.dir, args.arduino, name=args.name)
        print(f"wrote {lib.root}: Arduino library {lib.name} ({len(lib.files)} files); kernels "
              f"{', '.join(lib.kernel_files)} for {', '.join(lib.op_codes)}\n  example: {lib.sketch}")
        return 0
    from .export.tflite import export_tflite, summary

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


def runner_symbol(out_dir: str) -> str:
    from .sim.runner import load_meta

    return str(load_meta(out_dir).get("symbol", "model"))


def cmd_boards(args: argparse.Namespace) -> int:
    from .boards import list_boards, load_board

    names = args.board or list_boards(arch=None)  # Cortex-M and Xtensa
    for k, name in enumerate(names):
        print(("\n" if k else "") + describe_board(load_board(name)))
    return 0


def cmd_kernel_table(args: argparse.Namespace) -> int:
    for d in args.dirs:
        require_build_dir(d)
    text, codes = kernel_table.shared_kernel_table(args.dirs, args.kernels)
    Path(args.output).write_text(text)
    print(f"wrote {args.output}: {len(codes)} kernels ({', '.join(codes)}) for {len(args.dirs)} models")
    return 0


def cmd_deps(args: argparse.Namespace) -> int:
    from .backends.cmsis_nn.fetch import fetch_cmsis_nn

    # Cached in $TORCHMCU_CACHE_DIR, else ~/.cache/torchmcu: where builds look for it.
    got = fetch_cmsis_nn(args.index_url, log=_progress)
    print(f"CMSIS-NN {got.version} in {got.path} (recorded in {got.record}); `torchmcu build --kernels cmsis-nn` "
          "uses it while TORCHMCU_CMSIS_NN_DIR is unset")
    return 0


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="torchmcu", description="PyTorch models compiled into microcontroller firmware")
    p.add_argument("--version", action="version", version=f"torchmcu {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("compile", help="compile a model into a build directory")
    add_model_arguments(c)  # MODEL, --input, --fix
    c.add_argument("--board", required=True, help="board name (see `torchmcu boards`) or a .toml path")
    c.add_argument("-o", "--output", required=True, help="output directory")
    c.add_argument("-v", "--verbose", action="store_true",
                   help="print the whole report (report.txt: every op, memory, flash, placement) instead of a "
                        "few lines, and each warning torch and other libraries raise (by default one line counts "
                        "them)")
    c.add_argument("--quant", default="float32", choices=["float32", "int8", "int4", "a16w8"],
                   help="int8: CMSIS-NN/TFLite Micro scheme, post-training quantization; int4: W4A8, int4 "
                        "weights (packed two per byte) for conv/depthwise/linear, int8 activations; a16w8: "
                        "int16 activations, int8 weights (default float32)")
    c.add_argument("--backends", type=lambda s: [b for b in s.split(",") if b], metavar="NAME[,NAME...]",
                   help="the backends that may take ops, in priority order (default: the board's); the portable "
                        "kernels run the rest. Known: " + ", ".join(all_backends()))
    c.add_argument("--io", default="float", choices=["float", "int8"],
                   help="int8: the program takes and gives int8 (with --quant int8); `run --input` "
                        "still takes float arrays and quantizes them as the device would")
    c.add_argument("--io-layout", default="nchw", choices=["nchw", "nhwc"],
                   help="nhwc: inputs and outputs of 3 and more dims channels last, the order the convolutions "
                        "run in: no PERMUTE at the edges (with --io int8, no (de)quantize either). NAME.h says "
                        "what was chosen; `run --input` still takes PyTorch's order (default nchw)")
    c.add_argument("--stack", metavar="BYTES",
                   help="the stack the firmware will have, for the room arenas may take beside it (default the "
                        "board's stack_size; `build` sizes the stack from its computed worst case)")
    c.add_argument("--calibration", help=".npz with one array per model input, samples along axis 0 "
                                         "(for a single-input model, its one array under any name); default: the example inputs")
    c.add_argument("--budget", action="append", default=[], metavar="MEM=BYTES",
                   help="cap the activations a memory may take, e.g. dtcm=16K (0 keeps it out); repeatable")
    c.add_argument("--precision", action="append", default=[], metavar="LAYER=int4|int8|int16",
                   help="per-layer precision over --quant (module path or node name), e.g. "
                        "'conv1=int16,fc=int4', or @FILE with one LAYER=PRECISION a line, or auto:BUDGET "
                        "to choose int4/int8/int16 per layer for a flash budget of weights and biases")
    c.add_argument("--pin", action="append", default=[], metavar="NAME=MEM",
                   help="put a tensor's, or an op's, buffers in a memory, e.g. conv1=sram; repeatable")
    c.add_argument("--no-inplace", action="store_true",
                   help="no concat into slices nor element-wise ops over their input (more RAM, same results)")
    c.add_argument("--tile", action="store_true",
                   help="patch-based inference (the default): run early layers band by band of rows where "
                        "that lowers peak RAM (bit-exact; recomputes the rows bands share)")
    c.add_argument("--no-tile", action="store_true", help="no patch-based inference (layer by layer)")
    c.add_argument("--no-reparam", action="store_true",
                   help="keep parallel conv / batch-norm / identity branches summed as written (RepVGG, MobileOne "
                        "as trained); by default they fold into one convolution each")
    c.add_argument("--tile-recompute", type=float, default=0.05, metavar="F",
                   help="patch-based inference may add at most this fraction of MACs (default 0.05: 5%%)")
    c.add_argument("--copy-hot-weights", action="store_true",
                   help="copy the most-read weights at load into fast RAM the plan leaves free, when the "
                        "program sits in slower memory")
    c.add_argument("--symbol", default="model", metavar="NAME",
                   help="the model's C name: its API NAME.h/NAME.cc (tmcu_NAME_init, _input, _invoke, _output, "
                        "_reset) and arrays tmcu_NAME_pte, tmcu_NAME_arenas (default model); give each model its "
                        "own to link several into one firmware (see kernel-table)")
    c.add_argument("--state", metavar="N|IN:OUT,...",
                   help="a streaming model's state: its last N inputs and outputs (forward(x, h, c) -> (y, h, c): "
                        "2), or input:output index pairs; kept in a persistent arena across invocations")
    c.add_argument("--strict", action="store_true",
                   help="calibration warnings (an activation's range constant, not finite, past 1e6, or too "
                        "coarse for the example inputs) are an error")
    c.add_argument("--crc", action="store_true",
                   help="write a CRC32 of the program into it; the runtime checks it when it loads the program "
                        "and refuses a corrupted or half-flashed one (ChecksumMismatch)")
    c.add_argument("--recurrent-weights", choices=("per-channel", "per-gate"), default="per-channel",
                   help="an int8/a16w8 LSTM's or GRU's weights: one scale per row (per-channel, the default: closer "
                        "to float on trained weights) or per gate (TFLite's scheme: needed to export the LSTM to "
                        ".tflite, and for CMSIS-NN's LSTM kernel to run it)")
    c.add_argument("--avg-pool-rounding", choices=("pytorch", "tflite"), default="pytorch",
                   help="an integer average pool's or mean's rounding: PyTorch's q/dq model's (half to even at the "
                        "zero point, the default) or TFLite's (the raw sum half away from zero: needed to export it "
                        "to .tflite)")
    c.set_defaults(fn=cmd_compile)

    b = sub.add_parser("build", help="build firmware.elf for a compiled model")
    b.add_argument("dir")
    b.add_argument("--board", help="override the board the model was compiled for")
    b.add_argument("--opt", default="speed", choices=["speed", "size", "generic"],
                   help="speed (default): every int8 fast path (DSP/MVE) some op of the program can take, at -O2, "
                        "the rest at -Os; size: the size-first build, which leaves out the fast paths that cost "
                        "more flash than they save instructions for this program (under 32 K multiply-adds or "
                        "elements per inference in their ops) and compiles the others at -Os: smaller, slower, "
                        "the same outputs; generic: no fast paths (the portable C kernels of Cortex-M0/M3)")
    b.add_argument("--kernels", default="portable", choices=kernel_table.kernel_sets(),
                   help="kernel set (cmsis-nn: CMSIS-NN from $TORCHMCU_CMSIS_NN_DIR)")
    b.add_argument("--verify", default="full", choices=["full", "minimal"],
                   help="program checks at load: full (default; a corrupted program gets an error code) or "
                        "minimal (the compiled-in program is trusted: a few instructions per op to load, and "
                        "the verifier and kernel checks are left out of the image)")
    b.add_argument("--app", nargs="+", metavar="SOURCE",
                   help="build firmware from your own sources (main.c and others: C, C++, assembly) with the "
                        "board's startup, linker script and the runtime; they include NAME.h. main's return "
                        "value is the exit status under simulation (`run DIR` prints the output)")
    b.add_argument("--lib", action="store_true",
                   help="write DIR/lib/libtorchmcu_NAME.a and DIR/lib/include/ for your own build system "
                        "(no startup, no main)")
    b.add_argument("--stack", metavar="BYTES",
                   help="the stack's size (default: the worst case computed from -fstack-usage over the linked "
                        "call graph, plus max(256 B, 25 %%))")
    b.add_argument("-v", "--verbose", action="store_true", help="show the compiler commands")
    b.set_defaults(fn=cmd_build)

    r = sub.add_parser("run", help="run a compiled model in a simulator or on the host", epilog=run_epilog(),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("dir")
    r.add_argument("--sim", default="qemu", choices=sorted(RUNNERS),
                   help="qemu (default), host (the runtime built for this machine), fvp: the board's Arm "
                        "Corstone FVP from $TORCHMCU_FVP_DIR, which runs the Ethos-U NPU, renode: "
                        "Renode, for the parts it models that QEMU does not (boards with a [renode] table: "
                        "stm32f407vg, stm32l552ze), or xt-run: Cadence's "
                        "Xtensa ISS for HiFi boards ($XTENSA_TOOLCHAIN_PATH, $XTENSA_CORE)")
    r.add_argument("--input", action="append", default=[],
                   help=".npy per model input (or one .npz); a leading extra axis is a batch of samples. "
                        "Default: the example inputs")
    r.add_argument("--check", action="store_true",
                   help="compare with the reference (exit 1 on a mismatch); a quantized program also with the "
                        "float model and PyTorch's q/dq model: SQNR and max abs error per output, warnings for a "
                        "constant output, an SQNR below --sqnr-floor, or one further from float than the q/dq "
                        "model's (1 dB, --qdq-lsb)")
    r.add_argument("--strict", action="store_true", help="--check, and its numerics warnings fail it (exit 1)")
    r.add_argument("--sqnr-floor", type=float, metavar="DB",
                   help="warn when an output's SQNR against the float model is below DB (default 10)")
    r.add_argument("--qdq-lsb", type=float, metavar="N",
                   help="warn when an output differs from PyTorch's q/dq model by more than N steps of int8 "
                        "(x256 for an int16 output; default 8); an output more than 1 dB below the q/dq model's "
                        "SQNR against float is warned of too")
    r.add_argument("--json", action="store_true", help="print the result as JSON")
    r.add_argument("--profile", action="store_true", help="print instructions (and cycles) per op, costliest first, "
                   "and write DIR/profile.json and profile.png")
    r.add_argument("--no-cycles", action="store_true", help="QEMU: no cycle model, no ms estimate (a faster run)")
    r.add_argument("--timeout", type=float, help="seconds before the simulator is stopped (default 300); with "
                   "--device, the longest wait for the board's answer to one sample (default 30)")
    r.add_argument("--device", metavar="PORT", help="run on a board over this serial port (or pyserial URL), "
                   "e.g. /dev/ttyACM0, which runs the sketch of `torchmcu export --arduino`")
    r.add_argument("--baud", type=int, default=115200, help="serial speed with --device (default 115200)")
    r.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="measure the load, the profile and the first sample N times and report means (the "
                        "tick counter is coarser than one instruction; N >= 8 makes the figures precise)")
    r.set_defaults(fn=cmd_run)

    i = sub.add_parser("inspect", help="print a model.pte readably")
    i.add_argument("program")
    i.add_argument("--values", action="store_true", help="also print constant values (abridged)")
    i.set_defaults(fn=cmd_inspect)

    e = sub.add_parser("export", help="write a compiled program as a TensorFlow Lite model (int8), "
                                      "an Arduino library or a CMSIS-Pack")
    e.add_argument("dir", help="build directory holding model.pte")
    form = e.add_mutually_exclusive_group(required=True)
    form.add_argument("--tflite", metavar="OUT.tflite", help="the .tflite file to write")
    form.add_argument("--arduino", metavar="OUT", help="the Arduino library directory to write")
    form.add_argument("--pack", metavar="OUT", help="the folder to write a CMSIS-Pack to: the runtime and this model "
                                                    "as a component (Machine Learning:Model:NAME)")
    e.add_argument("--url", help="with --pack: where the pack will be published (default: the output folder)")
    e.add_argument("--name", help="with --arduino: the library's name (default Torchmcu + the build directory's name)")
    e.set_defaults(fn=cmd_export)

    bl = sub.add_parser("boards", help="the known boards: core, extensions, memories")
    bl.add_argument("board", nargs="*", help="a board name or a board .toml (default: every board of boards/)")
    bl.set_defaults(fn=cmd_boards)

    kt = sub.add_parser("kernel-table", help="write one kernel table for several compiled models "
                                             "linked into one firmware (selective build over their union)")
    kt.add_argument("dirs", nargs="+", metavar="DIR", help="compiled model directories")
    kt.add_argument("-o", "--output", required=True, help="the C++ file to write (e.g. kernel_table.cc)")
    kt.add_argument("--kernels", default="portable", choices=kernel_table.kernel_sets(),
                    help="kernel set, as for build (cmsis-nn: the ops CMSIS-NN covers run on it)")
    kt.set_defaults(fn=cmd_kernel_table)

    dp = sub.add_parser("deps", help="fetch and cache third-party code torchmcu builds with (needs network)")
    dp.add_argument("name", choices=["cmsis-nn"],
                    help="cmsis-nn: the ARM::CMSIS-NN pack, via cmsis-pack-manager, cached in "
                         "$TORCHMCU_CACHE_DIR (default ~/.cache/torchmcu)")
    dp.add_argument("--index-url", help="a pack index (.pidx/.vidx URL) instead of cmsis-pack-manager's default")
    dp.set_defaults(fn=cmd_deps)
    return p


def main(argv: list[str] | None = None) -> int:
    """The command; every failure is one line on stderr and an exit status
    (run's --help lists them): never a traceback unless TORCHMCU_TRACEBACK=1."""
    return guarded(lambda: int((args := make_parser().parse_args(argv)).fn(args)))

if __name__ == "__main__":
    sys.exit(main())
