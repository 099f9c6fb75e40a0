"""Every supported op, end to end: compiled by torchmcu, run by the C++
runtime on the host (AddressSanitizer + UBSan), compared with PyTorch.

The tolerance is the one `torchmcu run --check` uses for float programs:
|firmware - torch| <= 1e-5 * max(1, max|torch|) + 1e-5 * |torch|.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import assert_close, run_on_host
from torch import nn


class Fn(nn.Module):
    """A module from a function, for one-op models."""

    def __init__(self, fn, *modules: nn.Module) -> None:
        super().__init__()
        self.fn = fn
        self.mods = nn.ModuleList(modules)

    def forward(self, *xs):
        return self.fn(self.mods, *xs)


def _bn(c: int) -> nn.BatchNorm2d:
    bn = nn.BatchNorm2d(c)
    with torch.no_grad():  # non-trivial statistics, so folding is really tested
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
    return bn


def r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


CASES = {
    # linear
    "linear_1x16_8": (lambda: Fn(lambda m, x: m[0](x), nn.Linear(16, 8)), (1, 16)),
    "linear_batch3_nobias": (lambda: Fn(lambda m, x: m[0](x), nn.Linear(7, 5, bias=False)), (3, 7)),
    "linear_3d_relu": (lambda: Fn(lambda m, x: F.relu(m[0](x)), nn.Linear(6, 4)), (2, 3, 6)),
    # conv2d
    "conv_3x3_pad1": (lambda: Fn(lambda m, x: m[0](x), nn.Conv2d(3, 8, 3, padding=1)), (1, 3, 9, 9)),
    "conv_stride2_relu": (lambda: Fn(lambda m, x: F.relu(m[0](x)), nn.Conv2d(4, 6, 3, stride=2)), (1, 4, 11, 10)),
    "conv_dilation2": (lambda: Fn(lambda m, x: m[0](x), nn.Conv2d(2, 3, 3, dilation=2, padding=2)), (1, 2, 8, 8)),
    "conv_groups2": (lambda: Fn(lambda m, x: m[0](x), nn.Conv2d(4, 6, 3, groups=2, bias=False)), (1, 4, 7, 7)),
    "conv_1x1_batch2": (lambda: Fn(lambda m, x: m[0](x), nn.Conv2d(5, 7, 1)), (2, 5, 4, 6)),
    "conv_1xN_rect": (lambda: Fn(lambda m, x: m[0](x), nn.Conv2d(1, 4, (1, 5), stride=(1, 2), padding=(0, 2))), (1, 1, 6, 20)),
    "conv_same": (lambda: Fn(lambda m, x: m[0](x), nn.Conv2d(3, 4, 5, padding="same")), (1, 3, 8, 8)),
    "depthwise_relu6": (lambda: Fn(lambda m, x: F.relu6(m[0](x)), nn.Conv2d(6, 6, 3, groups=6, padding=1)), (1, 6, 8, 8)),
    "depthwise_mult2_stride2": (lambda: Fn(lambda m, x: m[0](x), nn.Conv2d(3, 6, 3, groups=3, stride=2)), (1, 3, 9, 9)),
    # batch norm, folded into the conv or standing alone
    "conv_bn_relu": (lambda: Fn(lambda m, x: F.relu(m[1](m[0](x))), nn.Conv2d(3, 5, 3), _bn(5)), (1, 3, 8, 8)),
    "bn_alone": (lambda: Fn(lambda m, x: m[0](x), _bn(4)), (1, 4, 5, 5)),
    # activations
    "relu": (lambda: Fn(lambda m, x: F.relu(x)), (2, 3, 4, 5)),
    "relu6": (lambda: Fn(lambda m, x: F.relu6(x * 4)), (1, 40)),
    "hardtanh": (lambda: Fn(lambda m, x: F.hardtanh(x, -0.5, 0.25)), (3, 7)),
    "sigmoid": (lambda: Fn(lambda m, x: torch.sigmoid(x * 8)), (2, 33)),
    "tanh": (lambda: Fn(lambda m, x: torch.tanh(x * 3)), (1, 2, 3, 4)),
    # element-wise with broadcasting
    "add_two_inputs": (lambda: Fn(lambda m, x, y: x + y), (1, 3, 4, 4), (1, 3, 4, 4)),
    "add_channel_bias_nchw": (lambda: Fn(lambda m, x: m[0](x) + torch.arange(4.0).view(1, 4, 1, 1),
                                         nn.Conv2d(2, 4, 1)), (1, 2, 3, 3)),
    "mul_scalar": (lambda: Fn(lambda m, x: x * 2.5 - 1.0), (4, 5)),
    "add_relu_fused": (lambda: Fn(lambda m, x, y: F.relu(x + y)), (2, 8), (2, 8)),
    "mul_broadcast_rows": (lambda: Fn(lambda m, x, y: x * y), (3, 5), (1, 5)),
    # pooling
    "maxpool_2": (lambda: Fn(lambda m, x: F.max_pool2d(x, 2)), (1, 3, 8, 8)),
    "maxpool_3_s2_p1": (lambda: Fn(lambda m, x: F.max_pool2d(x, 3, 2, 1)), (1, 4, 9, 9)),
    "maxpool_ceil": (lambda: Fn(lambda m, x: F.max_pool2d(x, 2, ceil_mode=True)), (1, 2, 7, 7)),
    "avgpool_2": (lambda: Fn(lambda m, x: F.avg_pool2d(x, 2)), (1, 3, 8, 6)),
    "avgpool_pad_noinclude": (lambda: Fn(lambda m, x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)), (1, 2, 9, 9)),
    "avgpool_pad_include": (lambda: Fn(lambda m, x: F.avg_pool2d(x, 3, 1, 1)), (2, 2, 5, 5)),
    "adaptive_avg_1x1": (lambda: Fn(lambda m, x: F.adaptive_avg_pool2d(x, 1)), (1, 6, 5, 7)),
    "adaptive_avg_2x2": (lambda: Fn(lambda m, x: F.adaptive_avg_pool2d(x, (2, 2))), (1, 3, 6, 8)),
    # reductions, softmax
    "mean_spatial": (lambda: Fn(lambda m, x: m[0](x).mean((2, 3)), nn.Conv2d(3, 5, 3)), (1, 3, 7, 7)),
    "mean_keepdim_channels": (lambda: Fn(lambda m, x: m[0](x).mean(1, keepdim=True), nn.Conv2d(3, 5, 1)), (1, 3, 4, 4)),
    "mean_last": (lambda: Fn(lambda m, x: x.mean(-1)), (2, 3, 9)),
    "softmax_last": (lambda: Fn(lambda m, x: torch.softmax(x * 4, -1)), (3, 10)),
    "softmax_channels_nhwc": (lambda: Fn(lambda m, x: torch.softmax(m[0](x), 1), nn.Conv2d(2, 4, 1)), (1, 2, 3, 3)),
    # data movement
    "flatten_after_conv": (lambda: Fn(lambda m, x: m[1](torch.flatten(F.relu(m[0](x)), 1)),
                                      nn.Conv2d(2, 3, 3), nn.Linear(3 * 4 * 4, 5)), (1, 2, 6, 6)),
    "view_reshape": (lambda: Fn(lambda m, x: x.view(2, 12).reshape(4, 6)), (2, 3, 4)),
    "permute_3d": (lambda: Fn(lambda m, x: torch.sigmoid(x.permute(2, 0, 1))), (2, 3, 4)),
    "transpose_then_linear": (lambda: Fn(lambda m, x: m[0](x.transpose(1, 2)), nn.Linear(3, 2)), (1, 3, 5)),
    "permute_nchw_to_nhwc_output": (lambda: Fn(lambda m, x: m[0](x).permute(0, 2, 3, 1), nn.Conv2d(2, 3, 1)), (1, 2, 3, 4)),
    "cat_channels": (lambda: Fn(lambda m, x: torch.cat([m[0](x), m[1](x)], 1), nn.Conv2d(2, 3, 1), nn.Conv2d(2, 4, 3, padding=1)), (1, 2, 5, 5)),
    "cat_last_three": (lambda: Fn(lambda m, x, y: torch.cat([x, y, x * 2], -1)), (2, 3), (2, 4)),
    "squeeze_unsqueeze": (lambda: Fn(lambda m, x: torch.tanh(x.unsqueeze(0)).squeeze(0)), (3, 4)),
    "identity_output": (lambda: Fn(lambda m, x: (x, F.relu(x))), (2, 3)),
    # constant padding (F.pad): NCHW H/W (NHWC dims 1/2 after a conv), last dim, any value
    "pad_hw_after_conv": (lambda: Fn(lambda m, x: F.pad(m[0](x), (1, 2, 0, 3), value=0.5), nn.Conv2d(2, 3, 1)),
                          (1, 2, 4, 5)),
    "pad_nchw_input_then_conv": (lambda: Fn(lambda m, x: m[0](F.pad(x, (2, 2, 1, 1))), nn.Conv2d(3, 4, 3)),
                                 (2, 3, 5, 5)),
    "pad_last_2d": (lambda: Fn(lambda m, x: F.pad(x, (3, 1), value=-2.0)), (3, 7)),
    "pad_last_two_3d": (lambda: Fn(lambda m, x: F.pad(x * 2, (0, 2, 1, 0))), (2, 3, 4)),
    "pad_channels_nchw": (lambda: Fn(lambda m, x: torch.constant_pad_nd(m[0](x), (0, 0, 0, 0, 1, 2), 1.5),
                                     nn.Conv2d(2, 3, 1)), (1, 2, 3, 3)),
    # maximum / minimum with broadcasting
    "maximum_two_inputs": (lambda: Fn(lambda m, x, y: torch.maximum(x, y)), (2, 3, 4, 5), (2, 3, 4, 5)),
    "minimum_broadcast": (lambda: Fn(lambda m, x, y: torch.minimum(x, y)), (3, 5), (1, 5)),
    "maximum_const_nhwc": (lambda: Fn(lambda m, x: torch.maximum(m[0](x), torch.tensor([0.1, -0.2, 0.3]).view(1, 3, 1, 1)),
                                      nn.Conv2d(2, 3, 1)), (1, 2, 4, 4)),
    "minimum_after_convs": (lambda: Fn(lambda m, x: torch.minimum(m[0](x), m[1](x)), nn.Conv2d(2, 4, 1),
                                       nn.Conv2d(2, 4, 3, padding=1)), (1, 2, 5, 5)),
    # hardswish
    "hardswish": (lambda: Fn(lambda m, x: F.hardswish(x * 4)), (2, 50)),
    "hardswish_after_conv": (lambda: Fn(lambda m, x: F.hardswish(m[0](x)), nn.Conv2d(3, 6, 3)), (1, 3, 6, 6)),
    # batched matmul of activations, matmul by a parameter (a linear layer)
    "bmm_3d": (lambda: Fn(lambda m, x, y: torch.bmm(x, y)), (2, 3, 5), (2, 5, 4)),
    "matmul_2d": (lambda: Fn(lambda m, x, y: torch.matmul(x, y)), (4, 6), (6, 3)),
    "matmul_4d_transposed": (lambda: Fn(lambda m, x, y: x @ y.transpose(-1, -2)), (2, 2, 3, 4), (2, 2, 5, 4)),
    "matmul_attention_like": (lambda: Fn(lambda m, x: torch.softmax(m[0](x) @ m[1](x).transpose(1, 2), -1) @ x,
                                         nn.Linear(4, 4), nn.Linear(4, 4)), (2, 3, 4)),
    "matmul_parameter": (lambda: Fn(lambda m, x: x @ m[0].weight, nn.Linear(3, 5, bias=False)), (2, 4, 5)),
    # NCHW input with one channel: no permute needed before the conv
    "one_channel_input": (lambda: Fn(lambda m, x: m[0](x), nn.Conv2d(1, 4, 3)), (1, 1, 6, 6)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_pytorch(name: str, tmp_path, host_runner) -> None:
    torch.manual_seed(hash(name) % 1000)
    factory, *shapes = CASES[name]
    model = factory().eval()
    inputs = tuple(r(*s) for s in shapes)
    got, expected = run_on_host(model, inputs, tmp_path)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
    assert_close(got, expected)


def test_one_channel_input_needs_no_permute(tmp_path) -> None:
    import json

    from torchmcu.compiler import compile

    compile(Fn(lambda m, x: m[0](x), nn.Conv2d(1, 4, 3)).eval(), (r(1, 1, 6, 6),), "mps3-an547", tmp_path)
    kinds = [op["kind"] for op in json.loads((tmp_path / "report.json").read_text())["ops"]]
    assert kinds == ["conv2d", "permute"]  # the output goes back to NCHW; the input needs nothing


def test_batch_norm_folds_and_relu_fuses(tmp_path) -> None:
    import json

    from torchmcu.compiler import compile

    model = Fn(lambda m, x: F.relu(m[1](m[0](x))), nn.Conv2d(3, 5, 3), _bn(5)).eval()
    compile(model, (r(1, 3, 8, 8),), "mps3-an547", tmp_path)
    report = json.loads((tmp_path / "report.json").read_text())
    assert [op["kind"] for op in report["ops"]] == ["permute", "conv2d", "permute"]  # no bn, no relu
    assert all(op["backend"] == "portable" for op in report["ops"])
    assert report["memory"]["regions"][0]["ratio"] == 1.0


def test_batch_of_samples_gives_one_output_per_sample(tmp_path) -> None:
    from torchmcu.compiler import compile
    from torchmcu.sim import runner

    model = nn.Sequential(nn.Linear(4, 3), nn.Softmax(-1)).eval()
    compile(model, (r(1, 4),), "mps3-an547", tmp_path)
    xs = np.random.RandomState(1).randn(5, 1, 4).astype(np.float32)
    res = runner.run(tmp_path, [xs], sim="host")
    assert res.exit_code == 0
    with torch.no_grad():
        ref = model(torch.from_numpy(xs)).numpy()
    assert res.outputs[0].shape == (5, 1, 3)
    np.testing.assert_allclose(res.outputs[0], ref, rtol=1e-5, atol=1e-6)
