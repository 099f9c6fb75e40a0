// The platform layer for host builds (tests, sanitizers, fuzzing).
#include <cstdio>
#include <cstdlib>

#include "boards/platform.h"

extern "C" {

void tmcu_platform_init(void) {}

void tmcu_platform_write(const char* s, size_t n) { std::fwrite(s, 1, n, stdout); }

// Host runs report no instruction counts: only the simulator's are exact.
uint64_t tmcu_platform_ticks(void) { return 0; }

void tmcu_platform_exit(int code) { std::exit(code); }

const uint8_t* tmcu_platform_io_base(void) { return nullptr; }

size_t tmcu_platform_io_size(void) { return 0; }

}  // extern "C"
