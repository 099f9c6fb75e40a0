"""Attention and normalisation end to end: PyTorch's own modules
(nn.MultiheadAttention, F.scaled_dot_product_attention, nn.LayerNorm,
nn.TransformerEncoderLayer, torchaudio's Conformer pieces) compiled at
float32, int8 and a16w8 and run by the C++ runtime on the host (sanitizers
on): within the float tolerance of PyTorch, or bit for bit with the NumPy
reference with no float fallback; batched products against TFLite Micro;
one attention block in QEMU on the Cortex-M55, portable and with CMSIS-NN."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import REPO, assert_close, needs_arm_gcc, needs_qemu, run_on_host
from test_ops_host import Fn
from test_quant import calib
from torch import nn
from torchmcu.compiler import compile
from torchmcu.errors import CompileError
from torchmcu.program import schema
from torchmcu.sim import runner

sys.path.insert(0, str(REPO / "examples"))
from sequence_zoo import TinyViT  # noqa: E402  the keyword-transformer ViT of the sequence zoo


def _mha(batch_first: bool, **kw) -> nn.Module:
    mha = nn.MultiheadAttention(16, 4, batch_first=batch_first, **kw)
    return mha


class CrossAttention(nn.Module):
    """nn.MultiheadAttention on separate query, key and value (its in-projection
    as three linears); need_weights gives the weights averaged over heads."""

    def __init__(self, batch_first: bool = True, need_weights: bool = False, mask: torch.Tensor | None = None):
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 4, batch_first=batch_first)
        self.need_weights = need_weights
        self.register_buffer("mask", mask if mask is not None else torch.zeros(0), persistent=False)

    def forward(self, q, k, v):
        mask = self.mask if self.mask.numel() else None
        out, weights = self.mha(q, k, v, need_weights=self.need_weights, attn_mask=mask)
        return (out, weights) if self.need_weights else out


def _causal(n: int) -> torch.Tensor:
    return nn.Transformer.generate_square_subsequent_mask(n)  # float, -inf above the diagonal


def _keep(l: int, s: int) -> torch.Tensor:
    """A boolean mask (True: attend) with every row keeping at least one key."""
    m = torch.from_numpy(np.random.RandomState(3).rand(l, s) > 0.3)
    m[:, 0] = True
    return m


SDPA = F.scaled_dot_product_attention
# name: (factory, input shapes, op codes expected at int8)
CASES = {
    "mha_cross_batch_first": (lambda: CrossAttention(), [(1, 6, 16), (1, 5, 16), (1, 5, 16)],
                              {"LINEAR_S8", "BATCH_MATMUL_S8", "SOFTMAX_S8"}),
    "mha_cross_seq_first_weights": (lambda: CrossAttention(False, True), [(6, 2, 16), (5, 2, 16), (5, 2, 16)],
                                    {"BATCH_MATMUL_S8", "SOFTMAX_S8", "MEAN_S8"}),
    "mha_causal_float_mask": (lambda: CrossAttention(mask=_causal(6)), [(1, 6, 16)] * 3,
                              {"BATCH_MATMUL_S8", "SOFTMAX_MASKED_S8"}),
    "mha_bool_mask_weights": (lambda: CrossAttention(need_weights=True, mask=~_keep(6, 5)),
                              [(1, 6, 16), (1, 5, 16), (1, 5, 16)], {"SOFTMAX_MASKED_S8", "MEAN_S8"}),
    "sdpa_heads": (lambda: Fn(lambda m, q, k, v: SDPA(q, k, v)), [(1, 2, 6, 8), (1, 2, 5, 8), (1, 2, 5, 4)],
                   {"BATCH_MATMUL_S8", "SOFTMAX_S8"}),
    "sdpa_causal_scale": (lambda: Fn(lambda m, q, k, v: SDPA(q, k, v, is_causal=True, scale=0.2)),
                          [(2, 6, 8)] * 3, {"SOFTMAX_MASKED_S8"}),
    "sdpa_additive_mask": (lambda: Masked(torch.randn(4, 7) * 0.5 + torch.where(_keep(4, 7), 0.0, float("-inf"))),
                           [(1, 3, 4, 8), (1, 3, 7, 8), (1, 3, 7, 8)], {"ADD_S8", "SOFTMAX_MASKED_S8"}),
    "sdpa_bool_mask_broadcast_batch": (lambda: Masked(_keep(4, 6)), [(2, 3, 4, 8), (1, 3, 6, 8), (1, 3, 6, 8)],
                                       {"SOFTMAX_MASKED_S8"}),
    "layer_norm_gelu": (lambda: nn.Sequential(nn.Linear(12, 16), nn.LayerNorm(16), nn.GELU()), [(2, 5, 12)],
                        {"LAYER_NORM_S8", "LUT_S8"}),
    "layer_norm_two_dims_no_affine": (lambda: Fn(lambda m, x: F.layer_norm(x * 3 + 1, (4, 6))), [(2, 4, 6)],
                                      {"LAYER_NORM_S8"}),
    "matmul_broadcast_batch": (lambda: Fn(lambda m, x, y: x @ y), [(2, 3, 4, 5), (1, 3, 5, 6)],
                               {"BATCH_MATMUL_S8"}),
    "matmul_constant_3d": (lambda: Fn(lambda m, x: x @ m[0].weight.view(2, 3, 4), nn.Linear(3, 8)),
                           [(2, 5, 3)], {"BATCH_MATMUL_S8"}),
    "matmul_constant_left": (lambda: Fn(lambda m, x: m[0].weight @ x, nn.Linear(4, 6)), [(2, 4, 3)],
                             {"BATCH_MATMUL_S8"}),
    "position_embedding": (lambda: PosEmbed(), [(1, 8, 16)], {"ADD_S8", "LINEAR_S8", "LAYER_NORM_S8"}),
}


class Masked(nn.Module):
    """scaled_dot_product_attention with a constant mask (a buffer)."""

    def __init__(self, mask: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("mask", mask)

    def forward(self, q, k, v):
        return SDPA(q, k, v, attn_mask=self.mask)


class PosEmbed(nn.Module):
    """Learned position embeddings (a parameter added to the tokens), then a block's first steps."""

    def __init__(self) -> None:
        super().__init__()
        self.pos = nn.Parameter(torch.randn(1, 8, 16) * 0.5)
        self.proj = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        return self.norm(self.proj(x + self.pos))


def _with_rules(*names: str) -> bool:
    from torchmcu.passes.lowering import ALL

    have = {str(t) for t in ALL.rules}
    return all(n in have for n in names)


@pytest.mark.parametrize("name", sorted(CASES))
def test_float_matches_pytorch(name: str, tmp_path: Path, host_runner) -> None:
    torch.manual_seed(sum(map(ord, name)))
    factory, shapes, _ = CASES[name]
    got, expected = run_on_host(factory().eval(), tuple(torch.randn(*s) for s in shapes), tmp_path)
    assert_close(got, expected)


def _integer(model: nn.Module, shapes, quant: str, out: Path, codes: set[str] | None, host_runner,
             data=None) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    """Compile at `quant`, no float fallback; the host bit for bit with the
    reference. Returns (outputs, samples)."""
    data = data or calib(shapes)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = compile(model, tuple(torch.from_numpy(x) for x in data[0]), "mps3-an547", out, quant=quant,
                    calibration=data, progress=False, tile=False)
    used = {op.code for op in c.graph.ops}
    assert not any(code.endswith("_F32") for code in used), used
    if codes is not None:
        assert codes <= used, used
    samples = [list(s) for s in data[:3]]
    res = runner.run(out, [np.stack([s[i] for s in samples]) for i in range(len(shapes))], sim="host")
    assert res.exit_code == 0, res.raw[-1500:]
    expected, tol = runner.expected(out, samples)
    assert tol is None and runner.compare(res.outputs, expected, None)[0] is None
    return res.outputs, samples


def _sqnr(model: nn.Module, outputs: list[np.ndarray], samples: list[list[np.ndarray]]) -> float:
    with torch.no_grad():
        refs = [model(*(torch.from_numpy(x) for x in s)) for s in samples]
    ref = np.stack([(r[0] if isinstance(r, tuple) else r).numpy() for r in refs])
    got = outputs[0].reshape(ref.shape)
    return float(10 * np.log10((ref ** 2).sum() / max(((got - ref) ** 2).sum(), 1e-30)))


@pytest.mark.parametrize("quant", ["int8", "a16w8"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_integer_bit_exact_without_float(name: str, quant: str, tmp_path: Path, host_runner) -> None:
    torch.manual_seed(sum(map(ord, name)))
    factory, shapes, codes = CASES[name]
    model = factory().eval()
    if quant == "a16w8":
        codes = {c.replace("_S8", "_S16") for c in codes}
    outputs, samples = _integer(model, shapes, quant, tmp_path, codes, host_runner)
    sqnr = _sqnr(model, outputs, samples)
    assert sqnr > (20 if quant == "int8" else 35), sqnr  # a16w8 keeps int8 weights: ~40 dB, not 60


def test_attention_products_bit_exact_with_tflite_micro(tmp_path: Path) -> None:
    """BATCH_MATMUL (b transposed, broadcast batch dims, a constant operand),
    SOFTMAX with TFLite's beta and MEAN, each alone in TFLM's interpreter."""
    pytest.importorskip("tflite_micro", reason="the tflite-micro wheel (TFLM's Python interpreter) is not installed")
    from torchmcu.export.tflite import export_op, run_tflite_micro, trace, verify_derived

    checked = set()
    for quant in ("int8", "a16w8"):
        for name in ("mha_cross_seq_first_weights", "sdpa_heads", "matmul_broadcast_batch", "matmul_constant_3d",
                     "matmul_constant_left"):
            factory, shapes, _ = CASES[name]
            torch.manual_seed(sum(map(ord, name)))
            out = tmp_path / f"{name}_{quant}"
            c = compile(factory().eval(), tuple(torch.randn(*s) for s in shapes), "mps3-an547", out, quant=quant,
                        calibration=calib(shapes), progress=False, tile=False)
            assert verify_derived(c.pte) == []
            prog = schema.decode(c.pte)
            sample = list(calib(shapes, n=1, seed=4)[0])
            steps = trace(c.pte, sample)
            for i, op in enumerate(prog["ops"]):
                if op["code"] not in ("BATCH_MATMUL_S8", "BATCH_MATMUL_S16", "SOFTMAX_S8", "MEAN_S8", "MEAN_S16"):
                    continue
                tflite, values = export_op(c.pte, i, sample, steps)
                got = run_tflite_micro(tflite, values)[0]
                want = steps[i][1]
                assert np.array_equal(got.reshape(want.shape), want), f"{name} op {i} {op['code']}"
                checked.add((op["code"], bool(op["params"][1].get("adj_y", False))))
    assert {("BATCH_MATMUL_S8", True), ("BATCH_MATMUL_S8", False), ("BATCH_MATMUL_S16", True),
            ("SOFTMAX_S8", False), ("MEAN_S8", False)} <= checked, checked


def test_attention_refusals_are_clear(tmp_path: Path) -> None:
    # (a float mask computed from the inputs is added to the scores: compiled, tests/test_ops_more.py has more)
    compile(Fn(lambda m, q, k, v: SDPA(q, k, v, attn_mask=q @ k.transpose(-1, -2))).eval(),
            tuple(torch.randn(1, 4, 8) for _ in range(3)), "mps3-an547", tmp_path / "computed", tile=False)
    cases = [
        (Fn(lambda m, q, k, v: SDPA(q, k, v, enable_gqa=True)), [(1, 4, 3, 8), (1, 2, 3, 8), (1, 2, 3, 8)],
         "grouped-query"),
    ]
    for model, shapes, words in cases:
        with pytest.raises(CompileError) as e:
            compile(model.eval(), tuple(torch.randn(*s) for s in shapes), "mps3-an547", tmp_path / "refused",
                    tile=False)
        assert words in str(e.value), str(e.value)


# ------------------------------------------------------------------ models we did not write

ENCODER_VIEWS = ("aten.unflatten.int", "aten.select.int")


@pytest.mark.skipif(not _with_rules(*ENCODER_VIEWS), reason="needs the view ops (select, unflatten) of the "
                    "capture branch: MultiheadAttention's packed self-attention projection")
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("quant", ["float32", "int8", "a16w8"])
def test_transformer_encoder_layer(norm_first: bool, quant: str, tmp_path: Path, host_runner) -> None:
    """nn.TransformerEncoderLayer: d_model 64, 4 heads, sequence 32."""
    torch.manual_seed(0)
    model = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True, norm_first=norm_first).eval()
    shapes = [(1, 32, 64)]
    if quant == "float32":
        got, expected = run_on_host(model, (torch.randn(*shapes[0]),), tmp_path)
        assert_close(got, expected)
        return
    outputs, samples = _integer(model, shapes, quant, tmp_path, {"LAYER_NORM_S8" if quant == "int8" else
                                                                 "LAYER_NORM_S16"}, host_runner)
    assert _sqnr(model, outputs, samples) > (18 if quant == "int8" else 40)


@pytest.mark.skipif(not _with_rules(*ENCODER_VIEWS, "aten.expand.default"),
                    reason="needs the view ops (select, unflatten, expand) of the capture branch")
@pytest.mark.parametrize("patches", ["linear", "conv"])
def test_keyword_transformer_vit(patches: str, tmp_path: Path, host_runner) -> None:
    torch.manual_seed(2)
    model = TinyViT(patches).eval()
    shapes = [(1, 16, 16)]
    got, expected = run_on_host(model, (torch.randn(*shapes[0]),), tmp_path / "f32")
    assert_close(got, expected)
    for quant, floor in (("int8", 15), ("a16w8", 30)):
        outputs, samples = _integer(model, shapes, quant, tmp_path / quant, None, host_runner)
        assert _sqnr(model, outputs, samples) > floor


def test_conformer_feed_forward_module(tmp_path: Path, host_runner) -> None:
    """torchaudio's Conformer feed-forward module (LayerNorm, Linear, SiLU,
    Linear) at float32, int8 and a16w8."""
    from torchmcu.frontend.compat import import_torchaudio

    import_torchaudio()
    from torchaudio.models.conformer import _FeedForwardModule

    torch.manual_seed(0)
    model = _FeedForwardModule(80, 128).eval()
    shapes = [(1, 16, 80)]
    got, expected = run_on_host(model, (torch.randn(*shapes[0]),), tmp_path / "f32")
    assert_close(got, expected)
    for quant, floor in (("int8", 20), ("a16w8", 35)):
        outputs, samples = _integer(model, shapes, quant, tmp_path / quant, None, host_runner)
        assert _sqnr(model, outputs, samples) > floor


@pytest.mark.skipif(not _with_rules(*ENCODER_VIEWS), reason="needs the view ops of the capture branch")
def test_conformer_attention_part(tmp_path: Path, host_runner) -> None:
    """torchaudio's ConformerLayer self-attention path (LayerNorm, nn.MultiheadAttention, residual)."""
    from torchmcu.frontend.compat import import_torchaudio

    import_torchaudio()
    from torchaudio.models.conformer import ConformerLayer

    torch.manual_seed(0)
    layer = ConformerLayer(80, 128, 4, 31).eval()

    class SelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm, self.attn = layer.self_attn_layer_norm, layer.self_attn

        def forward(self, x):  # [T, B, D] as the layer keeps it
            y = self.norm(x)
            y, _ = self.attn(y, y, y, need_weights=False)
            return x + y

    model = SelfAttention().eval()
    outputs, samples = _integer(model, [(16, 1, 80)], "int8", tmp_path, {"LAYER_NORM_S8", "SOFTMAX_S8"}, host_runner)
    assert _sqnr(model, outputs, samples) > 18


# ------------------------------------------------------------------ on the Cortex-M55

@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("kernels", ["portable", "cmsis-nn"])
def test_attention_block_bit_exact_in_qemu(kernels: str, tmp_path: Path) -> None:
    if kernels == "cmsis-nn" and not os.environ.get("TORCHMCU_CMSIS_NN_DIR"):
        pytest.skip("TORCHMCU_CMSIS_NN_DIR is not set (a CMSIS-NN checkout)")
    from torchmcu.builder.firmware import build_firmware

    torch.manual_seed(1)
    model = nn.Sequential(nn.LayerNorm(16), _Attend(), nn.GELU()).eval()
    shapes = [(1, 8, 16)]
    for quant in ("int8", "a16w8"):
        out = tmp_path / quant
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(model, (torch.randn(*shapes[0]),), "mps3-an547", out, quant=quant, calibration=calib(shapes),
                    progress=False, tile=False)
        build_firmware(out, kernels=kernels)
        samples = [list(s) for s in calib(shapes, n=2, seed=5)]
        res = runner.run(out, [np.stack([s[0] for s in samples])], sim="qemu")
        assert res.exit_code == 0, res.raw[-1500:]
        expected, _ = runner.expected(out, samples)
        assert runner.compare(res.outputs, expected, None)[0] is None, quant


class _Attend(nn.Module):
    """Self-attention without the packed projection: q, k, v linears, SDPA, out linear."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(16, 16) for _ in range(4))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (f(x).view(b, t, 2, 8).transpose(1, 2) for f in (self.q, self.k, self.v))
        return self.o(SDPA(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d))


# ------------------------------------------------------------------ load-time checks

INVALID_TENSOR, INVALID_OP = 0x23, 0x24  # firmware/core/error.h


def test_corrupted_programs_are_refused_at_load(tmp_path: Path, host_runner) -> None:
    """The new kernels' load-time checks (layer norm, masked softmax, batched
    products, PReLU, GLU, the float activations): a bad parameter or operand
    makes Method::load fail with its error, with no sanitizer report."""
    import copy
    import subprocess

    from torchmcu.program import serialize

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm, self.glu, self.act = nn.LayerNorm(8), nn.Linear(8, 16), nn.PReLU(4)
            self.register_buffer("mask", _keep(4, 4))

        def forward(self, x):
            h = self.act(F.glu(self.glu(self.norm(x)), -1))
            return SDPA(h, h, F.silu(h), attn_mask=self.mask)

    shapes = [(1, 4, 8)]
    progs = {}
    for quant in ("float32", "int8"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c = compile(Block().eval(), (torch.randn(*shapes[0]),), "mps3-an547", tmp_path / quant, quant=quant,
                        calibration=calib(shapes), progress=False, tile=False)
        progs[quant] = (schema.decode(c.pte), c.pte)

    def first(t, code):
        return next(op for op in t["ops"] if op["code"] == code)

    def params(code, **kw):
        return lambda t: first(t, code)["params"][1].update(kw)

    def tensor(code, k, **kw):
        return lambda t: t["tensors"][first(t, code)["inputs"][k]].update(kw)

    def has(quant, code):
        return any(op["code"] == code for op in progs[quant][0]["ops"])

    cases = [
        ("int8", "LAYER_NORM_S8", "negative eps", params("LAYER_NORM_S8", eps_hi=-1), INVALID_OP),
        ("int8", "LAYER_NORM_S8", "short gamma", tensor("LAYER_NORM_S8", 1, dims=[4], nbytes=4), INVALID_OP),
        ("int8", "LAYER_NORM_S8", "output zero point 300", params("LAYER_NORM_S8", output_zero_point=300),
         INVALID_OP),
        ("int8", "SOFTMAX_MASKED_S8", "mask rows 3 of 4", tensor("SOFTMAX_MASKED_S8", 1, dims=[3, 4], nbytes=12),
         INVALID_OP),
        ("int8", "SOFTMAX_MASKED_S8", "exp table of 255", tensor("SOFTMAX_MASKED_S8", 2, dims=[255], nbytes=1020),
         INVALID_OP),
        ("int8", "BATCH_MATMUL_S8", "not transposed", params("BATCH_MATMUL_S8", adj_y=False), INVALID_OP),
        ("int8", "PRELU_S8", "alpha offset 300", params("PRELU_S8", alpha_offset=300), INVALID_OP),
        ("int8", "GLU_S8", "axis 7", params("GLU_S8", axis=7), INVALID_OP),
        ("float32", "ACTIVATION_F32", "function 9", params("ACTIVATION_F32", fn=9), INVALID_OP),
        ("float32", "LAYER_NORM_F32", "short beta", tensor("LAYER_NORM_F32", 2, dims=[7], nbytes=28), INVALID_OP),
        ("float32", "GLU_F32", "axis -1", params("GLU_F32", axis=-1), INVALID_OP),
    ]
    io = {q: tmp_path / f"io_{q}.bin" for q in progs}
    for q in progs:
        io[q].write_bytes(runner.io_blob([[np.zeros(shapes[0], np.float32)]]))
    checked = 0
    for quant, code, name, edit, status in cases:
        if not has(quant, code):  # (a product whose b is not transposed: adj_y already 0)
            continue
        tree, pte = progs[quant]
        t = copy.deepcopy(tree)
        edit(t)
        path = tmp_path / "v.pte"
        path.write_bytes(serialize.to_pte(t, pte[tree["constant_offset"]:]))
        proc = subprocess.run([str(host_runner), str(path), str(io[quant])], capture_output=True, text=True,
                              check=False, errors="replace", timeout=60)
        assert "runtime error" not in proc.stderr and "AddressSanitizer" not in proc.stderr, proc.stderr[-2000:]
        assert proc.returncode == status, f"{name}: exit {proc.returncode:#x}\n{proc.stdout[-500:]}"
        checked += 1
    assert checked >= 9
