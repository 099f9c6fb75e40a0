"""The NumPy reference of every integer kernel: the oracle the firmware must
match bit for bit, and the quantization parameter math the compiler needs.

Every kernel function here has the semantics of its C twin, bit for bit: the
integer arithmetic of CMSIS-NN (non single-rounding build) and of TensorFlow
Lite Micro's reference kernels. Intermediates are int64, so nothing wraps;
accumulators are checked to fit int32 as the C kernels assume.

One module per op family, as the lowering passes (passes/lowering/):
quant (parameter math, requantization, quantize/dequantize, int4 packing),
conv, pool_resize, elementwise, reduce, shape_views. Each family module also
holds the interpreter's runners for its op codes (`OPS`); interpret.py
executes a whole compiled program with them.
"""

from __future__ import annotations

from .activations import ACTIVATION_FN, glu, glu_params, glu_table, lut_s16, prelu, prelu_params, table_s8, table_s16
from .attention_norm import (
                   batch_matmul,
                   batch_matmul_params,
                   batch_matmul_s16,
                   layer_norm_constants,
                   layer_norm_params,
                   layer_norm_q,
)
from .conv import (
                   conv2d,
                   conv2d_s16,
                   depthwise_conv2d,
                   depthwise_conv2d_s16,
                   fold_linear_bias,
                   linear,
                   linear_s16,
)
from .elementwise import (
                   add,
                   add_params,
                   add_params_s16,
                   add_s16,
                   clamp,
                   div,
                   div_params,
                   gen_lut_s16,
                   hardswish,
                   lut,
                   lut_table,
                   maximum,
                   minimum,
                   mul,
                   mul_params,
                   mul_s16,
                   sub,
                   sub_params,
)
from .pool_resize import avg_pool2d, avg_pool2d_s16, max_pool2d, max_pool2d_s16
from .quant import (
                   INT16_MAX,
                   INT16_MIN,
                   INT32_MAX,
                   INT32_MIN,
                   conv_requant,
                   dequantize,
                   dequantize_s16,
                   pack_int4,
                   quantize,
                   quantize_multiplier,
                   quantize_s16,
                   requantize,
                   requantize_s64,
                   requantize_tensor,
                   unpack_int4,
)
from .reduce import (
                   log_softmax,
                   log_softmax_params,
                   mean_params,
                   mean_q,
                   softmax,
                   softmax_luts_s16,
                   softmax_params,
                   softmax_params_s16,
                   softmax_s16,
)
from .shape_views import pad, strided_slice

__all__ = [
    "INT16_MAX", "INT16_MIN", "INT32_MAX", "INT32_MIN", "add", "add_params", "add_params_s16", "add_s16",
    "avg_pool2d", "avg_pool2d_s16", "batch_matmul", "batch_matmul_params", "clamp", "conv2d", "conv2d_s16",
    "conv_requant", "depthwise_conv2d", "depthwise_conv2d_s16", "dequantize", "dequantize_s16",
    "fold_linear_bias", "gen_lut_s16", "hardswish", "linear", "linear_s16", "lut", "lut_table", "max_pool2d",
    "max_pool2d_s16", "maximum", "minimum", "mul", "mul_params", "mul_s16", "pack_int4", "pad", "quantize",
    "quantize_multiplier", "quantize_s16", "requantize", "requantize_s64", "requantize_tensor", "softmax",
    "softmax_luts_s16", "softmax_params", "softmax_params_s16", "softmax_s16", "strided_slice", "unpack_int4",
    # element-wise, reductions, normalisation, attention
    "ACTIVATION_FN", "batch_matmul_s16", "div", "div_params", "glu", "glu_params", "glu_table", "layer_norm_constants",
    "layer_norm_params", "layer_norm_q", "log_softmax", "log_softmax_params", "lut_s16", "mean_params", "mean_q",
    "prelu", "prelu_params", "sub", "sub_params", "table_s8", "table_s16",
]
