"""tmcu_platform_ticks on Zephyr (zephyr-module/runtime/platform_zephyr.cc),
built for the host against a stand-in of Zephyr's cycle counter that replays
the readings a real SysTick driver gives: a small backward step around a
reload (seen on mps3_an547: the sample printed ticks=4294824688 when such a
step was read as a wrap), a true 32-bit wrap, and steady counting. The
ticks must never go backwards, a backward step must be held, and a wrap must
count as the short forward step it is; with a 64-bit counter the same."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import REPO
from torchmcu.sources import FIRMWARE

PLATFORM = REPO / "zephyr-module" / "runtime" / "platform_zephyr.cc"

KERNEL_H = """#pragma once
#include <stdint.h>
#define DT_HAS_CHOSEN(x) 0
#define DT_HAS_COMPAT_STATUS_OKAY(x) 0
#define K_FOREVER 0
#define ARG_UNUSED(x) (void)(x)
extern const uint64_t* g_readings;
static inline unsigned int irq_lock(void) { return 0; }
static inline void irq_unlock(unsigned int) {}
static inline uint32_t k_cycle_get_32(void) { return (uint32_t)*g_readings++; }
static inline uint64_t k_cycle_get_64(void) { return *g_readings++; }
static inline void k_cpu_idle(void) {}
static inline int k_sleep(int) { return 0; }
"""

MAIN = """#include <stdint.h>
#include <stdio.h>
#include "boards/platform.h"
const uint64_t* g_readings;
static const uint64_t kReadings[] = {READINGS};
int main(void) {
  g_readings = kReadings;
  for (unsigned i = 0; i < sizeof kReadings / sizeof kReadings[0]; ++i)
    printf("%llu\\n", (unsigned long long)tmcu_platform_ticks());
  return 0;
}
"""


def ticks(tmp_path: Path, readings: list[int], counter64: bool) -> list[int]:
    stub = tmp_path / "stub"
    for sub in ("zephyr/drivers", "zephyr/sys"):
        (stub / sub).mkdir(parents=True, exist_ok=True)
    (stub / "zephyr" / "kernel.h").write_text(KERNEL_H)
    (stub / "zephyr" / "sys" / "printk.h").write_text("#pragma once\n#include <stdio.h>\n#define printk printf\n")
    for empty in ("device.h", "drivers/uart.h", "version.h"):
        (stub / "zephyr" / empty).write_text("#pragma once\n")
    main = tmp_path / "main.cc"
    main.write_text(MAIN.replace("READINGS", ", ".join(f"{r}ull" for r in readings)))
    exe = tmp_path / "ticks"
    defines = ["-DCONFIG_TIMER_HAS_64BIT_CYCLE_COUNTER=1"] if counter64 else []
    subprocess.run(["g++", "-std=c++17", "-fno-rtti", "-fno-exceptions", "-Wall", "-Werror",
                    "-fsanitize=address,undefined", "-fno-sanitize-recover=all", *defines,
                    f"-I{stub}", f"-I{FIRMWARE}", str(PLATFORM), str(main), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    return [int(line) for line in out.split()]


def test_a_backward_step_is_held_and_a_wrap_counts_forward(tmp_path: Path) -> None:
    # Readings of a 32-bit counter: steady, a 143 K-cycle backward step (held), steady
    # again (steps under 2^31 apart, as the counter is read), then a wrap past 2^32.
    readings = [1_000_000, 1_200_000, 1_056_608, 1_300_000, 0x7FFF_0000, 0xFFF0_0000, 0x100, 0x300]
    got = ticks(tmp_path, readings, counter64=False)
    assert got[:6] == [1_000_000, 1_200_000, 1_200_000, 1_300_000, 0x7FFF_0000, 0xFFF0_0000]
    assert got[6] == (1 << 32) + 0x100 and got[7] == (1 << 32) + 0x300
    assert all(b >= a for a, b in zip(got, got[1:]))
    # What the sample prints: the difference of two readings around the backward step.
    assert got[2] - got[1] == 0


@pytest.mark.parametrize("start", [5, 1 << 40])
def test_a_64_bit_counter_never_goes_backwards(tmp_path: Path, start: int) -> None:
    readings = [start, start + 500, start + 400, start + 900]
    assert ticks(tmp_path, readings, counter64=True) == [start, start + 500, start + 500, start + 900]
