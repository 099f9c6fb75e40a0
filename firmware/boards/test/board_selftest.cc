// Board self-test firmware, run by tests/test_boards.py on every board.
//
// The io window may hold a request: "TMCU", u32 command, u32 length, data.
// Command 0 sums the data bytes; command 1 executes an undefined instruction
// to exercise the HardFault report. main returns 7 so the test can see the
// exit code pass through startup and semihosting.
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 2)
#include <arm_mve.h>
#endif

#include "platform.h"

// A stand-in model program and two arenas, placed by the generated linker
// script (the test links with arenas tmcu_arena_fast and tmcu_arena_slow).
// extern "C" so the test finds them by their plain names with nm.
extern "C" {
__attribute__((section(".rodata.tmcu_program_selftest"), aligned(16), used))
extern const uint8_t tmcu_program_selftest[40] = {1, 2, 3, 4, 5};
__attribute__((section(".bss.tmcu_arena_fast"))) uint32_t tmcu_arena_fast[256];
__attribute__((section(".bss.tmcu_arena_slow"))) uint32_t tmcu_arena_slow[4096];
}

namespace {

void put(const char* s) { tmcu_platform_write(s, strlen(s)); }

void put_u64(uint64_t v) {
  char buf[20];
  int i = sizeof buf;
  do {
    buf[--i] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  tmcu_platform_write(buf + i, sizeof buf - i);
}

void put_i64(int64_t v) {
  if (v < 0) {
    put("-");
    v = -v;
  }
  put_u64(static_cast<uint64_t>(v));
}

uint32_t read_u32(const uint8_t* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// Initialised data and a static constructor: both must be set up by startup.
int g_data_check = 1234;
struct Ctor {
  int value;
  Ctor() : value(42) {}
};
Ctor g_ctor;

bool arena_ok(volatile uint32_t* a, uint32_t n, uint32_t seed) {
  for (uint32_t i = 0; i < n; ++i) a[i] = seed ^ (i * 2654435761u);
  for (uint32_t i = 0; i < n; ++i)
    if (a[i] != (seed ^ (i * 2654435761u))) return false;
  return true;
}

// Semihosting SYS_WRITE0: the runner routes it to the same stdout as the UART.
void semihost_write0(const char* s) {
  register uint32_t r0 __asm__("r0") = 0x04;
  register const char* r1 __asm__("r1") = s;
  __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
}

}  // namespace

int main() {
  tmcu_platform_init();
  put("selftest: hello\n");
  put("data: ");
  put_i64(g_data_check);
  put(" ctor: ");
  put_i64(g_ctor.value);
  put("\n");

  semihost_write0("semihost: hello\n");
  bool arenas = arena_ok(tmcu_arena_fast, 256, 0x1234u) && arena_ok(tmcu_arena_slow, 4096, 0xabcdu);
  put(arenas ? "arena: ok" : "arena: BROKEN");
  put(" program: ");
  put_i64(tmcu_program_selftest[4]);
  put("\n");

  // (c) io window.
  const uint8_t* io = tmcu_platform_io_base();
  if (memcmp(io, "TMCU", 4) == 0) {
    uint32_t command = read_u32(io + 4);
    uint32_t length = read_u32(io + 8);
    if (length > tmcu_platform_io_size() - 12) length = 0;
    if (command == 1) {
      put("fault: now\n");
      __asm__ volatile("udf #0");
    }
    uint64_t sum = 0;
    for (uint32_t i = 0; i < length; ++i) sum += io[12 + i];
    put("io: len=");
    put_u64(length);
    put(" sum=");
    put_u64(sum);
    put("\n");
  } else {
    put("io: none\n");
  }

  // (d) instruction counter: 1,000,000 iterations of subs+bne.
  uint32_t n = 1000000;
  uint64_t t0 = tmcu_platform_ticks();
  __asm__ volatile(
      "1: subs %0, %0, #1\n\t"
      "bne 1b"
      : "+r"(n)
      :
      : "cc");
  uint64_t t1 = tmcu_platform_ticks();
  put("loop: instructions=2000000 ticks=");
  put_u64(t1 - t0);
  put("\n");

  // Monotonicity across SysTick wraps (tests build with a short period).
  uint64_t first = tmcu_platform_ticks();
  uint64_t prev = first;
  uint64_t max_step = 0;
  bool monotonic = true;
  for (int i = 0; i < 200000; ++i) {
    uint64_t t = tmcu_platform_ticks();
    if (t < prev) monotonic = false;
    if (t - prev > max_step) max_step = t - prev;
    prev = t;
  }
  put(monotonic ? "mono: ok" : "mono: BROKEN");
  put(" span=");
  put_u64(prev - first);
  put(" max_step=");
  put_u64(max_step);
  put("\n");

  // (f) floating point: divide, multiply, square root.
  volatile float a = 2.0f, b = 3.0f;
  float q = a / b;
  float r = q * q + sqrtf(a);
  put("float: ");
  put_i64(static_cast<int64_t>(r * 1000000.0f + 0.5f));
  put("\n");

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 2)
  // MVE float: lanewise fused multiply-add over volatile inputs.
  static volatile float xs[4] = {1.5f, 2.5f, -3.0f, 4.25f};
  float tmp[4];
  for (int i = 0; i < 4; ++i) tmp[i] = xs[i];
  float32x4_t v = vld1q_f32(tmp);
  float32x4_t w = vfmaq_f32(vdupq_n_f32(1.0f), v, vdupq_n_f32(2.0f));  // 1 + 2x
  float lanes = vgetq_lane_f32(w, 0) + vgetq_lane_f32(w, 1) + vgetq_lane_f32(w, 2) + vgetq_lane_f32(w, 3);
  put("mve: ");
  put_i64(static_cast<int64_t>(lanes * 1000.0f));
  put("\n");
#endif

  put("selftest: done\n");
  return 7;
}
