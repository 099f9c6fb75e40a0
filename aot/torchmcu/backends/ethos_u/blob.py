"""The Ethos-U delegate blob: what one NPU partition puts in the program.

Little-endian, 16-byte aligned throughout (the NPU reads the command stream
and the weights in place, and the driver wants both on 16-byte boundaries;
the blob itself must start on one):

    offset  size  field
       0     4    magic "TMEU"
       4     2    version (1)
       6     2    header bytes: this table plus the I/O entries, rounded up to 16
       8     1    accelerator: 0 Ethos-U55, 1 Ethos-U65, 2 Ethos-U85
       9     1    flags: bit 0 = I/O tensors have base pointers of their own
      10     2    MACs per cycle the command stream was compiled for
      12     4    command stream offset (from the blob's start)
      16     4    command stream bytes
      20     4    read-only data (weights, biases, scales) offset
      24     4    read-only data bytes
      28     4    scratch bytes (the runtime plans them in NPU-reachable RAM)
      32     4    fast-scratch bytes (0: none)
      36     1    read-only data's base-pointer region
      37     1    scratch region (either scratch region means nothing when its
                  bytes are 0: Vela then gives 0)
      38     1    fast-scratch region
      39     1    reserved (0)
      40     2    number of inputs
      42     2    number of outputs
      44     4    reserved (0)
      48    16n   I/O entries, inputs then outputs, each:
                    u8 region, u8 element bytes, u16 reserved,
                    u32 offset in that region, u32 bytes, u32 reserved
    then the command stream, then the read-only data, each at its offset.

An I/O entry in the scratch region (flag bit 0 clear) tells where the
runtime copies the tensor in or out; in its own region, the offset is 0 and
the runtime passes the planned buffer as that region's base pointer.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .vela import Compiled, IoTensor

MAGIC = b"TMEU"
VERSION = 1
ALIGN = 16
ACCELERATOR_CODES = {"EthosU55": 0, "EthosU65": 1, "EthosU85": 2}
FLAG_IO_REGIONS = 1

_HEADER = struct.Struct("<4sHHBBHIIIIIIBBBBHHI")
_IO = struct.Struct("<BBHIII")
assert _HEADER.size == 48 and _IO.size == 16


class BlobError(ValueError):
    """A blob that is not a well-formed Ethos-U delegate blob."""


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@dataclass
class Blob:
    accelerator: str  # "EthosU55", "EthosU65" or "EthosU85"
    macs: int
    io_regions: bool
    command_stream: bytes
    read_only: bytes
    read_only_region: int
    scratch_bytes: int
    scratch_region: int
    fast_scratch_bytes: int
    fast_scratch_region: int
    inputs: list[IoTensor]
    outputs: list[IoTensor]

    @classmethod
    def from_compiled(cls, c: Compiled, accelerator: str, macs: int, io_regions: bool) -> Blob:
        return cls(accelerator, macs, io_regions, c.command_stream, c.read_only, c.read_only_region, c.scratch_bytes,
                   c.scratch_region, c.fast_scratch_bytes, c.fast_scratch_region, c.inputs, c.outputs)

    def pack(self) -> bytes:
        io = self.inputs + self.outputs
        header_bytes = _align(_HEADER.size + _IO.size * len(io))
        cmd_at = header_bytes
        ro_at = _align(cmd_at + len(self.command_stream))
        end = _align(ro_at + len(self.read_only))
        out = bytearray(end)
        _HEADER.pack_into(out, 0, MAGIC, VERSION, header_bytes, ACCELERATOR_CODES[self.accelerator],
                          FLAG_IO_REGIONS if self.io_regions else 0, self.macs, cmd_at, len(self.command_stream),
                          ro_at, len(self.read_only), self.scratch_bytes, self.fast_scratch_bytes,
                          self.read_only_region, self.scratch_region, self.fast_scratch_region, 0,
                          len(self.inputs), len(self.outputs), 0)
        for k, t in enumerate(io):
            _IO.pack_into(out, _HEADER.size + k * _IO.size, t.region, t.element_bytes, 0, t.offset, t.nbytes, 0)
        out[cmd_at:cmd_at + len(self.command_stream)] = self.command_stream
        out[ro_at:ro_at + len(self.read_only)] = self.read_only
        return bytes(out)

    @classmethod
    def unpack(cls, data: bytes) -> Blob:
        if len(data) < _HEADER.size:
            raise BlobError(f"{len(data)} bytes: shorter than the {_HEADER.size}-byte header")
        (magic, version, header_bytes, acc, flags, macs, cmd_at, cmd_n, ro_at, ro_n, scratch, fast, ro_region,
         scratch_region, fast_region, _, n_in, n_out, _) = _HEADER.unpack_from(data, 0)
        if magic != MAGIC:
            raise BlobError(f"bad magic {magic!r}")
        if version != VERSION:
            raise BlobError(f"version {version}; this reader knows {VERSION}")
        names = {v: k for k, v in ACCELERATOR_CODES.items()}
        if acc not in names:
            raise BlobError(f"unknown accelerator code {acc}")
        if header_bytes < _HEADER.size + _IO.size * (n_in + n_out):
            raise BlobError("the I/O table runs past the header")
        for what, at, n in (("command stream", cmd_at, cmd_n), ("read-only data", ro_at, ro_n)):
            if at % ALIGN or at < header_bytes or at + n > len(data):
                raise BlobError(f"{what} at {at} (+{n}) is misaligned or outside the blob's {len(data)} bytes")
        io = [IoTensor(r, off, nb, el, []) for r, el, _, off, nb, _ in
              (_IO.unpack_from(data, _HEADER.size + k * _IO.size) for k in range(n_in + n_out))]
        return cls(names[acc], macs, bool(flags & FLAG_IO_REGIONS), bytes(data[cmd_at:cmd_at + cmd_n]),
                   bytes(data[ro_at:ro_at + ro_n]), ro_region, scratch, scratch_region, fast, fast_region,
                   io[:n_in], io[n_in:])
