"""`torchmcu inspect`: a program printed for people."""

from __future__ import annotations

import zlib

import numpy as np

from . import schema
from .serialize import crc_field

_NP = {"F32": "<f4", "I8": "i1", "I16": "<i2", "I32": "<i4", "U8": "u1"}


def _fmt_params(params: tuple[str, dict] | None) -> str:
    if params is None:
        return ""
    name, body = params
    if name == "EthosUParams":  # the partition as the CPU runs it (for the interpreter): counted, not listed
        ops = ", ".join(op["code"] for op in body["ops"])
        return (f"EthosUParams(partition={body['partition']}; replaces {len(body['ops'])} ops: {ops}; "
                f"{len(body['constants']):,} B of their constants kept for tools)")
    items = []
    for k, v in body.items():
        if isinstance(v, float):
            v = f"{v:g}"
        items.append(f"{k}={v}")
    return f"{name}({', '.join(items)})"


def _crc_line(buf: bytes) -> str:
    """The program's CRC32 and whether its bytes still match it (what Program::load checks)."""
    at = crc_field(buf)
    if at is None:
        return "CRC32: none (compile --crc writes one, checked at load)"
    stored = int.from_bytes(buf[at:at + 4], "little")
    actual = zlib.crc32(buf[:at] + bytes(4) + buf[at + 4:])
    verdict = "matches, checked at load" if stored == actual else f"MISMATCH: the bytes give 0x{actual:08x}"
    return f"CRC32: 0x{stored:08x} ({verdict})"


def describe(buf: bytes, values: bool = False) -> str:
    prog = schema.decode(buf)
    seg = prog["constant_offset"]
    tensors = prog["tensors"]
    lines = [
        f"torchmcu program v{prog['version']}: {len(buf):,} bytes "
        f"(flatbuffer {seg:,} B + constants {prog['constant_size']:,} B)",
        _crc_line(buf),
        "",
        "arenas:",
    ]
    for i, a in enumerate(prog["arenas"]):
        lines.append(f"  [{i}] {a['name']}: {a['size']:,} B")
    lines += ["", "tensors:"]
    for i, t in enumerate(tensors):
        where = (f"const +{t['offset']}" if t["region"] == "CONSTANT"
                 else f"arena {t['arena']} +{t['offset']}")
        quant = f" scale={t['scale']:g} zp={t['zero_point']}" if t["scale"] else ""
        lines.append(f"  t{i:<3} {t['name']:<28} {t['dtype']:<4} {str(t['dims']):<18} {t['nbytes']:>8} B  {where}{quant}")
        if values and t["region"] == "CONSTANT":
            start = seg + t["offset"]
            data = np.frombuffer(buf[start:start + t["nbytes"]], dtype=_NP[t["dtype"]])
            lines.append("        " + np.array2string(data, threshold=8, edgeitems=3, precision=4))
    lines += ["", "ops:"]
    for i, op in enumerate(prog["ops"]):
        ins = ", ".join("-" if t < 0 else f"t{t}" for t in op["inputs"])
        outs = ", ".join(f"t{t}" for t in op["outputs"])
        lines.append(f"  {i:>3} {op['code']:<22} ({ins}) -> ({outs})  {_fmt_params(op['params'])}  # {op['name']}")
    lines += ["", f"inputs:  {', '.join(f't{t}' for t in prog['inputs'])}",
              f"outputs: {', '.join(f't{t}' for t in prog['outputs'])}"]
    return "\n".join(lines)
