"""The .tflite export of the recurrent program ops: their op_<code> methods."""

from __future__ import annotations

import numpy as np

from ..exporter import ExporterBase
from ..program import ExportError, _f32


class RecurrentOps(ExporterBase):
    """Recurrent layers: LSTM_S8 / LSTM_S16 as UNIDIRECTIONAL_SEQUENCE_LSTM
    (time-major, TFLite's integer LSTM). The hidden and cell states are the
    op's variable tensors, which TFLite Micro starts at zero and keeps from
    one invocation to the next: the program op must start at zero too (no
    h0, c0), and only its output y has a TFLite counterpart."""

    def op_lstm_s8(self, index, op, p, ins, out):
        P = self.p
        x, w_ih, w_hh, bias, h0, c0 = op["inputs"][:6]
        if h0 >= 0 or c0 >= 0:
            raise ExportError(f"{P.describe(index)}: an initial state from a tensor (TFLite's LSTM starts from "
                              "its variable tensors, at zero)")
        if p.get("reverse"):
            raise ExportError(f"{P.describe(index)}: a reversed direction (TFLite's UNIDIRECTIONAL_SEQUENCE_LSTM "
                              "runs forward)")
        if len(op["inputs"]) > 7 and op["inputs"][7] >= 0:  # torchmcu's integer LSTM
            raise ExportError(f"{P.describe(index)}: per-channel weights: compile with --recurrent-weights per-gate")
        wide = op["code"] == "LSTM_S16"
        yt = op["outputs"][0]
        T, B, H = P.tensors[yt]["dims"]
        s_x, zp_x = P.qparams(x)
        s_h, zp_h = P.qparams(yt)
        wi, wh, b = P.const(w_ih), P.const(w_hh), P.const(bias).astype(np.int64)
        si = np.asarray(P.tensors[w_ih]["channel_scales"], np.float32)[::H]
        sh = np.asarray(P.tensors[w_hh]["channel_scales"], np.float32)[::H]
        if not np.array_equal(b[1], -zp_h * wh.astype(np.int64).sum(1)):
            raise ExportError(f"{P.describe(index)}: a hidden-side bias (TFLite's LSTM has none)")
        gate_bias = b[0] + zp_x * wi.astype(np.int64).sum(1)  # the input offset's kernel sums unfolded
        adt, bdt = ("int16", "int64") if wide else ("int8", "int32")
        name = op["name"]
        tensors = [ins[0]]
        for w, s, kind in ((wi, si, "input"), (wh, sh, "recurrent")):
            for g, gate in enumerate(("input", "forget", "cell", "output")):
                tensors.append(self.const_tensor(f"{name}_{kind}_to_{gate}", w[g * H:(g + 1) * H], "int8",
                                                 float(s[g]), 0))
        tensors += [-1, -1, -1]  # no peepholes
        for g, gate in enumerate(("input", "forget", "cell", "output")):
            tensors.append(self.const_tensor(f"{name}_{gate}_bias", gate_bias[g * H:(g + 1) * H], bdt,
                                             _f32(s_x) * float(si[g]), 0))
        tensors += [-1, -1]  # no projection
        tensors.append(self.w.add_tensor(f"{name}_h", (B, H), adt, s_h, zp_h, variable=True))
        tensors.append(self.w.add_tensor(f"{name}_c", (B, H), "int16", 2.0 ** p["cell_scale_power"], 0,
                                         variable=True))
        tensors += [-1, -1, -1, -1]  # no layer norm
        cell_clip = p.get("cell_clip", 0) * 2.0 ** p["cell_scale_power"]
        self.w.add_op("UNIDIRECTIONAL_SEQUENCE_LSTM", tensors, [out],
                      dict(fused_activation_function="TANH", cell_clip=float(cell_clip), proj_clip=0.0,
                           time_major=True))
    op_lstm_s16 = op_lstm_s8
