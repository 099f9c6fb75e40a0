"""Which int8 fast paths (firmware/kernels/fast/) an image links, for one program.

The fast paths pick their variant from the op's shape at run time, so an image
links every variant unless told otherwise: run_wide for patches over 576
bytes, the DSP GEMM of 4 and of 2 pixels, the depthwise row path's stride-1
and stride-2 instantiations, linear_s8's per-channel and per-tensor blocks
(MVE), its paths for 1-2 outputs and for over 640 inputs (DSP). `defines()`
reads the same conditions from the program's ops (kernels/fast/fast.h names
the macros; the conditions are those of fast/conv/conv2d_s8.h,
dwconv_s8_rows.h and linear_s8.h) and turns off the
variants no op can take: the same instructions, fewer bytes (`--opt speed`,
the default).

`--opt size` (the size-first build) also leaves out a whole family's fast path
where the instructions it saves per inference are few (below SIZE_MIN_SAVED:
the family's work summed over its ops, multiply-adds or elements, times
SAVED_PER_UNIT, what the fast path saves per unit of work against the generic
kernel; a fast path is 1-6 KB, so under that it costs more bytes than it saves
instructions), and compiles the fast paths that stay at the
image's -Os instead of -O2 (TMCU_FAST_OS). A path left out returns false and
the generic kernel runs: the same bits either way.
"""

from __future__ import annotations

from pathlib import Path

from ..program import schema

OPTS = ("speed", "size")
MAX_PATCH = 576  # conv2d_s8.h's kMaxPatch
DSP_FOUR = 288  # conv2d_s8.h: K (rounded up to 4) whose 4 expanded pixels fill kPatchBuffer
SIZE_MIN_SAVED = 64 * 1024
# Instructions the fast path saves per unit of work against the generic kernel (M55 and M4, bench/size.py's
# builds): 2-7 per multiply-add for the MAC families, about 110 per element for ADD's table and lanes,
# about 100 per element for softmax's table gathers (issue #27: 109 generic, under 10 fast on the M55).
SAVED_PER_UNIT = {"CONV": 2, "DW": 2, "LINEAR": 2, "ADD": 110, "POOL": 2, "SOFTMAX": 100}

# The family macro of each program op whose portable kernel calls a fast path first.
FAMILY = {"CONV2D_S8": "CONV", "DEPTHWISE_CONV2D_S8": "DW", "LINEAR_S8": "LINEAR", "ADD_S8": "ADD",
          "AVG_POOL2D_S8": "POOL", "MAX_POOL2D_S8": "POOL", "SOFTMAX_S8": "SOFTMAX", "SOFTMAX_MASKED_S8": "SOFTMAX"}
VARIANTS = ("CONV_WIDE", "CONV_G4", "CONV_G2", "DW_S1", "DW_S2", "FC_PER_CHANNEL", "FC_PER_TENSOR", "FC_FEW",
            "FC_CHUNKED", "ADD_LANES")
ADD_TABLE_MIN = 256  # binary_s8.h's kAddTableMin
FC_CHUNK = 320  # linear_s8.h's kFcChunk


def _prod(dims: list[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def program_needs(pte: bytes) -> tuple[set[str], dict[str, int]]:
    """The variants (VARIANTS) some op of the program can take, and each
    family's work per inference (multiply-adds; elements for ADD and pools)."""
    d = schema.decode(pte)
    tensors, ops = d["tensors"], d["ops"]
    variants: set[str] = set()
    work = dict.fromkeys(FAMILY.values(), 0)
    for op in ops:
        family = FAMILY.get(op["code"])
        if family is None:
            continue
        dims = [tensors[i]["dims"] for i in op["inputs"]]
        out = tensors[op["outputs"][0]]["dims"]
        params = op["params"][1] if op["params"] else {}
        if family == "CONV":
            _, kh, kw, group_in = dims[1]
            k = kh * kw * dims[0][3]
            work[family] += _prod(out) * kh * kw * group_in
            if group_in != dims[0][3]:
                continue  # grouped: the generic kernel
            if k > MAX_PATCH:
                variants.add("CONV_WIDE")
            elif (k + 3) // 4 * 4 <= DSP_FOUR:
                variants.add("CONV_G4")
            else:
                variants.add("CONV_G2")
        elif family == "DW":
            work[family] += _prod(out) * dims[1][1] * dims[1][2]
            stride = params.get("stride_w")
            if stride in (1, 2):
                variants.add(f"DW_S{stride}")
        elif family == "LINEAR":
            n, k = dims[1][0], dims[1][1]
            work[family] += _prod(dims[0]) * n
            variants.add("FC_PER_CHANNEL" if tensors[op["inputs"][3]]["nbytes"] // 4 == n else "FC_PER_TENSOR")
            if n <= 2:
                variants.add("FC_FEW")
            elif k > FC_CHUNK:
                variants.add("FC_CHUNKED")
        elif family == "POOL":
            work[family] += _prod(out) * params.get("kernel_h", 1) * params.get("kernel_w", 1)
        elif family == "SOFTMAX":
            work[family] += _prod(out)
        else:
            work[family] += _prod(out)
            if all(d == out for d in dims[:2]) and not _add_tabulated(params, _prod(out)):
                variants.add("ADD_LANES")
    return variants, work


def _add_tabulated(p: dict, n: int) -> bool:
    """Whether fast/elementwise/binary_s8.h's MVE table takes an ADD of n
    elements of equal shapes (add_s8_same_shape and add_plan at scale 1):
    else the 4-lane path of portable/elementwise/binary_s8.cc runs it."""
    if n < ADD_TABLE_MIN or p["output_shift"] >= 0 or p["output_multiplier"] < 0:
        return False
    ls = p["left_shift"]
    for shifted, tabled in ((1, 2), (2, 1)):
        k = ls - 1 + p[f"input{shifted}_shift"]
        if p[f"input{shifted}_multiplier"] == 1 << 30 and ls >= 1 and 0 <= k <= 22:
            m, s, off = p[f"input{tabled}_multiplier"], p[f"input{tabled}_shift"], p[f"input{tabled}_offset"]
            bias = p[f"input{shifted}_offset"] << k
            most = max(abs(_requantize((x + off) << ls, m, s) + bias) for x in range(-128, 128))
            return most + (128 << k) < 1 << 30
    return False


def _requantize(x: int, m: int, s: int) -> int:
    """common/requantize.h's requantize() of one int32 (s <= 0, the ADD's input shifts)."""
    hi = max(-(1 << 31), min((1 << 31) - 1, (x * m + (1 << 30)) >> 31))
    right = -s
    mask = (1 << right) - 1
    return (hi >> right) + ((hi & mask) > (mask >> 1) + (hi < 0))


def defines(out_dir: str | Path, opt: str) -> list[str]:
    """The -D flags of the fast paths OUT's program leaves out at `opt`
    ("speed" or "size")."""
    variants, work = program_needs((Path(out_dir) / "model.pte").read_bytes())
    flags = [f"-DTMCU_FAST_{v}=0" for v in VARIANTS if v not in variants]
    if opt == "size":
        flags += [f"-DTMCU_FAST_{f}=0" for f, n in work.items() if n * SAVED_PER_UNIT[f] < SIZE_MIN_SAVED]
        flags.append("-DTMCU_FAST_OS=1")
    return flags
