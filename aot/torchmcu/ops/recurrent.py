"""The op table's recurrent family (torchmcu/ops/__init__.py says what each field
means): recurrent layers: LSTM, GRU, RNN."""

from __future__ import annotations

from .row import Kernel, Op

OPS: tuple[Op, ...] = (
    Op("lstm", aten=("aten.lstm.input", "aten.lstm_cell.default"), f32=("LSTM_F32",), i8=("LSTM_S8",),
       i16=("LSTM_S16",)),
    Op("gru", aten=("aten.gru.input", "aten.gru_cell.default"), f32=("GRU_F32",), i8=("GRU_S8",), i16=("GRU_S16",)),
    Op("rnn",
       aten=("aten.rnn_relu.input", "aten.rnn_relu_cell.default", "aten.rnn_tanh.input", "aten.rnn_tanh_cell.default"),
       f32=("RNN_F32",), i8=("RNN_S8",), i16=("RNN_S16",)),
    Op("rnn_last", aten=("aten.gru.input", "aten.lstm.input", "aten.rnn_relu.input", "aten.rnn_tanh.input")),
    Op("rnn_state_slice", aten=("aten.gru.input", "aten.lstm.input", "aten.rnn_relu.input", "aten.rnn_tanh.input")),
)

KERNELS: tuple[Kernel, ...] = (
    Kernel("LSTM_F32", 110, "RecurrentArgs", "RecurrentParams",
           note=("Recurrent layers (110..): one op per layer and direction, time-major",
                 "(x [T, B, I], y [T, B, H]); the final hidden state is y's last step (the",
                 "first with reverse). Gates in PyTorch's order: LSTM i, f, g, o; GRU r, z,",
                 "n. State inputs left out (absent) start at zero. See",
                 "firmware/kernels/portable/recurrent/recurrent.h for the arithmetic."),
           doc="x, w_ih [4H, I], w_hh [4H, H], bias [4H] (b_ih + b_hh) or absent, h0 [B, H], c0 [B, H]; y, c [B, "
               "H]"),
    Kernel("GRU_F32", 111, "RecurrentArgs", "RecurrentParams",
           doc="x, w_ih [3H, I], w_hh [3H, H], bias [2, 3H] (b_ih; b_hh) or absent, h0 [B, H]; y"),
    Kernel("RNN_F32", 112, "RecurrentArgs", "RecurrentParams",
           doc="x, w_ih [H, I], w_hh [H, H], bias [H] (b_ih + b_hh) or absent, h0 [B, H]; y (tanh or relu)"),
    Kernel("LSTM_S8", 113, "QuantLstmArgs", "QuantLstmParams", backends=("portable", "cmsis-nn"), tflite=True,
           note=("The integer LSTM: x, w_ih, w_hh (i8), bias (i32 [2, 4H]: the input side with",
                 "-x_zero_point * sum(w_ih) folded in; the hidden side, -h_zero_point *",
                 "sum(w_hh)), h0 (i8 [B, H]), c0 (i16 [B, H] at 2^cell_scale_power),",
                 "scratch (i16 [4, B, H]) [, requant (i32 [4, 4H])]; y (i8), c (i16).",
                 "QuantLstmParams. Without requant: TFLite's scheme (UNIDIRECTIONAL_SEQUENCE_LSTM",
                 "int8x8_16; weights per gate). With it: torchmcu's (weights per row, their",
                 "requantization in requant; gate sums saturated once; a finer cell update:",
                 "aot/torchmcu/reference/recurrent.py).")),
    Kernel("LSTM_S16", 114, "QuantLstmArgs", "QuantLstmParams", backends=("portable", "cmsis-nn"), tflite=True,
           note=("a16w8: LSTM_S8 with x, h0 and y i16 (zero point 0) and the bias i64.",)),
    Kernel("GRU_S8", 115, "QuantGruArgs", "QuantGruParams",
           note=("torchmcu's integer GRU (TFLite has none), the LSTM's scheme: x, w_ih, w_hh (i8),",
                 "bias (i32 [2, 3H], as LSTM_S8's with the hidden n-gate bias in the",
                 "hidden row), h0 (i8) [, scratch] [, requant (i32 [4, 3H]: weights per row)];",
                 "y (i8). QuantGruParams.")),
    Kernel("RNN_S8", 116, "QuantRnnArgs", "QuantRnnParams",
           note=("The same scheme for nn.RNN: x, w_ih, w_hh (i8), bias (i32 [2, H]), h0 (i8)",
                 "[, scratch]; y (i8). QuantRnnParams.")),
    Kernel("GRU_S16", 117, "QuantGruArgs", "QuantGruParams",
           note=("a16w8: GRU_S8 and RNN_S8 with x, h0 and y i16 (zero point 0) and the bias",
                 "i64 (the products requantized as LSTM_S16's; relu's pre-activation at s_h).")),
    Kernel("RNN_S16", 118, "QuantRnnArgs", "QuantRnnParams"),
)
