"""Writes TFLite flatbuffer models (.tflite) with the `tflite` package's
generated builder functions.

A model is one subgraph of tensors and builtin operators:

    w = TFLiteWriter()
    x = w.add_tensor("x", (1, 8, 8, 3), "int8", scale=0.02, zero_point=-3)
    k = w.add_tensor("k", (4, 3, 3, 3), "int8", scale=[0.01] * 4, zero_point=[0] * 4,
                     data=weights, quantized_dimension=0)
    y = w.add_tensor("y", (1, 8, 8, 4), "int8", scale=0.05, zero_point=1)
    w.add_op("CONV_2D", [x, k, -1], [y], {"padding": "SAME", "stride_h": 1})
    model_bytes = w.finish()

Tensors with `data` are constants (their bytes go into a buffer). The graph's
inputs default to the tensors without data that no op produces, its outputs
to those no op consumes; set_io() overrides both. Tensors may be shared
between any number of ops. Operator options are dicts keyed by the schema's
field names (snake_case); enum fields take their names ("SAME", "RELU6").
"""

from __future__ import annotations

import importlib
from typing import Any, Sequence

import flatbuffers
import numpy as np
from tflite.ActivationFunctionType import ActivationFunctionType
from tflite.BuiltinOperator import BuiltinOperator
from tflite.BuiltinOptions import BuiltinOptions
from tflite.Padding import Padding
from tflite.TensorType import TensorType

_DTYPES = {
    "float32": (TensorType.FLOAT32, np.float32),
    "float16": (TensorType.FLOAT16, np.float16),
    "int32": (TensorType.INT32, np.int32),
    "uint8": (TensorType.UINT8, np.uint8),
    "int64": (TensorType.INT64, np.int64),
    "bool": (TensorType.BOOL, np.bool_),
    "int16": (TensorType.INT16, np.int16),
    "int8": (TensorType.INT8, np.int8),
}

# Builtin operator -> its BuiltinOptions table (None: the op takes none).
_OPTIONS = {
    "ADD": "AddOptions",
    "MUL": "MulOptions",
    "SUB": "SubOptions",
    "CONV_2D": "Conv2DOptions",
    "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
    "FULLY_CONNECTED": "FullyConnectedOptions",
    "MAX_POOL_2D": "Pool2DOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions",
    "SOFTMAX": "SoftmaxOptions",
    "RESHAPE": "ReshapeOptions",
    "CONCATENATION": "ConcatenationOptions",
    "TRANSPOSE": "TransposeOptions",
    "PAD": "PadOptions",
    "BATCH_MATMUL": "BatchMatMulOptions",
    "MEAN": "ReducerOptions",
    "QUANTIZE": "QuantizeOptions",
    "DEQUANTIZE": "DequantizeOptions",
    "LOGISTIC": None,
    "TANH": None,
    "RELU": None,
    "RELU6": None,
    # conv + pool/resize
    "TRANSPOSE_CONV": "TransposeConvOptions",
    "RESIZE_BILINEAR": "ResizeBilinearOptions",
    "RESIZE_NEAREST_NEIGHBOR": "ResizeNearestNeighborOptions",
    "SLICE": None,
    "SPLIT": "SplitOptions",
    "STRIDED_SLICE": "StridedSliceOptions",
    "BROADCAST_TO": None,
    "GATHER": "GatherOptions",
    # element-wise, reductions, attention
    "DIV": "DivOptions",
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "UnidirectionalSequenceLSTMOptions",
}

# Fields holding enums, by the enum class that names their values.
_ENUM_FIELDS = {
    "padding": Padding,
    "fused_activation_function": ActivationFunctionType,
}

_SCHEMA_VERSION = 3


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


class TFLiteWriter:
    """Collects tensors and operators; finish() serialises the model."""

    def __init__(self, description: str = "torchmcu") -> None:
        self.description = description
        self._tensors: list[dict] = []
        self._ops: list[tuple[int, list[int], list[int], str | None, dict]] = []
        self._opcodes: list[int] = []
        self._inputs: list[int] | None = None
        self._outputs: list[int] | None = None

    # ---------------------------------------------------------------- graph

    def add_tensor(self, name: str, shape: Sequence[int], dtype: Any = "float32",
                   scale: float | Sequence[float] | None = None,
                   zero_point: int | Sequence[int] | None = None, data: Any = None,
                   quantized_dimension: int | None = None, variable: bool = False) -> int:
        """Adds a tensor; returns its index. dtype: a numpy dtype or name
        (int8, int16, int32, int64, uint8, float32, float16, bool). scale /
        zero_point: per-tensor scalars or per-channel sequences (then
        quantized_dimension names the channel axis; default 0). data: the
        constant's values (converted to dtype, C order). dtype "int4": data
        is the packed bytes (two values per byte, element i in the low nibble
        of byte i // 2 when i is even, the high one when odd: TFLite's INT4
        buffers), ceil(elements / 2) of them. variable: a state tensor the
        interpreter keeps between invocations (an LSTM's hidden and cell
        state; TFLite Micro resets it to its zero point)."""
        shape = [int(d) for d in shape]
        if isinstance(dtype, str) and dtype == "int4":
            packed = None if data is None else np.ascontiguousarray(np.asarray(data, dtype=np.uint8)).ravel()
            if packed is not None and packed.size != (int(np.prod(shape, dtype=np.int64)) + 1) // 2:
                raise ValueError(f"{name}: {packed.size} packed bytes for int4 tensor {shape}")
            return self._add(name, shape, TensorType.INT4, packed, scale, zero_point, quantized_dimension)
        if variable:
            index = self.add_tensor(name, shape, dtype, scale, zero_point, data, quantized_dimension)
            self._tensors[index]["variable"] = True
            return index
        dtype_name = np.dtype(dtype).name
        if dtype_name not in _DTYPES:
            raise ValueError(f"unsupported tensor type {dtype_name}")
        if data is not None:
            data = np.ascontiguousarray(np.asarray(data, dtype=_DTYPES[dtype_name][1]))
            if list(data.shape) != shape and data.size != int(np.prod(shape, dtype=np.int64)):
                raise ValueError(f"{name}: data of shape {data.shape} for tensor {shape}")
        return self._add(name, shape, _DTYPES[dtype_name][0], data, scale, zero_point, quantized_dimension)

    def _add(self, name: str, shape: list[int], type_code: int, data: Any, scale: Any, zero_point: Any,
             quantized_dimension: int | None) -> int:
        quant = None
        if scale is not None:
            scales = [float(s) for s in np.atleast_1d(np.asarray(scale, dtype=np.float64))]
            zps = (np.zeros(len(scales), dtype=np.int64) if zero_point is None else
                   np.atleast_1d(np.asarray(zero_point, dtype=np.int64)))
            if len(zps) == 1 and len(scales) > 1:
                zps = np.repeat(zps, len(scales))
            if len(zps) != len(scales):
                raise ValueError(f"{name}: {len(scales)} scales but {len(zps)} zero points")
            if quantized_dimension is None:
                quantized_dimension = 0
            quant = (scales, [int(z) for z in zps], int(quantized_dimension))
        self._tensors.append(dict(name=name, shape=shape, type=type_code, data=data, quant=quant))
        return len(self._tensors) - 1

    def add_op(self, opcode: str | int, inputs: Sequence[int], outputs: Sequence[int],
               options: dict | None = None) -> int:
        """Adds a builtin operator (name such as "CONV_2D", or a
        BuiltinOperator value); inputs/outputs are tensor indices (-1 for an
        omitted optional input). options: the op's options table fields."""
        if isinstance(opcode, str):
            code = getattr(BuiltinOperator, opcode)
            name = opcode
        else:
            code = int(opcode)
            name = next((k for k, v in vars(BuiltinOperator).items() if v == code), None)
        table = _OPTIONS.get(name) if name is not None else None
        if options and table is None:
            raise ValueError(f"options given for {name}, which takes none here")
        if code not in self._opcodes:
            self._opcodes.append(code)
        self._ops.append((self._opcodes.index(code), [int(i) for i in inputs],
                          [int(o) for o in outputs], table, dict(options or {})))
        return len(self._ops) - 1

    def set_io(self, inputs: Sequence[int], outputs: Sequence[int]) -> None:
        self._inputs = [int(i) for i in inputs]
        self._outputs = [int(o) for o in outputs]

    def _default_io(self) -> tuple[list[int], list[int]]:
        produced = {o for _, _, outs, _, _ in self._ops for o in outs}
        consumed = {i for _, ins, _, _, _ in self._ops for i in ins}
        inputs = [i for i, t in enumerate(self._tensors)
                  if t["data"] is None and i not in produced]
        outputs = [i for i in sorted(produced) if i not in consumed]
        return inputs, outputs

    # ------------------------------------------------------------ serialise

    @staticmethod
    def _vector(b: flatbuffers.Builder, values: Sequence, kind: str) -> int:
        prepend = {"int32": b.PrependInt32, "int64": b.PrependInt64,
                   "float32": b.PrependFloat32, "uint8": b.PrependUint8,
                   "offset": b.PrependUOffsetTRelative}[kind]
        size = {"int32": 4, "int64": 8, "float32": 4, "uint8": 1, "offset": 4}[kind]
        b.StartVector(size, len(values), size)
        for v in reversed(values):
            prepend(v)
        return b.EndVector()

    def _options(self, b: flatbuffers.Builder, table: str, options: dict) -> int:
        mod = importlib.import_module(f"tflite.{table}")
        # Vectors first: flatbuffers forbids nesting them inside a table.
        vectors = {}
        for key, value in options.items():
            if isinstance(value, (list, tuple, np.ndarray)):
                vectors[key] = self._vector(b, [int(v) for v in value], "int32")
        getattr(mod, f"{table}Start")(b)
        for key, value in options.items():
            adder = getattr(mod, f"{table}Add{_camel(key)}", None)
            if adder is None:
                raise ValueError(f"{table} has no field {key}")
            if key in vectors:
                value = vectors[key]
            elif key in _ENUM_FIELDS and isinstance(value, str):
                value = getattr(_ENUM_FIELDS[key], value)
            adder(b, value)
        return getattr(mod, f"{table}End")(b)

    def finish(self) -> bytes:
        """The model as .tflite bytes (one subgraph; buffer 0 is the empty
        sentinel, each constant tensor gets its own buffer)."""
        # The package's __init__ star-imports each module's class over the
        # module's own name, so the modules are fetched explicitly.
        (Buffer, Model, Operator, OperatorCode, QuantizationParameters, SubGraph,
         Tensor) = (importlib.import_module(f"tflite.{m}") for m in (
             "Buffer", "Model", "Operator", "OperatorCode", "QuantizationParameters",
             "SubGraph", "Tensor"))
        b = flatbuffers.Builder(1024)
        inputs, outputs = self._default_io()
        if self._inputs is not None:
            inputs, outputs = self._inputs, self._outputs

        # Buffers: 0 is empty; constants follow in tensor order.
        buffer_index = []
        buffer_data = []
        for t in self._tensors:
            if t["data"] is None:
                buffer_index.append(0)
            else:
                buffer_data.append(t["data"].tobytes())
                buffer_index.append(len(buffer_data))
        buffer_offsets = []
        for raw in [None] + buffer_data:
            data_vec = None
            if raw is not None:
                b.StartVector(1, len(raw), 16)  # 16-byte aligned constant data
                b.head = b.head - len(raw)
                b.Bytes[b.head:b.head + len(raw)] = raw
                data_vec = b.EndVector()
            Buffer.BufferStart(b)
            if data_vec is not None:
                Buffer.BufferAddData(b, data_vec)
            buffer_offsets.append(Buffer.BufferEnd(b))

        tensor_offsets = []
        for t, buf in zip(self._tensors, buffer_index):
            name = b.CreateString(t["name"])
            shape = self._vector(b, t["shape"], "int32")
            quant = None
            if t["quant"] is not None:
                scales, zps, qdim = t["quant"]
                scale_vec = self._vector(b, scales, "float32")
                zp_vec = self._vector(b, zps, "int64")
                QuantizationParameters.QuantizationParametersStart(b)
                QuantizationParameters.QuantizationParametersAddScale(b, scale_vec)
                QuantizationParameters.QuantizationParametersAddZeroPoint(b, zp_vec)
                QuantizationParameters.QuantizationParametersAddQuantizedDimension(b, qdim)
                quant = QuantizationParameters.QuantizationParametersEnd(b)
            Tensor.TensorStart(b)
            Tensor.TensorAddShape(b, shape)
            Tensor.TensorAddType(b, t["type"])
            Tensor.TensorAddBuffer(b, buf)
            Tensor.TensorAddName(b, name)
            if quant is not None:
                Tensor.TensorAddQuantization(b, quant)
            if t.get("variable"):
                Tensor.TensorAddIsVariable(b, True)
            tensor_offsets.append(Tensor.TensorEnd(b))

        op_offsets = []
        for opcode_index, ins, outs, table, options in self._ops:
            opts = self._options(b, table, options) if table is not None else None
            in_vec = self._vector(b, ins, "int32")
            out_vec = self._vector(b, outs, "int32")
            Operator.OperatorStart(b)
            Operator.OperatorAddOpcodeIndex(b, opcode_index)
            Operator.OperatorAddInputs(b, in_vec)
            Operator.OperatorAddOutputs(b, out_vec)
            if opts is not None:
                Operator.OperatorAddBuiltinOptionsType(b, getattr(BuiltinOptions, table))
                Operator.OperatorAddBuiltinOptions(b, opts)
            op_offsets.append(Operator.OperatorEnd(b))

        tensors_vec = self._vector(b, tensor_offsets, "offset")
        ops_vec = self._vector(b, op_offsets, "offset")
        in_vec = self._vector(b, inputs, "int32")
        out_vec = self._vector(b, outputs, "int32")
        sg_name = b.CreateString("main")
        SubGraph.SubGraphStart(b)
        SubGraph.SubGraphAddTensors(b, tensors_vec)
        SubGraph.SubGraphAddInputs(b, in_vec)
        SubGraph.SubGraphAddOutputs(b, out_vec)
        SubGraph.SubGraphAddOperators(b, ops_vec)
        SubGraph.SubGraphAddName(b, sg_name)
        subgraph = SubGraph.SubGraphEnd(b)

        code_offsets = []
        for code in self._opcodes:
            OperatorCode.OperatorCodeStart(b)
            # Old readers look at the deprecated int8 field; it saturates at
            # 127 (PLACEHOLDER_FOR_GREATER_OP_CODES).
            OperatorCode.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
            OperatorCode.OperatorCodeAddBuiltinCode(b, code)
            OperatorCode.OperatorCodeAddVersion(b, 1)
            code_offsets.append(OperatorCode.OperatorCodeEnd(b))

        codes_vec = self._vector(b, code_offsets, "offset")
        subgraphs_vec = self._vector(b, [subgraph], "offset")
        buffers_vec = self._vector(b, buffer_offsets, "offset")
        desc = b.CreateString(self.description)
        Model.ModelStart(b)
        Model.ModelAddVersion(b, _SCHEMA_VERSION)
        Model.ModelAddOperatorCodes(b, codes_vec)
        Model.ModelAddSubgraphs(b, subgraphs_vec)
        Model.ModelAddDescription(b, desc)
        Model.ModelAddBuffers(b, buffers_vec)
        model = Model.ModelEnd(b)
        b.Finish(model, file_identifier=b"TFL3")
        return bytes(b.Output())
