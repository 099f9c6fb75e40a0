"""A compiled int8 program (model.pte) as a TensorFlow Lite model (.tflite),
and TensorFlow Lite Micro as an independent oracle for it.

The program's tensors keep their physical layouts: 4-D activations are NHWC,
which is TFLite's layout, conv weights OHWI, depthwise weights [1, kh, kw,
C*m] and linear weights [out, in], as TFLite wants them. Every int8 op maps to
the builtin operator with the same integer arithmetic:

    CONV2D_S8            CONV_2D (PAD first where the padding is not SAME/VALID)
    DEPTHWISE_CONV2D_S8  DEPTHWISE_CONV_2D (idem)
    LINEAR_S8            FULLY_CONNECTED (bias without the folded input offset)
    ADD_S8, MUL_S8       ADD, MUL
    MAX_POOL2D_S8        MAX_POOL_2D (PADV2 with -128 first where needed)
    AVG_POOL2D_S8        AVERAGE_POOL_2D (SAME or VALID only)
    SOFTMAX_S8           SOFTMAX (the program's beta; its exp table is not exported: TFLM computes the same)
    CLAMP_S8             RELU / RELU6 where the bounds are theirs, else MAXIMUM + MINIMUM
    LUT_S8               LOGISTIC / TANH when the table is the sigmoid's / tanh's (a hardswish
                         table has no TFLite form: TFLite's int8 HARD_SWISH is a fixed-point
                         approximation that differs from the float table by 1 LSB on a few inputs)
    MAXIMUM_S8, MINIMUM_S8       MAXIMUM, MINIMUM (one shared quantization)
    BATCH_MATMUL_S8/S16  BATCH_MATMUL (adj_y as the program's; a constant operand as a constant tensor;
                         MAXIMUM/MINIMUM after for a clamp)
    SUB_S8/S16, DIV_S8   SUB, DIV (a subtraction scaled by alpha has no form: verify_derived says so)
    PRELU_S8/S16         PRELU (LeakyReLU too: a PReLU with one slope)
    LOG_SOFTMAX_S8, MEAN_S8/S16  LOG_SOFTMAX, MEAN (any axes)
    GLU_S8               SPLIT, LOGISTIC (1/256, -128), MUL
    LUT_S8 of ELU        ELU (TFLM tabulates exp(x) - 1 the same way); GELU, SiLU, hardsigmoid, exp and rsqrt
                         tables, int16 tables (LUT_S16), LAYER_NORM_* and the masked softmax have no TFLite
                         operator that computes them exactly: ExportError
    QUANTIZE_S8, DEQUANTIZE_S8   QUANTIZE, DEQUANTIZE
    PERMUTE, CONCAT, COPY        TRANSPOSE, CONCATENATION, RESHAPE
    PAD                  PAD where the value is the zero point (int8) or 0 (float), else PADV2
    aliases (flatten, reshape: a second tensor over the same bytes)   RESHAPE
    TRANSPOSE_CONV2D_S8  TRANSPOSE_CONV (VALID or SAME, else VALID into a larger result and SLICE)
    RESIZE_NEAREST, RESIZE_BILINEAR_S8   RESIZE_NEAREST_NEIGHBOR, RESIZE_BILINEAR
    CONV2D_S8 grouped    SPLIT, one CONV_2D per group, CONCATENATION
    MASKED_FILL          SELECT_V2 (F32, I8, I16: the value a constant at x's quantization, which the output
                         shares)
    COMPARE              LESS, LESS_EQUAL, GREATER, GREATER_EQUAL, EQUAL, NOT_EQUAL; of boolean operands
                         only EQUAL / NOT_EQUAL (TFLite Micro's others have no BOOL kernel: ExportError)
    GATHER               GATHER on axis 0 with int32 ids (an id outside the table: the kernel gives zeros,
                         TFLite Micro fails the invocation)

The program's U8 tensors are its booleans (1 or 0: masks, comparisons' results):
TFLite BOOL tensors, the same bytes (run_tflite_micro gives them back as uint8).

Fused activation ranges become TFLite's fused activations when
CalculateActivationRangeQuantized gives the same bounds, else MAXIMUM/MINIMUM
ops follow. Requantization multipliers and shifts, ADD/MUL/SOFTMAX parameters
are not exported: TFLite derives them from the tensors' scales, which
`verify_derived` checks gives the program's values (and TFLM then the same
bits, tests/test_oracle.py). Weight scales come from the weight tensor's
channel_scales, or, in programs written before those existed, are recovered
from the multipliers (then `verify_derived` tells whether TFLite would
recompute the same ones).

Float fallback ops inside an int8 program become float TFLite ops where there
is one with the same meaning; others raise ExportError naming the op.

a16w8 programs (int16 activations) map the same way to TFLite's int16x8
operators: CONV2D_S16, DEPTHWISE_CONV2D_S16 and LINEAR_S16 to CONV_2D,
DEPTHWISE_CONV_2D and FULLY_CONNECTED with int16 activations, int8 weights
and int64 biases; ADD_S16, MUL_S16, MAX_POOL2D_S16, AVG_POOL2D_S16,
QUANTIZE_S16, DEQUANTIZE_S16 to ADD, MUL, MAX_POOL_2D, AVERAGE_POOL_2D,
QUANTIZE, DEQUANTIZE.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import reference as ref
from ...errors import TorchMCUError
from .ops import AttentionNormOps, ConvOps, ElementwiseOps, PoolResizeOps, RecurrentOps, ReduceOps, ShapeViewsOps
from .program import ExportError, _Program, verify_derived, weight_scales


class _Exporter(ConvOps, PoolResizeOps, ElementwiseOps, ReduceOps, ShapeViewsOps, AttentionNormOps, RecurrentOps):
    """A program as a TFLite model: every op family's methods."""


_SCRATCH_AFTER = {"CONV2D_S8": 5, "DEPTHWISE_CONV2D_S8": 5, "LINEAR_S8": 5, "CONV2D_S16": 5,
                  "DEPTHWISE_CONV2D_S16": 5, "LINEAR_S16": 5, "CONV2D_S4": 5, "DEPTHWISE_CONV2D_S4": 5,
                  "LINEAR_S4": 5, "TRANSPOSE_CONV2D_S8": 5, "TRANSPOSE_CONV2D_S16": 5,
                  "BATCH_MATMUL_S8": 2, "BATCH_MATMUL_S16": 2,
                  "LSTM_S8": 6, "LSTM_S16": 6}


def _operands(op: dict) -> list[int]:
    """The op's operands without the optional scratch buffer of the int8
    conv/depthwise/linear kernels (working memory, no data)."""
    return op["inputs"][:_SCRATCH_AFTER.get(op["code"], len(op["inputs"]))]


def _is_int8_program(p: _Program) -> bool:
    return any(op["code"].endswith(("_S8", "_S16", "_S4")) for op in p.ops)


def export_tflite(pte: bytes, *, strict: bool = True, tensor_map: dict[int, int] | None = None) -> bytes:
    """The whole int8 program as a .tflite model: same inputs (float, in the
    program's input layout), same outputs. strict: refuse programs whose
    derived parameters TFLite would compute differently (verify_derived).
    tensor_map, when given, is filled with program tensor -> TFLite tensor."""
    p = _Program(pte)
    if not _is_int8_program(p):
        raise ExportError("a float32 program: the TFLite export is for int8 programs "
                          "(compile with --quant int8)")
    banded = [op["name"] for op in p.ops if ".band" in (op.get("name") or "")]
    if banded:
        raise ExportError(f"the program runs {banded[0].split('.band')[0]} and other layers band by band "
                          "(patch-based inference, on by default), which a .tflite model cannot express: "
                          "compile with --no-tile (tile=False) to export it")
    if strict:
        problems = verify_derived(pte)
        if problems:
            raise ExportError("TFLite would derive different parameters:\n  " + "\n  ".join(problems))
    e = _Exporter(p)
    written: list[tuple[int, int, int, int]] = []  # (arena, start, end, program tensor), in write order

    def record(tid: int) -> None:
        t = p.tensors[tid]
        written.append((t["arena"], t["offset"], t["offset"] + t["nbytes"], tid))

    def resolve(tid: int) -> int:
        if tid < 0:
            return -1
        if tid in e.tfl:
            return e.tfl[tid]
        t = p.tensors[tid]
        if t["region"] == "CONSTANT":
            return -1  # read by the op handlers from the program
        # An alias: a second view of bytes another tensor wrote (reshape, flatten).
        start, end = t["offset"], t["offset"] + t["nbytes"]
        src = next((w for w in reversed(written) if w[0] == t["arena"] and w[1] < end and start < w[2]), None)
        if src is None or (src[1], src[2]) != (start, end):
            raise ExportError(f"tensor t{tid} ({t['name']}) is read but no op wrote exactly its bytes")
        s = p.tensors[src[3]]
        if s["dtype"] != t["dtype"] or (s["scale"], s["zero_point"]) != (t["scale"], t["zero_point"]):
            raise ExportError(f"tensor t{tid} ({t['name']}) aliases t{src[3]} with another type/quantization")
        e.tfl[tid] = e.new_tensor(tid)
        e.w.add_op("RESHAPE", [e.tfl[src[3]], e.int_vector("shape", t["dims"])], [e.tfl[tid]],
                   {"new_shape": t["dims"]})
        return e.tfl[tid]

    for tid in p.prog["inputs"]:
        e.tfl[tid] = e.new_tensor(tid)
        record(tid)
    for index, op in enumerate(p.ops):
        ins = [resolve(t) for t in _operands(op)]
        out_tid = op["outputs"][0]
        out = e.new_tensor(out_tid)
        e.emit(index, ins, out)
        e.tfl[out_tid] = out
        record(out_tid)
    outputs = [resolve(t) for t in p.prog["outputs"]]
    e.w.set_io([e.tfl[t] for t in p.prog["inputs"]], outputs)
    if tensor_map is not None:
        tensor_map.update(e.tfl)
    return e.w.finish()


# ------------------------------------------------------------------------- one op alone


def trace(pte: bytes, inputs: list[np.ndarray]) -> list[tuple[list[np.ndarray | None], np.ndarray]]:
    """Runs the NumPy reference (interpret.py) op by op; per op, the values
    of its operands (None for absent ones) and of its output."""
    from ...program.interpret import OPS, Interpreter

    it = Interpreter(pte)
    prog = it.prog
    for index, x in zip(prog["inputs"], inputs):
        it.write(index, np.asarray(x).reshape(prog["tensors"][index]["dims"]))
    steps = []
    for op in prog["ops"]:
        args = [None if i < 0 else it.tensor(i).copy() for i in op["inputs"]]
        outs = [prog["tensors"][i] for i in op["outputs"]]
        params = op["params"][1] if op["params"] else {}
        if op["code"] in ("DEQUANTIZE_S8", "DEQUANTIZE_S16"):
            src = prog["tensors"][op["inputs"][0]]
            result = ref.dequantize(args[0], src["scale"], src["zero_point"])
        elif op["code"] == "REQUANTIZE":
            result = ref.requantize_tensor(args[0], prog["tensors"][op["inputs"][0]], outs[0])
        else:
            result = OPS[op["code"]](args, params, outs)
        results = list(result) if isinstance(result, tuple) else [result]  # a tuple: one per output (LSTM)
        for t, r in zip(op["outputs"], results):
            it.write(t, np.asarray(r).reshape(prog["tensors"][t]["dims"]))
        result = results[0]
        steps.append((args, it.tensor(op["outputs"][0]).copy()))
    return steps


def export_op(pte: bytes, op_index: int, inputs: list[np.ndarray],
              steps: list | None = None) -> tuple[bytes, list[np.ndarray]]:
    """Program op `op_index` alone as a .tflite model, and the values its
    activation operands take when the program runs `inputs` (one sample, as
    interpret.Interpreter.run takes) in the NumPy reference. `steps`: a
    trace() of those inputs, to reuse one run for many ops."""
    p = _Program(pte)
    if not 0 <= op_index < len(p.ops):
        raise ExportError(f"no op {op_index} (the program has {len(p.ops)})")
    steps = trace(pte, inputs) if steps is None else steps
    args, _ = steps[op_index]
    op = p.ops[op_index]
    e = _Exporter(p)
    ins, values, graph_inputs = [], [], []
    for tid, value in zip(_operands(op), args):
        if tid < 0 or p.is_const(tid):
            ins.append(-1)
            continue
        k = e.new_tensor(tid)
        ins.append(k)
        graph_inputs.append(k)
        values.append(value)
    out = e.new_tensor(op["outputs"][0])
    e.emit(op_index, ins, out)
    e.w.set_io(graph_inputs, [out])
    return e.w.finish(), values


# ------------------------------------------------------------------------------- TFLM


def run_tflite_micro(tflite: bytes, inputs: list[np.ndarray], arena_size: int | None = None,
                     tensors: list[int] | None = None) -> list[np.ndarray]:
    """Runs a .tflite model once in TensorFlow Lite Micro (the tflite-micro
    wheel's interpreter, reference kernels). inputs: one array per graph
    input (reshaped to the input's shape; a BOOL input's values != 0).
    Returns the graph outputs, then the values of `tensors` (TFLite tensor
    indices, all kept alive); BOOL values as the program holds them, uint8
    1 or 0."""
    try:
        from tflite_micro.python.tflite_micro import runtime
    except ImportError as exc:  # pragma: no cover - the wheel is a test dependency
        raise TorchMCUError("TensorFlow Lite Micro is not installed (pip install tflite-micro)") from exc
    config = runtime.InterpreterConfig.kPreserveAllTensors if tensors else \
        runtime.InterpreterConfig.kAllocationRecording
    it = runtime.Interpreter.from_bytes(bytes(tflite), arena_size=arena_size or max(1 << 22, 8 * len(tflite)),
                                        intrepreter_config=config)
    for i, x in enumerate(inputs):
        details = it.get_input_details(i)
        x = np.asarray(x).reshape(details["shape"])
        it.set_input(np.ascontiguousarray(x != 0 if details["dtype"] == np.bool_ else x), i)
    it.invoke()
    outs = [np.array(it.get_output(i)) for i in range(_output_count(tflite))]
    outs += [np.array(it.GetTensor(t, 0)["tensor_data"]) for t in (tensors or [])]
    return [o.astype(np.uint8) if o.dtype == np.bool_ else o for o in outs]


def _output_count(tflite: bytes) -> int:
    import tflite as tfl

    return tfl.Model.GetRootAsModel(tflite, 0).Subgraphs(0).OutputsLength()


def summary(tflite: bytes) -> dict[str, Any]:
    """Operator counts, tensor count and size of a .tflite model."""
    import tflite as tfl  # the flatbuffer reader package

    model = tfl.Model.GetRootAsModel(tflite, 0)
    names = {v: k for k, v in vars(tfl.BuiltinOperator).items() if not k.startswith("_")}
    sg = model.Subgraphs(0)
    counts: dict[str, int] = {}
    for i in range(sg.OperatorsLength()):
        code = model.OperatorCodes(sg.Operators(i).OpcodeIndex())
        name = names.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), "?")
        counts[name] = counts.get(name, 0) + 1
    return {"bytes": len(tflite), "operators": sg.OperatorsLength(), "tensors": sg.TensorsLength(),
            "inputs": sg.InputsLength(), "outputs": sg.OutputsLength(), "op_counts": counts}


__all__ = ["ExportError", "export_tflite", "export_op", "trace", "run_tflite_micro", "verify_derived",
           "weight_scales", "summary"]
