"""The op table's activations family (torchmcu/ops/__init__.py says what each field
means): activations with their own kernels: the generic float activation, int16 lookups, PReLU, GLU."""

from __future__ import annotations

from .row import Kernel, Op

OPS: tuple[Op, ...] = (
    Op("activation",
       aten=("aten.elu.default", "aten.exp.default", "aten.gelu.default", "aten.hardsigmoid.default",
            "aten.reciprocal.default", "aten.rsqrt.default", "aten.sqrt.default", "aten.silu.default",
            "aten.gru.input", "aten.gru_cell.default", "aten.lstm.input", "aten.lstm_cell.default",
            "aten.rnn_relu.input", "aten.rnn_relu_cell.default", "aten.rnn_tanh.input", "aten.rnn_tanh_cell.default"),
       f32=("ACTIVATION_F32",), i8=("LUT_S8",), i16=("LUT_S16",)),
    Op("prelu", aten=("aten._prelu_kernel.default", "aten.leaky_relu.default", "aten.prelu.default"),
       f32=("PRELU_F32",), i8=("PRELU_S8",), i16=("PRELU_S16",)),
    Op("glu", aten=("aten.glu.default",), f32=("GLU_F32",), i8=("GLU_S8",), i16=("GLU_S16",)),
)

KERNELS: tuple[Kernel, ...] = (
    Kernel("ACTIVATION_F32", 80, "ActivationArgs", "ActivationParams", inplace=(0,), tflite=True,
           note=("C: element-wise, reductions, normalisation and attention (80..109). The",
                 "integer arithmetic of each is in its reference twin",
                 "(aot/torchmcu/reference/activations.py, elementwise.py, reduce.py,",
                 "attention_norm.py)."),
           doc="x -> y: ActivationParams.fn element-wise (GELU, SiLU, hardsigmoid, ELU, exp, ...)"),
    Kernel("LUT_S16", 81, None, None, inplace=(0,), tflite=True,
           doc="x, table (i16 [513]) -> y: TFLite's interpolated int16 lookup (LUTPopulate<int16_t>)"),
    Kernel("PRELU_F32", 82, "BinaryArgs", "BinaryParams", tflite=True,
           doc="x, alpha (broadcast to x as ADD_F32's b) -> y (BinaryParams)"),
    Kernel("PRELU_S8", 83, "QuantPreluArgs", "QuantPreluParams", tflite=True,
           doc="x, alpha (i8, broadcast) -> y: TFLite's int8 PRELU (QuantPreluParams)"),
    Kernel("PRELU_S16", 84, "QuantPreluArgs", "QuantPreluParams", tflite=True,
           doc="x (i16), alpha (i8) -> y (i16): TFLite's int16 PRELU"),
    Kernel("GLU_F32", 97, "GluArgs", "GluParams", tflite=True,
           doc="x -> y: the first half along GluParams.axis times sigmoid of the second"),
    Kernel("GLU_S8", 98, "QuantGluArgs", "QuantGluParams", tflite=True,
           doc="x, sigmoid table (i8 [256]) -> y: LUT_S8 of the second half, MUL_S8 by the first"),
    Kernel("GLU_S16", 99, "QuantGluArgs", "QuantGluParams",
           doc="x, sigmoid table (i16 [513]) -> y: LUT_S16, MUL_S16"),
)
