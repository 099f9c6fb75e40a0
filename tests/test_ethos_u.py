"""The Ethos-U backend's ahead-of-time half (torchmcu.backends.ethos_u): partitioning,
TOSA lowering checked bit for bit by tosa_reference_model against the
project's reference, Vela's command streams and estimates, the delegate
blob, and CPU fallbacks with their reasons.

Needs the tosa-tools and ethos-u-vela packages (make setup installs them);
skips without them.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from conftest import REPO

ethos_u = pytest.importorskip("torchmcu.backends.ethos_u")
pytestmark = pytest.mark.skipif(not ethos_u.available(),
                                reason="needs the tosa-tools and ethos-u-vela packages (make setup installs them)")

from torchmcu import boards as B
from torchmcu import reference as ref
from torchmcu.backends.ethos_u import blob, numerics, tosa_lower, vela
from torchmcu.ir import PGraph, POp, PTensor

MODELS = ["ds_cnn", "mobilenet_v1", "mobilenet_v2"]
CPU_ONLY = {"QUANTIZE_S8", "SOFTMAX_S8", "DEQUANTIZE_S8"}  # float edges and int8 softmax
BOARD = "corstone-300-u55-128"


# ---------------------------------------------------------------------------------------------
# The three models' program graphs (int8, before planning), with calibration samples

def _program_graph(name: str) -> tuple[PGraph, list[list[np.ndarray]]]:
    sys.path.insert(0, str(REPO / "examples"))
    try:
        import mlperf_tiny as mt
    finally:
        sys.path.remove(str(REPO / "examples"))
    from torchmcu.frontend.capture import capture
    from torchmcu.frontend.quantize import quantize
    from torchmcu.passes import lower, to_program_graph

    model, example = getattr(mt, f"make_{name}")()
    q = quantize(model, example, None, progress=False)
    # TFLite's rounding of average pools: TOSA's RESCALE has no half-to-even (PyTorch's pools stay on the CPU).
    pg = to_program_graph(lower(capture(q, example), "float"), avg_pool_rounding="tflite")
    samples = [[x[None]] for x in getattr(mt, f"calibration_{name}")(3, seed=7)]
    return pg, samples


@pytest.fixture(scope="module")
def graphs() -> dict[str, tuple[PGraph, list[list[np.ndarray]]]]:
    return {name: _program_graph(name) for name in MODELS}


@pytest.mark.parametrize("name", MODELS)
def test_every_conv_of_the_model_runs_on_the_npu_bit_exact(graphs, name: str) -> None:
    pg, samples = graphs[name]
    result = ethos_u.compile_partitions(pg, BOARD, samples=samples)
    r = ethos_u.report(result)
    json.dumps(r)  # report.json material
    # Everything but the float edges and the softmax is on the NPU, in one partition.
    assert {pg.ops[i].code for i in result.cpu_ops} <= CPU_ONLY, result.cpu_ops
    convs = [i for i, op in enumerate(pg.ops) if op.code in ("CONV2D_S8", "DEPTHWISE_CONV2D_S8", "LINEAR_S8")]
    assert len(convs) >= 10
    assert len(result.partitions) == 1
    part = result.partitions[0]
    assert set(convs) <= set(part.ops)
    # Each op's TOSA form and the partition's graph equal the reference on every sample.
    assert part.numerics == {"samples": len(samples), "ops_checked": len(part.ops),
                             "elements_compared": part.numerics["elements_compared"], "bit_exact": True,
                             "checked_by": "tosa_reference_model"}
    assert part.numerics["elements_compared"] > 100_000
    # Vela's figures.
    e = part.estimates
    macs = sum(pg.ops[i].macs for i in convs)
    assert e["npu_ops"] > 0 and e["cpu_ops"] == 0
    assert 0.9 * macs <= e["macs"] <= 1.1 * macs + 100_000  # Vela counts the pooling's too
    assert e["total_cycles"] >= e["npu_cycles"] > 0 and 0 < e["mac_utilisation"] <= 1
    assert e["memories"]["Sram"]["peak_bytes"] == part.scratch_bytes > 0
    assert e["memories"]["OffChipFlash"]["read_bytes"] > 0
    # The schedule: quantize, the NPU call, then softmax and dequantize.
    assert result.schedule[0] == ("op", 0) and result.schedule[1] == ("npu", 0)
    assert r["npu_ops"] == len(part.ops) and r["cpu_ops"] == len(pg.ops) - len(part.ops)


@pytest.mark.parametrize("board", ["corstone-310-u55-256", "corstone-320-u85-256"])
def test_other_accelerators(graphs, board: str) -> None:
    pg, samples = graphs["ds_cnn"]
    result = ethos_u.compile_partitions(pg, board, samples=samples[:1])
    part, = result.partitions
    b = blob.Blob.unpack(part.blob)
    assert b.macs == 256 and b.accelerator == {"corstone-310-u55-256": "EthosU55",
                                               "corstone-320-u85-256": "EthosU85"}[board]
    assert part.estimates["accelerator"] == B.load_board(board).npu.accelerator
    assert part.numerics["bit_exact"]


def test_the_numerics_check_catches_a_wrong_lowering(graphs, monkeypatch) -> None:
    """Halving the average pool's divisor makes its TOSA form wrong: the check
    must send that op (only) back to the CPU and partition around it."""
    pg, samples = graphs["ds_cnn"]
    real = tosa_lower.avg_pool_rescale
    monkeypatch.setattr(tosa_lower, "avg_pool_rescale", lambda count: (real(count)[0] // 2, real(count)[1]))
    result = ethos_u.compile_partitions(pg, BOARD, samples=samples[:1])
    pool = next(i for i, op in enumerate(pg.ops) if op.code == "AVG_POOL2D_S8")
    assert "TOSA differs from the torchmcu reference on sample 0" in result.cpu_ops[pool]
    assert [p.ops for p in result.partitions] == [list(range(1, pool)), [pool + 1]]
    assert result.schedule == [("op", 0), ("npu", 0), ("op", pool), ("npu", 1), ("op", pool + 2), ("op", pool + 3)]


# ---------------------------------------------------------------------------------------------
# The arithmetic behind the lowering

def _tosa_rescale(values: np.ndarray, multiplier, shift, double_round: bool) -> np.ndarray:
    """TOSA 1.0's apply_scale_32, from the specification's pseudo-code."""
    v = np.asarray(values, np.int64)
    m, s = np.asarray(multiplier, np.int64), np.asarray(shift, np.int64)
    rnd = np.int64(1) << (s - 1)
    if double_round:
        rnd = np.where(s > 31, np.where(v >= 0, rnd + (1 << 30), rnd - (1 << 30)), rnd)
    return (v * m + rnd) >> s


def test_avg_pool_rescale_divides_exactly_for_every_sum() -> None:
    for count in [*range(1, 257), 400, 1000, 4096, 65536]:
        m, shift = tosa_lower.avg_pool_rescale(count)
        assert 0 < m < 1 << 31 and 32 <= shift <= 62
        s = np.arange(-128 * count, 127 * count + 1, dtype=np.int64)
        half = count // 2
        num = np.where(s > 0, s + half, s - half)
        want = np.sign(num) * (np.abs(num) // count)  # reference.avg_pool2d's C division
        got = _tosa_rescale(s * tosa_lower.AVG_POOL_WEIGHT, m, shift, True)
        assert np.array_equal(got, want), count


def _rescale_graph(multiplier: np.ndarray, shift: np.ndarray, shape: list[int]) -> bytes:
    ts = tosa_lower.tosa_serializer()
    ser = ts.TosaSerializer("", ts.ConstMode.EMBED, 1, 0, 0, False)
    x = ser.addPlaceholder(shape, ts.DType.INT32)
    ins = [x, ser.addConst([len(multiplier)], ts.DType.INT32, multiplier.astype(np.int32), "m"),
           ser.addConst([len(shift)], ts.DType.INT8, (31 - shift).astype(np.int8), "s"),
           ser.addConst([1], ts.DType.INT32, np.zeros(1, np.int32), "izp"),
           ser.addConst([1], ts.DType.INT32, np.zeros(1, np.int32), "ozp")]
    y = ser.addIntermediate(shape, ts.DType.INT32)
    attr = ts.TosaSerializerAttribute()
    attr.RescaleAttribute(True, ts.RoundingMode.DOUBLE_ROUND, True, False, False)
    ser.addOperator(ts.Op.RESCALE, [t.name for t in ins], [y.name], attr)
    ser.addOutputTensor(y)
    return bytes(ser.serialize())


def test_tosa_rescale_double_round_is_cmsis_requantize() -> None:
    """The bit-exactness question, asked of tosa_reference_model itself: per
    channel RESCALE (DOUBLE_ROUND, shift 31 - s) against arm_nn_requantize
    (reference.requantize) over right shifts -31..0, with ties forced."""
    rng = np.random.default_rng(3)
    shift = np.arange(-31, 1, dtype=np.int64)  # 32 channels, every right shift
    mult = rng.integers(1 << 30, 1 << 31, shift.size, dtype=np.int64)
    x = rng.integers(-(1 << 31), 1 << 31, (64, shift.size), dtype=np.int64)
    x[:8] = rng.integers(-300, 300, (8, shift.size))  # small values: the rounding decides
    x[8:16, :] = -(1 << 31)
    # With shift 0 (TOSA shift 31) TOSA requires |x| < 2^30; the reference
    # model flags larger values as unpredictable (and the backend's numerics
    # check would then keep such an op on the CPU).
    x[:, -1] = np.clip(x[:, -1], -(1 << 30), (1 << 30) - 1)
    got, = numerics.run_tosa(_rescale_graph(mult, shift, list(x.shape)), [x.astype(np.int32)])
    want = ref.requantize(x, mult, shift)
    assert np.array_equal(np.asarray(got, np.int64).reshape(x.shape), want)
    # Exact ties of the second rounding, both signs: (x * m + 2^30) >> 31 = +-(2k + 1) * 2^(r - 1).
    m = np.full(8, 1 << 30, np.int64)  # 0.5 in Q31: hi = round(x / 2)
    s = np.array([-1, -2, -3, -4, -1, -2, -3, -4], np.int64)
    ties = np.array([[6, 12, 24, 48, -6, -12, -24, -48]], np.int64)  # hi = +-3 * 2^(r-1)
    got, = numerics.run_tosa(_rescale_graph(m, s, [1, 8]), [ties.astype(np.int32)])
    assert np.array_equal(np.asarray(got, np.int64).reshape(1, 8), ref.requantize(ties, m, s))
    assert list(ref.requantize(ties, m, s)[0]) == [2, 2, 2, 2, -2, -2, -2, -2]  # half away from zero


# ---------------------------------------------------------------------------------------------
# Small hand-made program graphs

def _graph(ops: list[tuple[str, list[int], list[int], dict | None]], tensors: list[PTensor],
           inputs: list[int], outputs: list[int]) -> PGraph:
    pg = PGraph(tensors=tensors, inputs=inputs, outputs=outputs)
    for t in tensors:
        if t.const is None:
            t.buffer = len(pg.buffers)
            pg.buffers.append(t.nbytes)
    for code, ins, outs, params in ops:
        pg.ops.append(POp(code, ins, outs, (code, params) if params is not None else None, f"{code.lower()}_{len(pg.ops)}",
                          None, code.lower()))
    return pg


def _act(name: str, dims: tuple[int, ...], zp: int = 0) -> PTensor:
    return PTensor(name, dims, "I8", scale=0.05, zero_point=zp)


def _const(name: str, data: np.ndarray, dtype: str) -> PTensor:
    return PTensor(name, tuple(data.shape), dtype, const=data)


def _linear(rng, ic: int, oc: int) -> list[PTensor]:
    w = rng.integers(-127, 128, (oc, ic)).astype(np.int8)
    mult, shift = ref.conv_requant(0.05, np.full(oc, 0.002), 0.05)
    bias = ref.fold_linear_bias(rng.integers(-500, 500, oc), w, 3)
    return [_const("w", w, "I8"), _const("b", bias, "I32"), _const("m", mult, "I32"), _const("s", shift, "I32")]


def test_a_vela_failure_names_the_op_and_falls_back() -> None:
    """A fully connected layer with 70,000 inputs: TOSA has it, Vela's NPU
    does not (channels above 65,536). It stays on the CPU with Vela's reason;
    the clamp after it still goes to the NPU."""
    rng = np.random.default_rng(0)
    ic = 70_000
    t = [_act("x", (1, ic), -3), *_linear(rng, ic, 2), _act("y", (1, 2)), _act("z", (1, 2))]
    params = {"input_offset": 3, "output_offset": 0, "act_min": -128, "act_max": 127}
    pg = _graph([("LINEAR_S8", [0, 1, 2, 3, 4], [5], params), ("CLAMP_S8", [5], [6], {"min": -20, "max": 20})],
                t, [0], [6])
    x = rng.integers(-128, 128, (1, ic)).astype(np.int8)
    result = ethos_u.compile_partitions(pg, BOARD, samples=[[x]])
    assert result.cpu_ops == {0: "Vela: Non-passthrough operation (Conv2D) could not run on NPU"}
    assert [p.ops for p in result.partitions] == [[1]]
    assert result.partitions[0].numerics["bit_exact"]
    text = ethos_u.format_report(ethos_u.report(result))
    assert "cpu  #0   linear_s8_0 (LINEAR_S8): Vela: Non-passthrough operation (Conv2D)" in text


def test_an_op_without_exact_tosa_form_falls_back() -> None:
    """A padded average pool divides by fewer taps at the borders: no single
    RESCALE does that, so it stays on the CPU and says why."""
    t = [_act("x", (1, 4, 4, 8)), _act("y", (1, 4, 4, 8))]
    params = {"kernel_h": 3, "kernel_w": 3, "stride_h": 1, "stride_w": 1, "pad_top": 1, "pad_left": 1,
              "act_min": -128, "act_max": 127}
    pg = _graph([("AVG_POOL2D_S8", [0], [1], params)], t, [0], [1])
    result = ethos_u.compile_partitions(pg, BOARD)
    assert result.partitions == []
    assert "padded average pool" in result.cpu_ops[0]


def test_pools_and_residual_adds_bit_exact() -> None:
    """Max pool with padding, an unpadded average pool with a cropped tail
    whose window sums are exact ties of both signs, and the TFLite-style add:
    each against the reference through tosa_reference_model."""
    rng = np.random.default_rng(1)
    t = [_act("x", (1, 9, 9, 8)), _act("mp", (1, 5, 5, 8)), _act("ap", (1, 4, 4, 8)), _act("c", (1, 5, 5, 8)),
         _act("sum", (1, 5, 5, 8))]
    mp = {"kernel_h": 3, "kernel_w": 3, "stride_h": 2, "stride_w": 2, "pad_top": 1, "pad_left": 1,
          "act_min": -100, "act_max": 127}
    ap = {"kernel_h": 2, "kernel_w": 2, "stride_h": 2, "stride_w": 2, "pad_top": 0, "pad_left": 0,
          "act_min": -128, "act_max": 127}
    add = {k: int(v) for k, v in ref.add_params(0.05, 0, 0.07, 3, 0.09, -2, -128, 127).items()}
    pg = _graph([("MAX_POOL2D_S8", [0], [1], mp), ("AVG_POOL2D_S8", [0], [2], ap),
                 ("CLAMP_S8", [1], [3], {"min": -50, "max": 60}), ("ADD_S8", [1, 3], [4], add)],
                t, [0], [2, 4])
    x = rng.integers(-128, 128, (1, 9, 9, 8)).astype(np.int8)
    ties = np.zeros((1, 9, 9, 8), np.int8)
    ties[0, :8, :8, :4] = np.tile(np.array([[-1, -2], [-1, -2]], np.int8), (4, 4))[:, :, None]  # sums -6: -1.5
    ties[0, :8, :8, 4:] = np.tile(np.array([[1, 2], [1, 2]], np.int8), (4, 4))[:, :, None]  # sums 6: 1.5
    pooled = ref.avg_pool2d(ties, (2, 2), (2, 2))
    assert set(np.unique(pooled)) == {-2, 2}  # half away from zero, both signs
    result = ethos_u.compile_partitions(pg, BOARD, samples=[[x], [ties]])
    part, = result.partitions
    assert part.ops == [0, 1, 2, 3] and part.numerics["bit_exact"] and result.cpu_ops == {}
    assert part.tosa_ops["MAX_POOL2D"] == 1 and part.tosa_ops["ADD"] == 1 and part.tosa_ops["SLICE"] == 1


# ---------------------------------------------------------------------------------------------
# Partitions, the blob, boards

def test_partitions_stay_convex() -> None:
    """NPU clamp -> CPU mul -> NPU add reading the clamp too: merging the two
    NPU ops would run the mul inside the command stream, so they stay apart,
    and the schedule interleaves them."""
    t = [_act("x", (1, 4, 4, 8)), _act("c", (1, 4, 4, 8)), _act("m", (1, 4, 4, 8)), _act("y", (1, 4, 4, 8))]
    mul = {k: int(v) for k, v in ref.mul_params(0.05, 0, 0.05, 0, 0.05, 0).items()}
    add = {k: int(v) for k, v in ref.add_params(0.05, 0, 0.05, 0, 0.05, 0).items()}
    pg = _graph([("CLAMP_S8", [0], [1], {"min": -10, "max": 10}), ("MUL_S8", [1, 1], [2], mul),
                 ("ADD_S8", [1, 2], [3], add)], t, [0], [3])
    result = ethos_u.compile_partitions(pg, BOARD)
    assert [p.ops for p in result.partitions] == [[0], [2]]
    assert result.partitions[0].outputs == [1] and result.partitions[1].inputs == [1, 2]
    assert result.schedule == [("npu", 0), ("op", 1), ("npu", 1)]


def test_blob_layout() -> None:
    io = [vela.IoTensor(3, 0, 490, 1, []), vela.IoTensor(4, 0, 12, 1, [])]
    b = blob.Blob("EthosU55", 128, True, b"COP1" + bytes(29), bytes(range(100)), 0, 16000, 1, 0, 2, io[:1], io[1:])
    data = b.pack()
    assert data[:4] == b"TMEU" and len(data) % 16 == 0
    header = int.from_bytes(data[6:8], "little")
    cmd_at, cmd_n = (int.from_bytes(data[k:k + 4], "little") for k in (12, 16))
    ro_at = int.from_bytes(data[20:24], "little")
    assert header == 48 + 2 * 16 == cmd_at and cmd_n == 33 and ro_at == 128 and ro_at % 16 == 0
    assert data[cmd_at:cmd_at + 4] == b"COP1" and data[ro_at:ro_at + 100] == bytes(range(100))
    back = blob.Blob.unpack(data)
    assert (back.command_stream, back.read_only, back.scratch_bytes, back.io_regions) == \
        (b.command_stream, b.read_only, 16000, True)
    assert [(t.region, t.nbytes) for t in back.inputs + back.outputs] == [(3, 490), (4, 12)]
    with pytest.raises(blob.BlobError, match="magic"):
        blob.Blob.unpack(b"XXXX" + data[4:])
    with pytest.raises(blob.BlobError, match="outside"):
        blob.Blob.unpack(data[:100])


def test_boards_with_an_npu() -> None:
    b = B.load_board(BOARD)
    assert b.npu is not None and b.npu.accelerator == "ethos-u55-128" and b.fvp_model == "FVP_Corstone_SSE-300_Ethos-U55"
    assert "dtcm" not in b.npu.memories and "itcm" not in b.npu.memories  # the NPU does not reach the TCMs
    assert B.load_board("mps3-an547").npu is None
    with pytest.raises(ethos_u.EthosUError, match="has no NPU"):
        ethos_u.compile_partitions(PGraph(), "mps3-an547")


def test_board_npu_table_validation(tmp_path) -> None:
    text = (REPO / "boards" / f"{BOARD}.toml").read_text()
    for old, new, message in (('accelerator = "ethos-u55-128"', 'accelerator = "npu-9000"', "accelerator"),
                              ('memories = ["sram", "bram", "ddr"]', 'memories = ["sram", "flash"]', "memories")):
        path = tmp_path / "board.toml"
        path.write_text(text.replace(old, new))
        with pytest.raises(B.BoardError, match=message):
            B.load_board(path)
