"""The op table's reduce family (torchmcu/ops/__init__.py says what each field
means): reductions: mean, softmax, log-softmax."""

from __future__ import annotations

from .row import Kernel, Op

OPS: tuple[Op, ...] = (
    Op("mean",
       aten=("aten._adaptive_avg_pool2d.default", "aten.adaptive_avg_pool1d.default",
            "aten.adaptive_avg_pool2d.default", "aten.mean.default", "aten.mean.dim"),
       f32=("MEAN_F32",), i8=("AVG_POOL2D_S8",), i16=("AVG_POOL2D_S16",)),
    Op("mean_axes", aten=("aten.mean.default", "aten.mean.dim"), f32=("MEAN_F32",), i8=("MEAN_S8",),
       i16=("MEAN_S16",)),
    Op("softmax",
       aten=("aten._softmax.default", "aten.softmax.int", "torchmcu.attention_softmax.default",
            "aten.scaled_dot_product_attention.default"),
       f32=("SOFTMAX_F32", "MUL_F32", "ADD_F32", "MASKED_FILL"), i8=("SOFTMAX_S8", "SOFTMAX_MASKED_S8"),
       i16=("SOFTMAX_S16", "SOFTMAX_MASKED_S16")),
    Op("log_softmax", aten=("aten._log_softmax.default", "aten.log_softmax.int"), f32=("LOG_SOFTMAX_F32",),
       i8=("LOG_SOFTMAX_S8",)),
)

KERNELS: tuple[Kernel, ...] = (
    Kernel("MEAN_F32", 10, "MeanArgs", "ReduceParams", tflite=True),
    Kernel("SOFTMAX_F32", 11, "SoftmaxArgs", "SoftmaxParams", tflite=True),
    Kernel("SOFTMAX_S8", 24, "QuantSoftmaxArgs", "QuantSoftmaxParams", backends=("portable", "cmsis-nn"), tflite=True,
           doc="over the last axis"),
    Kernel("SOFTMAX_S16", 49, "QuantSoftmaxArgs", "QuantSoftmaxParams", tflite=True,
           doc="x, exp table, 1/(1+x) table (i16 [513] each); QuantSoftmaxParams (diff_min unused)"),
    Kernel("LOG_SOFTMAX_F32", 90, "SoftmaxArgs", "SoftmaxParams", tflite=True,
           doc="over SoftmaxParams.axis"),
    Kernel("LOG_SOFTMAX_S8", 91, "QuantLogSoftmaxArgs", "QuantLogSoftmaxParams", tflite=True,
           doc="over the last axis: TFLite's int8 LOG_SOFTMAX (output 16/256, zero point 127)"),
    Kernel("MEAN_S8", 92, "QuantMeanArgs", "QuantMeanParams", tflite=True,
           doc="over the axes of axis_mask: TFLite's int8 MEAN (QuantMeanParams)"),
    Kernel("MEAN_S16", 93, "QuantMeanArgs", "QuantMeanParams", tflite=True,
           doc="TFLite's int16 MEAN"),
    Kernel("SOFTMAX_MASKED_S8", 100, "QuantMaskedSoftmaxArgs", "QuantSoftmaxParams", tflite=True,
           doc="x, mask (U8 [rows, cols]) -> y: SOFTMAX_S8 over the unmasked entries; masked: -128"),
    Kernel("SOFTMAX_MASKED_S16", 101, "QuantMaskedSoftmaxArgs", "QuantSoftmaxParams", tflite=True,
           doc="x, exp table, 1/(1+x) table, mask -> y: SOFTMAX_S16 so; masked: 0"),
)
