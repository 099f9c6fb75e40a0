"""The scratch RAM the portable kernels' fast paths take, computed ahead of time.

The int8 convolution and depthwise fast paths (firmware/kernels/fast/conv)
keep their patch and row buffers in the op's scratch operand, planned in the
arena and live only during the op, not on the stack: the stack is every
op's worst case at once, the arena only the op's own, so the total RAM
falls wherever that op is not the peak. Without enough scratch a fast path
takes the generic loop (same bits, more instructions).

A program stays ISA-independent: the bytes are the larger of the Cortex-M
DSP (M4, M7, M33) and MVE (M55, M85) layouts, each as the firmware computes
it (conv_scratch in conv2d_s8.h, kRowsScratch and rows_scratch_bytes in
dwconv_s8_rows.h). Operands as the program holds them: x and y NHWC, conv
weights OHWI, depthwise weights [1, kh, kw, C * m]; `params` the op's
QuantConv2dParams as a dict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

MAX_PATCH = 576                        # kMaxPatch: run()'s largest patch (3x3x64)
PATCH_BUFFER = 4 * MAX_PATCH           # kPatchBuffer
OC_CHUNK = 64                          # kOcChunk: MVE run()'s table of 3 words a channel
WIDE_OC = 32                           # kWideOc: run_wide's block of output channels
DSP_WIDE_CHUNK = (PATCH_BUFFER - 4 * WIDE_OC * 4) // 8  # kWideChunk (DSP)
SLACK = 16
DW_MAX_COLS = 64                       # dw::kMaxCols (both ISAs)
DW_MVE_PLAN = 704                      # dw::kPlanBytes (MVE): the row path's Plan
DW_MVE_ROWS = 4 * 256 + SLACK + DW_MVE_PLAN  # dw::kRowsScratch (MVE)
DW_DSP_MAX_PAD_ROW = 768               # dw::kMaxPadRow (DSP)


def _up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def conv_bytes(k: int) -> int:
    """conv2d_s8's fast path for patches of k taps: max(MVE, DSP)."""
    if k <= MAX_PATCH:
        mve = 64 * _up(k, 16) // 16 + 3 * OC_CHUNK * 4 + SLACK
        r = _up(k, 4)
        dsp = (r * 8 if r * 8 <= PATCH_BUFFER else r * 4) + r + SLACK
    else:
        n = -(-k // MAX_PATCH)
        kc = _up(-(-k // n), 16)
        mve = 4 * kc + 5 * WIDE_OC * 4 + SLACK
        dsp = PATCH_BUFFER + DSP_WIDE_CHUNK + SLACK
    return max(mve, dsp)


def depthwise_bytes(x: Sequence[int], w: Sequence[int], y: Sequence[int], p: Mapping[str, Any]) -> int:
    """The depthwise row paths (depth multiplier 1): MVE's row buffer for
    kernels up to 4x4, DSP's zero-point row and column buffer for 3x3."""
    _, _, in_w, c = (int(d) for d in x)
    _, kh, kw, cm = (int(d) for d in w)
    _, oh, ow, _ = (int(d) for d in y)
    sw = int(p.get("stride_w", 1))
    cols = (ow - 1) * sw + kw
    if cm != c or kh > 4 or kw > 4 or cols > DW_MAX_COLS or oh * ow < 4:
        return 0
    row_stride = in_w * c
    dsp = _up(row_stride, 16) + 8 * cols + SLACK if kh == 3 and kw == 3 and row_stride <= DW_DSP_MAX_PAD_ROW else 0
    return max(DW_MVE_ROWS, dsp)


def scratch_bytes(code: str, x: Sequence[int], w: Sequence[int] | None, y: Sequence[int],
                  params: Mapping[str, Any]) -> int:
    """The bytes of scratch the portable kernels' fast paths take for the op
    (0: they take none)."""
    if w is None or len(x) != 4 or len(w) != 4:
        return 0
    if code == "CONV2D_S8" and int(w[3]) == int(x[3]):  # one group: grouped convolutions stay generic
        return conv_bytes(int(w[1]) * int(w[2]) * int(w[3]))
    if code == "DEPTHWISE_CONV2D_S8":
        return depthwise_bytes(x, w, y, params)
    return 0
