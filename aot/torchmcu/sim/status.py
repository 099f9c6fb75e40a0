"""What a firmware's exit status means, by name: the runtime's error codes
(firmware/core/error.h, `enum class Error`), the app's own statuses
(firmware/app/app.h, kStatus*) and the board's fault codes (base.EXIT_CODES).

The table is read from the headers themselves, so it cannot drift from the
firmware: each enumerator `Name = 0xNN,  // what it means`.
"""

from __future__ import annotations

import functools
import re

from ..sources import FIRMWARE
from .base import EXIT_CODES

# `  InvalidProgram = 0x20,      // not a program, or a structure out of bounds`
_ENTRY = re.compile(r"^\s*(\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)\s*,?\s*(?://\s*(.*))?$")
# `constexpr int kStatusBadIo = 0x50;`
_APP_STATUS = re.compile(r"constexpr\s+int\s+kStatus(\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)\s*;")
_APP_MEANINGS = {"BadIo": "the io blob does not match the program's inputs (header, sample size or length)"}


@functools.cache
def runtime_errors() -> dict[int, tuple[str, str]]:
    """error.h's `enum class Error`: code -> (name, what it means)."""
    text = (FIRMWARE / "core" / "error.h").read_text()
    block = text[text.index("enum class Error"):]
    block = block[block.index("{") + 1:block.index("};")]
    table: dict[int, tuple[str, str]] = {}
    for line in block.splitlines():
        m = _ENTRY.match(line)
        if m:
            table[int(m.group(2), 0)] = (m.group(1), (m.group(3) or "").strip())
    return table


@functools.cache
def app_statuses() -> dict[int, tuple[str, str]]:
    """app.h's own exit statuses (above the runtime's codes): code -> (name, meaning)."""
    text = (FIRMWARE / "app" / "app.h").read_text()
    return {int(v, 0): (name, _APP_MEANINGS.get(name, "")) for name, v in _APP_STATUS.findall(text)}


def describe(status: int) -> str | None:
    """`InvalidProgram (0x20): not a program, or a structure out of bounds`,
    or None when the status is none of the firmware's codes."""
    known = {**runtime_errors(), **app_statuses()}
    if status in known and status != 0:
        name, meaning = known[status]
        return f"{name} (0x{status:02x})" + (f": {meaning}" if meaning else "")
    if status in EXIT_CODES:
        return f"{EXIT_CODES[status]} ({status}): the board's fault handler stopped the firmware"
    return None
