// The platform layer for an Xtensa core under the ISS: console output with
// write(1, ...) (a simulator call under the "sim" LSP; no stdio buffer, so no
// heap), ticks from the core's cycle counter CCOUNT (exact cycles in the ISS;
// 32 bits, extended here across wraps), exit with _exit (xt-run ends with the
// program's status).
#include <unistd.h>

#include "boards/platform.h"

namespace {
const uint8_t* io_base = nullptr;
size_t io_size = 0;
uint32_t last_ccount = 0;
uint64_t high_ticks = 0;
}  // namespace

extern "C" {

void tmcu_xtensa_set_io(const uint8_t* base, size_t size) {
  io_base = base;
  io_size = size;
}

void tmcu_platform_init(void) {}

void tmcu_platform_write(const char* s, size_t n) {
  while (n > 0) {
    const ssize_t done = write(1, s, n);
    if (done <= 0) return;
    s += done;
    n -= size_t(done);
  }
}

uint64_t tmcu_platform_ticks(void) {
  uint32_t ccount;
  __asm__ volatile("rsr.ccount %0" : "=a"(ccount));
  if (ccount < last_ccount) high_ticks += uint64_t(1) << 32;
  last_ccount = ccount;
  return high_ticks | ccount;
}

void tmcu_platform_exit(int code) { _exit(code); }

const uint8_t* tmcu_platform_io_base(void) { return io_base; }

size_t tmcu_platform_io_size(void) { return io_size; }

}  // extern "C"
