"""The op table's attention_norm family (torchmcu/ops/__init__.py says what each field
means): attention and normalisation: batched matmul, LayerNorm."""

from __future__ import annotations

from .row import Kernel, Op

OPS: tuple[Op, ...] = (
    Op("bmm",
       aten=("aten.baddbmm.default", "aten.bmm.default", "aten.matmul.default", "aten.mm.default",
            "aten.scaled_dot_product_attention.default"),
       f32=("BATCH_MATMUL_F32",), i8=("BATCH_MATMUL_S8",), i16=("BATCH_MATMUL_S16",)),
    Op("layer_norm", aten=("aten.layer_norm.default", "aten.native_layer_norm.default"), f32=("LAYER_NORM_F32",),
       i8=("LAYER_NORM_S8",), i16=("LAYER_NORM_S16",)),
    Op("group_norm", aten=("aten.group_norm.default",), f32=("GROUP_NORM_F32",), i8=("GROUP_NORM_S8",),
       i16=("GROUP_NORM_S16",)),
    Op("affine", f32=("MUL_F32", "ADD_F32"), i8=("DEPTHWISE_CONV2D_S8",), i16=("DEPTHWISE_CONV2D_S16",)),
)

KERNELS: tuple[Kernel, ...] = (
    Kernel("BATCH_MATMUL_F32", 33, "BatchMatmulArgs", "BatchMatmulParams", tflite=True,
           doc="a [..., M, K], b [..., K, N] -> [..., M, N], same batch dims"),
    Kernel("BATCH_MATMUL_S8", 34, "QuantBatchMatmulArgs", "QuantBatchMatmulParams", backends=("portable", "cmsis-nn"),
           tflite=True,
           doc="as BATCH_MATMUL_F32 with QuantBatchMatmulParams"),
    Kernel("LAYER_NORM_F32", 94, "LayerNormArgs", "LayerNormParams", tflite=True,
           doc="x [..., cols], gamma [cols] (optional), beta [cols] (optional) -> y (LayerNormParams)"),
    Kernel("LAYER_NORM_S8", 95, "QuantLayerNormArgs", "QuantLayerNormParams", tflite=True,
           doc="x, gamma (i8 [cols]), beta (i32 [cols]) -> y (QuantLayerNormParams)"),
    Kernel("LAYER_NORM_S16", 96, "QuantLayerNormArgs", "QuantLayerNormParams", tflite=True,
           doc="x (i16), gamma (i8), beta (i32) -> y (i16)"),
    Kernel("BATCH_MATMUL_S16", 102, "QuantBatchMatmulArgs", "QuantBatchMatmulParams",
           backends=("portable", "cmsis-nn"), tflite=True,
           doc="as BATCH_MATMUL_S8 on int16 (offsets 0): int64 sums, requantized as LINEAR_S16"),
    Kernel("GROUP_NORM_F32", 103, "GroupNormArgs", "GroupNormParams",
           doc="x [n, positions, c], gamma [c] (optional), beta [c] (optional) -> y: GroupNormParams.groups groups "
               "of c / groups channels"),
    Kernel("GROUP_NORM_S8", 104, "QuantGroupNormArgs", "QuantGroupNormParams",
           doc="x, gamma (i8 [c]), beta (i32 [c]) -> y: LAYER_NORM_S8's scheme over each group's values"),
    Kernel("GROUP_NORM_S16", 105, "QuantGroupNormArgs", "QuantGroupNormParams",
           doc="x (i16), gamma (i8), beta (i32) -> y (i16)"),
)
