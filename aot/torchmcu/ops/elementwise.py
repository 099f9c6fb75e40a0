"""Element-wise arithmetic, clamps and lookup activations, quantize and dequantize: the elementwise family's rows of the op table (see
torchmcu/ops/__init__.py for what each field means)."""

from __future__ import annotations

from .row import Kernel, Op

OPS: tuple[Op, ...] = (
    Op('clamp', aten=('aten.clamp.default', 'aten.hardtanh.default', 'aten.relu.default', 'aten.relu6.default'), f32=('CLAMP_F32',), i8=('CLAMP_S8',)),
    Op('sigmoid', aten=('aten.sigmoid.default',), f32=('SIGMOID_F32',), i8=('LUT_S8',), i16=('LUT_S16',)),
    Op('tanh', aten=('aten.tanh.default', 'aten.gelu.default'), f32=('TANH_F32',), i8=('LUT_S8',), i16=('LUT_S16',)),
    Op('hardswish', aten=('aten.hardswish.default',), f32=('HARDSWISH_F32',), i8=('LUT_S8',), i16=('LUT_S16',)),
    Op('add', aten=('aten.add.Scalar', 'aten.add.Tensor', 'aten.rsub.Scalar', 'aten.rsub.Tensor', 'aten.sub.Scalar', 'aten.sub.Tensor', 'aten.baddbmm.default', 'aten.scaled_dot_product_attention.default', 'quantized_decomposed.quantize_per_tensor.default'), f32=('ADD_F32',), i8=('ADD_S8',), i16=('ADD_S16',)),
    Op('sub', aten=('aten.add.Scalar', 'aten.add.Tensor', 'aten.rsub.Scalar', 'aten.rsub.Tensor', 'aten.sub.Scalar', 'aten.sub.Tensor', 'quantized_decomposed.quantize_per_tensor.default'), f32=('SUB_F32',), i8=('SUB_S8',), i16=('SUB_S16',)),
    Op('mul', aten=('aten.div.Scalar', 'aten.div.Tensor', 'aten.div.Tensor_mode', 'aten.mul.Scalar', 'aten.mul.Tensor', 'aten.neg.default', 'aten.baddbmm.default'), f32=('MUL_F32',), i8=('MUL_S8',), i16=('MUL_S16',)),
    Op('div', aten=('aten.div.Scalar', 'aten.div.Tensor', 'aten.div.Tensor_mode'), f32=('DIV_F32',), i8=('DIV_S8',)),
    Op('maximum', aten=('aten.maximum.default',), f32=('MAXIMUM_F32',), i8=('MAXIMUM_S8',)),
    Op('minimum', aten=('aten.minimum.default',), f32=('MINIMUM_F32',), i8=('MINIMUM_S8',)),
    Op('quantize', aten=('quantized_decomposed.quantize_per_tensor.default',), i8=('QUANTIZE_S8',), i16=('QUANTIZE_S16',)),
    Op('dequantize', aten=('quantized_decomposed.dequantize_per_tensor.default',), i8=('DEQUANTIZE_S8',), i16=('DEQUANTIZE_S16',)),
    Op('requantize', i16=('REQUANTIZE',)),
)

KERNELS: tuple[Kernel, ...] = (
    Kernel('CLAMP_F32', 3, 'ClampArgs', 'ClampParams', inplace=(0,), tflite=True),
    Kernel('SIGMOID_F32', 4, None, None, inplace=(0,), tflite=True),
    Kernel('TANH_F32', 5, None, None, inplace=(0,), tflite=True),
    Kernel('ADD_F32', 6, 'BinaryArgs', 'BinaryParams', inplace=(0, 1), tflite=True),
    Kernel('MUL_F32', 7, 'BinaryArgs', 'BinaryParams', inplace=(0, 1), tflite=True),
    Kernel('QUANTIZE_S8', 15, 'QuantizeArgs', None, tflite=True, note=('int8: see firmware/kernels/portable/portable_s8.h for the arithmetic.',), doc="f32 -> i8 at the output's scale and zero point"),
    Kernel('DEQUANTIZE_S8', 16, 'QuantizeArgs', None, reference=False, tflite=True, doc="i8 -> f32 at the input's scale and zero point"),
    Kernel('ADD_S8', 20, 'QuantAddArgs', 'QuantAddParams', backends=('portable', 'cmsis-nn'), inplace=(0, 1), tflite=True),
    Kernel('MUL_S8', 21, 'QuantMulArgs', 'QuantMulParams', backends=('portable', 'cmsis-nn'), inplace=(0, 1), tflite=True),
    Kernel('CLAMP_S8', 25, 'QuantClampArgs', 'QuantClampParams', inplace=(0,), tflite=True),
    Kernel('LUT_S8', 26, None, None, inplace=(0,), tflite=True, doc='x, table (i8 [256], indexed by x + 128)'),
    Kernel('MAXIMUM_F32', 28, 'BinaryArgs', 'BinaryParams', inplace=(0, 1), tflite=True, doc='a, b broadcast as ADD_F32 (BinaryParams)'),
    Kernel('MINIMUM_F32', 29, 'BinaryArgs', 'BinaryParams', inplace=(0, 1), tflite=True),
    Kernel('MAXIMUM_S8', 30, 'QuantMaxMinArgs', None, inplace=(0, 1), tflite=True, doc='a, b broadcast as ADD_S8; inputs and output share quantization'),
    Kernel('MINIMUM_S8', 31, 'QuantMaxMinArgs', None, inplace=(0, 1), tflite=True),
    Kernel('HARDSWISH_F32', 32, None, None, inplace=(0,), tflite=True, doc='x * relu6(x + 3) / 6 (int8: LUT_S8)'),
    Kernel('QUANTIZE_S16', 40, 'QuantizeArgs', None, tflite=True, note=('39: reserved (HiFi backend).', 'a16w8 (40..): int16 activations (symmetric, zero point 0), int8 weights;', 'see firmware/kernels/portable/portable_s16.h for the arithmetic.'), doc="f32 -> i16 at the output's scale (QuantizeArgs)"),
    Kernel('DEQUANTIZE_S16', 41, 'QuantizeArgs', None, reference=False, tflite=True, doc="i16 -> f32 at the input's scale"),
    Kernel('ADD_S16', 45, 'QuantAddArgs', 'QuantAddParams', backends=('portable', 'cmsis-nn'), tflite=True, doc='QuantAddParams, offsets 0, left_shift 15'),
    Kernel('MUL_S16', 46, 'QuantMulArgs', 'QuantMulParams', backends=('portable', 'cmsis-nn'), tflite=True, doc='QuantMulParams, offsets 0'),
    Kernel('REQUANTIZE', 50, 'RequantizeArgs', None, reference=False, tflite=True, note=('x (i8 or i16) -> y (i8 or i16) at another precision or scale, where', "mixed-precision layers meet (TFLite's QUANTIZE from an integer input).")),
    Kernel('SUB_F32', 85, 'BinaryArgs', 'BinaryParams', inplace=(0, 1), tflite=True, doc='a - b, broadcast as ADD_F32 (BinaryParams)'),
    Kernel('SUB_S8', 86, 'QuantAddArgs', 'QuantAddParams', inplace=(0, 1), tflite=True, doc="a - b: ADD_S8's arithmetic and params, TFLite's int8 SUB"),
    Kernel('SUB_S16', 87, 'QuantAddArgs', 'QuantAddParams', inplace=(0, 1), tflite=True, doc="a - b: ADD_S16's (TFLite's int16 SUB)"),
    Kernel('DIV_F32', 88, 'BinaryArgs', 'BinaryParams', inplace=(0, 1), tflite=True, doc='a / b, broadcast as ADD_F32 (BinaryParams)'),
    Kernel('DIV_S8', 89, 'QuantDivArgs', 'QuantDivParams', inplace=(0, 1), tflite=True, doc="a / b: TFLite's int8 DIV (QuantDivParams)"),
)
