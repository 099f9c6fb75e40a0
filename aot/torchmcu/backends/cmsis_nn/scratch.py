"""The scratch memory CMSIS-NN's int8 kernels need, computed ahead of time.

CMSIS-NN sizes its temporary buffers with `*_get_buffer_size` functions whose
result depends on the core's ISA: the plain C build (no DSP extension, e.g.
Cortex-M3), DSP (M4, M7, M33) and MVE/Helium (M55, M85). The compiler plans
one scratch tensor per op that needs one, sized for the largest of the three,
so a program stays ISA-independent: the same model.pte runs with the portable
kernels and with CMSIS-NN on any core. The firmware never sizes anything; the
CMSIS-NN kernels' load-time checks only verify that the scratch is big enough
for the core they were built for (firmware/kernels/cmsis_nn/).

`buffer_size` is a Python port of those functions (CMSIS-NN 7.x:
arm_convolve_get_buffer_sizes_s8.c, arm_depthwise_conv_get_buffer_sizes_s8.c,
arm_fully_connected_get_buffer_sizes_s8.c, arm_avgpool_get_buffer_sizes_s8.c)
as compiled by GCC, the toolchain torchmcu builds with. Two results there
depend on the compiler: the DSP 1x1 convolution uses a buffer only under
Arm Compiler 6 (GCC: none), and MVE converts depthwise convolutions with one
input channel to a regular convolution above 1 output channel with GCC (8
with Arm Compiler 6). Integer division and remainder follow C (truncation).

Operands as the program holds them: x and y NHWC, conv weights OHWI,
depthwise weights [1, kh, kw, C*m], linear weights [out, in]; `params` is the
op's parameter table as a dict (QuantConv2dParams, QuantPool2dParams, ...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

ISAS = ("scalar", "dsp", "mve")

# CMSIS-NN constants (Include/arm_nnsupportfunctions.h).
CH_IN_BLOCK_MVE = 124
CONVERT_DW_CONV_WITH_ONE_INPUT_CH_AND_OUTPUT_CH_ABOVE_THRESHOLD = 1  # GCC; 8 under Arm Compiler 6

Dims = Sequence[int]


def _cdiv(a: int, b: int) -> int:
    """C's integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _cmod(a: int, b: int) -> int:
    """C's remainder (the sign of the dividend)."""
    return a - b * _cdiv(a, b)


class _Conv:
    """The fields of cmsis_nn_conv_params / cmsis_nn_dims the sizes read."""

    def __init__(self, x: Dims, w: Dims, y: Dims, p: Mapping[str, Any]) -> None:
        self.in_n, self.in_h, self.in_w, self.in_c = (int(d) for d in x)
        self.f_n, self.f_h, self.f_w, self.f_c = (int(d) for d in w)
        self.out_w = int(y[2])
        self.stride_w = int(p.get("stride_w", 1))
        self.stride_h = int(p.get("stride_h", 1))
        self.pad_w = int(p.get("pad_left", 0))
        self.pad_h = int(p.get("pad_top", 0))
        self.dil_w = int(p.get("dilation_w", 1))
        self.dil_h = int(p.get("dilation_h", 1))

    def is_1x1(self) -> bool:  # arm_nn_is_convolve_1x1
        return (self.pad_w == 0 and self.pad_h == 0 and self.f_w == 1 and self.f_h == 1
                and self.dil_w == 1 and self.dil_h == 1 and self.in_c == self.f_c)

    def is_1x1_fast(self) -> bool:  # arm_nn_is_convolve_1x1_fast
        return self.stride_w == 1 and self.stride_h == 1

    def is_1_x_n(self) -> bool:  # arm_nn_is_convolve_1_x_n
        return (self.in_h == 1 and self.dil_w == 1 and self.f_h == 1
                and _cmod(self.stride_w * self.in_c, 4) == 0 and self.in_c == self.f_c)

    def uneven_1_x_n(self) -> bool:
        """Padded other than TFLite's way (left = total / 2): a causal
        convolution, say, which MVE's 1xN kernel refuses."""
        total = (self.out_w - 1) * self.stride_w + self.f_w - self.in_w
        return self.pad_w * 2 + _cmod(total, 2) != total


def _convolve_s8(isa: str, c: _Conv) -> int:
    """arm_convolve_s8_get_buffer_size{,_mve}: im2col columns."""
    cols = c.in_c * c.f_w * c.f_h
    if isa == "mve":
        return 4 * _cdiv(cols + 15, 16) * 16  # four im2col rows of whole 16-byte lanes
    aligned = cols + 4 - cols % 4 if cols % 4 else cols
    return 2 * aligned * 2  # two int16 im2col rows


def _convolve_1_x_n_mve(c: _Conv) -> int:
    """arm_convolve_1_x_n_s8_get_buffer_size_mve."""
    total_pad = (c.out_w - 1) * c.stride_w + c.f_w - c.in_w
    asym_pad = _cmod(total_pad, 2)
    right_pad_num = max(1, _cdiv(c.pad_w + asym_pad + c.stride_w - 1, c.stride_w)) if c.pad_w + asym_pad != 0 else 0
    left_pad_num = max(1, _cdiv(c.pad_w + c.stride_w - 1, c.stride_w)) if c.pad_w != 0 else 0
    no_pad_num = max(c.out_w - (right_pad_num + left_pad_num), 0)
    if right_pad_num + no_pad_num + left_pad_num != c.out_w:
        return _convolve_s8("mve", c)
    pad_size_left = c.pad_w * c.in_c
    pad_size_right = right_pad_num * c.in_c if asym_pad else pad_size_left
    num_elem_left = c.f_w * c.in_c
    num_elem_right = num_elem_left - c.in_c
    return max(num_elem_left + pad_size_left, num_elem_right + pad_size_right)


def _convolve_wrapper(isa: str, c: _Conv) -> int:
    """arm_convolve_wrapper_s8_get_buffer_size (scalar), _dsp, _mve."""
    if c.is_1x1():
        # arm_convolve_1x1_s8_fast's DSP buffer exists under Arm Compiler 6 only;
        # the strided 1x1 kernel needs none.
        return 0
    if c.is_1_x_n():
        if c.uneven_1_x_n():  # the kernel calls arm_convolve_s8 (firmware/kernels/cmsis_nn/conv_s8.cc)
            return _convolve_s8(isa, c)
        return _convolve_1_x_n_mve(c) if isa == "mve" else _convolve_s8(isa, c)
    return _convolve_s8(isa, c)


def _depthwise_wrapper(isa: str, x: Dims, w: Dims, y: Dims, p: Mapping[str, Any]) -> int:
    """arm_depthwise_conv_wrapper_s8_get_buffer_size (scalar), _dsp, _mve."""
    in_n, _, _, in_c = (int(d) for d in x)
    _, kh, kw, f_c = (int(d) for d in w)
    out_c = int(y[3])
    pad_h, pad_w = int(p.get("pad_top", 0)), int(p.get("pad_left", 0))
    unit_dilation = int(p.get("dilation_h", 1)) == 1 and int(p.get("dilation_w", 1)) == 1
    optimized = in_c == out_c and in_n == 1 and unit_dilation  # arm_depthwise_conv_s8_opt / _3x3
    if isa == "mve":
        if in_c == 1 and out_c > CONVERT_DW_CONV_WITH_ONE_INPUT_CH_AND_OUTPUT_CH_ABOVE_THRESHOLD:
            # Run as a regular convolution: its buffer, then the transposed weights.
            conv = _Conv(x, (f_c, kh, kw, 1), y, p)
            return _convolve_wrapper("mve", conv) + f_c * kh * kw
        return 4 * CH_IN_BLOCK_MVE * kw * kh if optimized else 0
    if not optimized or isa == "scalar":
        return 0
    if kw == 3 and kh == 3 and pad_h <= 1 and pad_w <= 1:
        return 0  # arm_depthwise_conv_3x3_s8
    return in_c * kw * kh * 2  # int16 copies of the input window


def _convolve_wrapper_s4(isa: str, c: _Conv, out_w: int) -> int:
    """arm_convolve_wrapper_s4_get_buffer_size{,_dsp,_mve} (CMSIS-NN 7.x,
    arm_convolve_get_buffer_sizes_s4.c): 1x1 none; otherwise two int16
    im2col columns, or on MVE four 16-byte-lane columns (a 1xN shape whose
    padding splits evenly needs none there)."""
    cols = c.in_c * c.f_w * c.f_h
    if c.is_1x1():
        return 0
    if isa != "mve":
        return 2 * cols * 2
    mve = 4 * _cdiv(cols + 15, 16) * 16
    if c.is_1_x_n():
        total_pad = (out_w - 1) * c.stride_w + c.f_w - c.in_w
        asym_pad = _cmod(total_pad, 2)
        right = max(1, _cdiv(c.pad_w + asym_pad + c.stride_w - 1, c.stride_w)) if c.pad_w + asym_pad != 0 else 0
        left = max(1, _cdiv(c.pad_w + c.stride_w - 1, c.stride_w)) if c.pad_w != 0 else 0
        return mve if right + max(out_w - (right + left), 0) + left != out_w else 0
    return mve


def _depthwise_wrapper_s4(isa: str, x: Dims, w: Dims, y: Dims, p: Mapping[str, Any]) -> int:
    """arm_depthwise_conv_wrapper_s4_get_buffer_size{,_dsp,_mve}: only the
    optimized kernel (one input channel per output channel, batch 1, no
    dilation) has a buffer, the s8 optimized kernel's (DSP size on any core
    without MVE)."""
    in_n, _, _, in_c = (int(d) for d in x)
    _, kh, kw, _ = (int(d) for d in w)
    unit_dilation = int(p.get("dilation_h", 1)) == 1 and int(p.get("dilation_w", 1)) == 1
    if not (in_c == int(y[3]) and in_n == 1 and unit_dilation):
        return 0
    return 4 * CH_IN_BLOCK_MVE * kw * kh if isa == "mve" else in_c * kw * kh * 2


REVERSE_TCOL_EFFICIENT_THRESHOLD = 16  # Include/arm_nnsupportfunctions.h


def _transpose_conv(isa: str, x: Dims, w: Dims, y: Dims, p: Mapping[str, Any]) -> int:
    """arm_transpose_conv_s8_get_buffer_size{,_mve} (4-aligned, or what the
    scatter kernel indexes when more) plus
    arm_transpose_conv_s8_get_reverse_conv_buffer_size: the scratch operand
    of firmware/kernels/cmsis_nn/transpose_conv_s8.cc. 0 for the shapes it
    leaves to the portable kernel."""
    n, h, wd, c = (int(d) for d in x)
    f_n, kh, kw, f_c = (int(d) for d in w)
    out_h, out_w, out_c = int(y[1]), int(y[2]), int(y[3])
    sh, sw = int(p.get("stride_h", 1)), int(p.get("stride_w", 1))
    pt, pl = int(p.get("pad_top", 0)), int(p.get("pad_left", 0))
    if pt >= kh or pl >= kw or out_h + pt > (h - 1) * sh + kh or out_w + pl > (wd - 1) * sw + kw:
        return 0
    if sh <= 2 and sw <= 2 and c > REVERSE_TCOL_EFFICIENT_THRESHOLD:  # a convolution of the upscaled input
        conv = _Conv((n, h * sh, wd * sw, c), (f_n, kh, kw, f_c), y, {})
        return (_convolve_s8(isa, conv) + 3) // 4 * 4 + c * kw * kh * f_n
    asked = ((wd - 1) * sw + max(kw, sh)) * out_c * max(kh, sh) * 4
    used = ((wd - 1) * sw + max(kw, sw)) * out_c * max(kh, sh) * 4
    return (max(asked, used) + 3) // 4 * 4


def buffer_size(code: str, isa: str, x_dims: Dims, w_dims: Dims | None, y_dims: Dims,
                params: Mapping[str, Any] | None = None) -> int:
    """What CMSIS-NN's get_buffer_size function for this op returns on `isa`
    ("scalar", "dsp" or "mve"), in bytes."""
    if isa not in ISAS:
        raise ValueError(f"unknown ISA {isa!r}; one of {', '.join(ISAS)}")
    p = params or {}
    if code == "CONV2D_S8":
        assert w_dims is not None
        return _convolve_wrapper(isa, _Conv(x_dims, w_dims, y_dims, p))
    if code == "DEPTHWISE_CONV2D_S8":
        assert w_dims is not None
        return _depthwise_wrapper(isa, x_dims, w_dims, y_dims, p)
    if code == "LINEAR_S8":
        assert w_dims is not None
        return int(w_dims[0]) * 4 if isa == "mve" else 0  # the kernel sums, int32 [out]
    if code == "AVG_POOL2D_S8":
        return int(x_dims[3]) * 4 if isa == "dsp" else 0  # int32 sums per channel
    if code == "CONV2D_S4":
        assert w_dims is not None
        return _convolve_wrapper_s4(isa, _Conv(x_dims, w_dims, y_dims, p), int(y_dims[2]))
    if code == "DEPTHWISE_CONV2D_S4":
        assert w_dims is not None
        return _depthwise_wrapper_s4(isa, x_dims, w_dims, y_dims, p)
    if code == "TRANSPOSE_CONV2D_S8":
        assert w_dims is not None
        return _transpose_conv(isa, x_dims, w_dims, y_dims, p)
    return 0  # LINEAR_S4: arm_fully_connected_s4 needs none


def scratch_bytes_s16(code: str, x_dims: Dims, w_dims: Dims) -> int:
    """Bytes of CMSIS-NN's buffer for the s16 convolutions, the largest any
    ISA asks (arm_convolve_wrapper_s16_get_buffer_size: im2col of two output
    columns of kh * kw * cin int16 values, four rounded up to 8 values with
    MVE; the depthwise fast path: kh * kw * cin int16 values, four with
    MVE plus 8 bytes)."""
    if code == "CONV2D_S16":
        _, kh, kw, cin = w_dims
        return 4 * ((kh * kw * cin + 7) // 8 * 8) * 2
    if code == "DEPTHWISE_CONV2D_S16":
        _, kh, kw, _ = w_dims
        return 4 * kh * kw * x_dims[3] * 2 + 8
    return 0


def lstm_scratch_bytes(code: str, y_dims: Dims) -> int:
    """arm_lstm_unidirectional_s8/_s16's context (TFLM's cmsis_nn LSTM asks
    the same): two int16 gate buffers of [B, H] (temp1, temp2; the cell state
    is the op's own output), and the hidden state it reads and writes back,
    [B, H] of the activations' type (a copy of h0: the op's inputs are read
    only). y: [T, B, H]."""
    _, batch, hidden = (int(d) for d in y_dims)
    return 2 * batch * hidden * 2 + batch * hidden * (2 if code == "LSTM_S16" else 1)


def scratch_bytes(code: str, x_dims: Dims, w_dims: Dims | None, y_dims: Dims,
                  params: Mapping[str, Any] | None = None) -> int:
    """Bytes of the scratch operand an op needs to run on CMSIS-NN on any core:
    the largest buffer over the three ISAs; 0 when none does.

    Convolutions and depthwise convolutions take it from their scratch operand.
    LINEAR_S8 needs none: MVE's kernel sums are the program's bias (input
    offset times the weight sums, folded in ahead of time; the kernel is called
    with input offset 0), which the kernel points CMSIS-NN at. Pools have no
    scratch operand: avg pool's DSP accumulator (4 bytes a channel) is a fixed
    stack array in the kernel. Every other op needs none."""
    if code in ("CONV2D_S16", "DEPTHWISE_CONV2D_S16"):
        assert w_dims is not None
        return scratch_bytes_s16(code, x_dims, w_dims)
    if code in ("LSTM_S8", "LSTM_S16"):  # per-row weights (empty gate vectors): CMSIS-NN's gates cannot take them
        return 0 if params is not None and not params.get("x_multiplier", [0]) else lstm_scratch_bytes(code, y_dims)
    if code == "BATCH_MATMUL_S8":  # MVE's kernel sums: an int32 per row of b (given transposed, adj_y)
        return 4 * int(y_dims[-1]) if params and params.get("adj_y") and len(y_dims) <= 4 else 0
    if code not in ("CONV2D_S8", "DEPTHWISE_CONV2D_S8", "CONV2D_S4", "DEPTHWISE_CONV2D_S4",
                    "TRANSPOSE_CONV2D_S8"):
        return 0
    return max(buffer_size(code, isa, x_dims, w_dims, y_dims, params) for isa in ISAS)
