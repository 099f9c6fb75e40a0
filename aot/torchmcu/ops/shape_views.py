"""The op table's shape_views family (torchmcu/ops/__init__.py says what each field
means): views, copies and data movement: permute, concat, slice, pad."""

from __future__ import annotations

from .row import Kernel, Op

OPS: tuple[Op, ...] = (
    Op("reshape",
       aten=("aten._unsafe_view.default", "aten.flatten.using_ints", "aten.reshape.default", "aten.squeeze.default",
            "aten.squeeze.dim", "aten.squeeze.dims", "aten.unflatten.int", "aten.unsqueeze.default",
            "aten.view.default", "aten.lstm.input", "aten.gru.input", "aten.rnn_relu.input", "aten.rnn_tanh.input",
            "aten.gru_cell.default", "aten.lstm_cell.default", "aten.rnn_relu_cell.default",
            "aten.rnn_tanh_cell.default", "aten.select_scatter.default", "torchmcu.attention_softmax.default")),
    Op("slice",
       aten=("aten.expand.default", "aten.pad.default", "aten.narrow.default", "aten.select.int",
            "aten.slice.Tensor", "aten.split.Tensor", "aten.split_with_sizes.default", "aten.unbind.int",
            "aten.slice_scatter.default", "aten.select_scatter.default", "torchmcu.attention_softmax.default"),
       f32=("SLICE",), i8=("SLICE",), i16=("SLICE",)),
    Op("permute",
       aten=("aten.permute.default", "aten.t.default", "aten.transpose.int",
            "aten.scaled_dot_product_attention.default"),
       f32=("PERMUTE",), i8=("PERMUTE",), i16=("PERMUTE",)),
    Op("cat",
       aten=("aten.cat.default", "aten.pad.default", "aten.gru.input", "aten.lstm.input", "aten.rnn_relu.input",
            "aten.rnn_tanh.input", "aten.slice_scatter.default", "aten.select_scatter.default"),
       f32=("CONCAT",), i8=("CONCAT",)),
    Op("pad", aten=("aten.constant_pad_nd.default", "aten.pad.default"), f32=("PAD",), i8=("PAD",)),
    Op("gather", aten=("aten.embedding.default",), f32=("GATHER",)),
)

KERNELS: tuple[Kernel, ...] = (
    Kernel("PERMUTE", 12, "PermuteArgs", "PermuteParams", tflite=True),
    Kernel("CONCAT", 13, "ConcatArgs", "ConcatParams", tflite=True),
    Kernel("COPY", 14, None, None, inplace=(0,), tflite=True),
    Kernel("PAD", 27, "PadArgs", "PadParams", tflite=True,
           doc="any dtype (F32, I8): constant padding per physical dim"),
    Kernel("GATHER", 108, "GatherArgs", None, tflite=True,
           doc="table [rows, cols] (any dtype), ids (I32) -> y [count, cols]: nn.Embedding's rows (bad ids: zeros)"),
    Kernel("SLICE", 51, "SliceArgs", "SliceParams", tflite=True,
           note=("capture / views / shape (51..59)",
                 "Any dtype: y[i] = x[begin + i * step] per physical dim (SliceParams);",
                 "step 0 repeats the element (a broadcast: expand). Output dims from y.")),
)
