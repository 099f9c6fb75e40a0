"""The op table's pool_resize family (torchmcu/ops/__init__.py says what each field
means): pooling and resizing."""

from __future__ import annotations

from .row import Kernel, Op

OPS: tuple[Op, ...] = (
    Op("max_pool2d",
       aten=("aten.max_pool1d.default", "aten.max_pool2d.default", "aten.max_pool2d_with_indices.default"),
       f32=("MAX_POOL2D_F32",), i8=("MAX_POOL2D_S8",), i16=("MAX_POOL2D_S16",)),
    Op("avg_pool2d",
       aten=("aten._adaptive_avg_pool2d.default", "aten.adaptive_avg_pool1d.default",
            "aten.adaptive_avg_pool2d.default", "aten.avg_pool1d.default", "aten.avg_pool2d.default"),
       f32=("AVG_POOL2D_F32",), i8=("AVG_POOL2D_S8",), i16=("AVG_POOL2D_S16",)),
    Op("adaptive_avg_pool2d",
       aten=("aten._adaptive_avg_pool2d.default", "aten.adaptive_avg_pool1d.default",
            "aten.adaptive_avg_pool2d.default"),
       f32=("ADAPTIVE_AVG_POOL2D_F32",), i8=("ADAPTIVE_AVG_POOL2D_S8",), i16=("ADAPTIVE_AVG_POOL2D_S16",)),
    Op("resize",
       aten=("aten._upsample_nearest_exact1d.default", "aten._upsample_nearest_exact1d.vec",
            "aten._upsample_nearest_exact2d.default", "aten._upsample_nearest_exact2d.vec",
            "aten.upsample_bilinear2d.default", "aten.upsample_bilinear2d.vec", "aten.upsample_linear1d.default",
            "aten.upsample_linear1d.vec", "aten.upsample_nearest1d.default", "aten.upsample_nearest1d.vec",
            "aten.upsample_nearest2d.default", "aten.upsample_nearest2d.vec"),
       f32=("RESIZE_NEAREST", "RESIZE_BILINEAR_F32"), i8=("RESIZE_NEAREST", "RESIZE_BILINEAR_S8"),
       i16=("RESIZE_NEAREST", "RESIZE_BILINEAR_S16")),
)

KERNELS: tuple[Kernel, ...] = (
    Kernel("MAX_POOL2D_F32", 8, "Pool2dArgs", "Pool2dParams", tflite=True),
    Kernel("AVG_POOL2D_F32", 9, "Pool2dArgs", "Pool2dParams", tflite=True),
    Kernel("MAX_POOL2D_S8", 22, "QuantPool2dArgs", "QuantPool2dParams", backends=("portable", "cmsis-nn"),
           tflite=True),
    Kernel("AVG_POOL2D_S8", 23, "QuantPool2dArgs", "QuantPool2dParams", backends=("portable", "cmsis-nn"),
           tflite=True),
    Kernel("MAX_POOL2D_S16", 47, "QuantPool2dArgs", "QuantPool2dParams", backends=("portable", "cmsis-nn"),
           tflite=True,
           doc="QuantPool2dParams with int16 act_min / act_max"),
    Kernel("AVG_POOL2D_S16", 48, "QuantPool2dArgs", "QuantPool2dParams", backends=("portable", "cmsis-nn"),
           tflite=True),
    Kernel("RESIZE_NEAREST", 63, "ResizeArgs", "ResizeParams", tflite=True,
           note=("Resizing over H and W of NHWC, TFLite's RESIZE_* semantics (ResizeParams).",),
           doc="x, y of one dtype (F32, I8, I16; integers share their quantization)"),
    Kernel("RESIZE_BILINEAR_F32", 64, "ResizeArgs", "ResizeParams", tflite=True),
    Kernel("RESIZE_BILINEAR_S8", 65, "ResizeArgs", "ResizeParams", tflite=True,
           doc="x, y share their quantization"),
    Kernel("RESIZE_BILINEAR_S16", 66, "ResizeArgs", "ResizeParams", tflite=True),
    Kernel("ADAPTIVE_AVG_POOL2D_F32", 67, "AdaptivePool2dArgs", "Pool2dParams",
           note=("Adaptive average pooling, PyTorch's windows: [floor(i * in / out), ceil((i + 1) * in / out)).",),
           doc="x, y NHWC; Pool2dParams (act_min, act_max)"),
    Kernel("ADAPTIVE_AVG_POOL2D_S8", 68, "QuantAdaptivePool2dArgs", "QuantPool2dParams",
           doc="x, y share their quantization; QuantPool2dParams (act_min, act_max)"),
    Kernel("ADAPTIVE_AVG_POOL2D_S16", 69, "QuantAdaptivePool2dArgs", "QuantPool2dParams"),
)
