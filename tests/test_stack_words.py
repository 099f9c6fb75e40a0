"""The stack analysis's address-taken functions (builder.stack): every
function whose address, Thumb bit set, a loaded word holds. Read as arrays
(a float CNN's program is tens of MB of loaded words); the same set as the
definition word by word, on images with unaligned sections, a skipped range
(the vector table), sections that are not loaded and a truncated one."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from torchmcu.builder import stack

ALLOC = 2


def _by_definition(elf: stack.Elf, skip: tuple[int, int] | None) -> set[int]:
    words = set()
    for name, (addr, size, off, flags) in elf.sections.items():
        if not flags & ALLOC or not size or name in (".stack", ".bss") or off + size > len(elf.data):
            continue
        blob = elf.data[off:off + size]
        for k in range(-addr % 4, len(blob) - 3, 4):
            if skip and skip[0] <= addr + k < skip[1]:
                continue
            words.add(struct.unpack_from("<I", blob, k)[0])
    return {w & ~1 for w in words if w & 1} & set(elf.functions)


def _image(seed: int) -> stack.Elf:
    rng = np.random.default_rng(seed)
    functions = {int(a): [f"f{a:x}"] for a in rng.choice(np.arange(0x100, 0x4000, 2), 200, replace=False)}
    data = bytearray(rng.integers(0, 256, 60_000, dtype=np.uint8).tobytes())
    for a in functions:  # addresses (Thumb bit set and not) at aligned and odd offsets
        at = int(rng.integers(0, len(data) - 4))
        struct.pack_into("<I", data, at, a | int(rng.integers(0, 2)))
    sections = {
        ".text": (0x0, 20_000, 0, ALLOC | 4),
        ".rodata": (0x4E22, 9_999, 20_000, ALLOC),  # an address 2 mod 4: words start 2 bytes in
        ".tmcu_program": (0x60000001, 25_000, 30_000, ALLOC),
        ".bss": (0x20000000, 5_000, 55_000, ALLOC | 1),
        ".comment": (0x0, 4_000, 55_000, 0),
        ".cut": (0x7000, 10_000, 58_000, ALLOC),  # runs past the file: not read
    }
    return stack.Elf(sections, functions, {a: 4 for a in functions}, {}, bytes(data))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("skip", [None, (0x0, 0x40), (0x4E20, 0x4E2A), (0x4E23, 0x5000), (0x100, 0x60000010),
                                  (0x6000, 0x6000)])
def test_taken_addresses_match_the_definition(seed: int, skip: tuple[int, int] | None) -> None:
    elf = _image(seed)
    expected = _by_definition(elf, skip)
    assert stack.taken_addresses(elf, skip) == expected
    if skip is None:
        assert expected  # the image does hold addresses: the test compares something
