"""The op table's conv family (torchmcu/ops/__init__.py says what each field
means): convolution, fully connected and matrix products of weights."""

from __future__ import annotations

from .row import Kernel, Op

OPS: tuple[Op, ...] = (
    # folded into the convolution before it, or an "affine" (attention_norm.py) where there is none
    Op("batch_norm", aten=("aten._native_batch_norm_legit_no_training.default", "aten.batch_norm.default")),
    Op("conv2d",
       aten=("aten.conv1d.default", "aten.conv1d.padding", "aten.conv2d.default", "aten.conv2d.padding",
            "aten.convolution.default"),
       f32=("CONV2D_F32", "DEPTHWISE_CONV2D_F32"),
       i8=("CONV2D_S8", "DEPTHWISE_CONV2D_S8", "CONV2D_S4", "DEPTHWISE_CONV2D_S4"),
       i16=("CONV2D_S16", "DEPTHWISE_CONV2D_S16")),
    Op("conv_transpose2d",
       aten=("aten.conv_transpose1d.default", "aten.conv_transpose2d.input", "aten.convolution.default"),
       f32=("TRANSPOSE_CONV2D_F32",), i8=("TRANSPOSE_CONV2D_S8",), i16=("TRANSPOSE_CONV2D_S16",)),
    Op("linear", aten=("aten.linear.default", "aten.matmul.default", "aten.mm.default"), f32=("LINEAR_F32",),
       i8=("LINEAR_S8", "LINEAR_S4"), i16=("LINEAR_S16",)),
)

KERNELS: tuple[Kernel, ...] = (
    Kernel("LINEAR_F32", 0, "LinearArgs", "LinearParams", tflite=True),
    Kernel("CONV2D_F32", 1, "Conv2dArgs", "Conv2dParams", tflite=True),
    Kernel("DEPTHWISE_CONV2D_F32", 2, "Conv2dArgs", "Conv2dParams", tflite=True),
    Kernel("CONV2D_S8", 17, "QuantConv2dArgs", "QuantConv2dParams", backends=("portable", "cmsis-nn", "hifi"),
           tflite=True,
           doc="x, w, bias (i32), multiplier (i32 [oc]), shift (i32 [oc]) [, scratch (i8)]"),
    Kernel("DEPTHWISE_CONV2D_S8", 18, "QuantConv2dArgs", "QuantConv2dParams",
           backends=("portable", "cmsis-nn", "hifi"), tflite=True),
    Kernel("LINEAR_S8", 19, "QuantLinearArgs", "QuantLinearParams", backends=("portable", "cmsis-nn", "hifi"),
           tflite=True,
           doc="x, w, bias with kernel sums folded in (i32), multiplier, shift [, scratch]"),
    Kernel("CONV2D_S4", 36, "QuantConv2dArgs", "QuantConv2dParams", backends=("portable", "cmsis-nn"), tflite=True,
           note=("W4A8 (36..): as the _S8 op of the same name with the weights I4 (packed,",
                 "see DType.I4); same operands, params and args.")),
    Kernel("DEPTHWISE_CONV2D_S4", 37, "QuantConv2dArgs", "QuantConv2dParams", backends=("portable", "cmsis-nn"),
           tflite=True),
    Kernel("LINEAR_S4", 38, "QuantLinearArgs", "QuantLinearParams", backends=("portable", "cmsis-nn"), tflite=True),
    Kernel("CONV2D_S16", 42, "QuantConv2dArgs", "QuantConv2dParams", backends=("portable", "cmsis-nn"), tflite=True,
           doc="x, w (i8), bias (i64 [oc]), multiplier, shift (i32 [oc]) [, scratch]; QuantConv2dParams"),
    Kernel("DEPTHWISE_CONV2D_S16", 43, "QuantConv2dArgs", "QuantConv2dParams", backends=("portable", "cmsis-nn"),
           tflite=True),
    Kernel("LINEAR_S16", 44, "QuantLinearArgs", "QuantLinearParams", backends=("portable", "cmsis-nn"), tflite=True,
           doc="x, w (i8), bias (i64 [out]), multiplier, shift (i32 [1] or [out]) [, scratch]"),
    Kernel("TRANSPOSE_CONV2D_F32", 60, "Conv2dArgs", "Conv2dParams", tflite=True,
           note=("Convolution, pooling and resizing (60..79): see",
                 "firmware/kernels/portable/conv/conv.h and pool_resize/pool_resize.h for",
                 "the arithmetic.",
                 "Transposed convolution: output pixel (iy * stride - pad_top + ky,",
                 "ix * stride - pad_left + kx) gathers x[iy][ix] * w[ky][kx]; w is",
                 "[out_c, kh, kw, in_c / groups] (TFLite's TRANSPOSE_CONV, grouped as PyTorch;",
                 "groups = in_c / w's last dim), dilation 1."),
           doc="x, w, bias [out_c] (optional); Conv2dParams"),
    Kernel("TRANSPOSE_CONV2D_S8", 61, "QuantConv2dArgs", "QuantConv2dParams", backends=("portable", "cmsis-nn"),
           tflite=True,
           doc="x, w, bias (i32), multiplier, shift (i32 [oc]) [, scratch (i8)]; QuantConv2dParams"),
    Kernel("TRANSPOSE_CONV2D_S16", 62, "QuantConv2dArgs", "QuantConv2dParams", tflite=True,
           doc="x (i16), w (i8), bias (i64), multiplier, shift [, scratch (i16)]; QuantConv2dParams"),
)
