// The platform functions of boards/platform.h on an Arduino core: the log is
// Serial, ticks are micros(). Exported into every Arduino library by
// `torchmcu export --arduino`; never built into the bare-metal firmware.
//
// Differences from the MPS2/MPS3 boards: Serial is the sketch's (it calls
// Serial.begin), ticks are microseconds rather than core cycles, there is no
// io window (inputs come embedded in the sketch or over Serial, see
// torchmcu_arduino.h), and exit cannot end a simulation, so it parks the core.
#include <Arduino.h>

#include "boards/platform.h"

namespace {

// micros() is 32 bits and wraps every 2^32 us (71.6 minutes); ticks() extends
// it to 64 bits by counting the wraps it sees. That holds as long as ticks()
// is called at least once per wrap period, which a running model does, and
// only from the sketch's thread (the runtime never calls it from an
// interrupt).
bool g_started = false;
uint32_t g_last_micros = 0;
uint64_t g_wraps = 0;
uint64_t g_origin = 0;

uint64_t extended_micros() {
  const uint32_t now = micros();
  if (now < g_last_micros) g_wraps += uint64_t(1) << 32;
  g_last_micros = now;
  return g_wraps | now;
}

}  // namespace

extern "C" void tmcu_platform_init(void) {
  if (g_started) return;
  g_origin = extended_micros();
  g_started = true;
}

extern "C" void tmcu_platform_write(const char* s, size_t n) {
  Serial.write(reinterpret_cast<const uint8_t*>(s), n);
}

extern "C" uint64_t tmcu_platform_ticks(void) {
  return extended_micros() - g_origin;
}

extern "C" void tmcu_platform_exit(int code) {
  (void)code;  // no simulator to hand it to
  Serial.flush();
  for (;;) {
    delay(1000);
  }
}

extern "C" const uint8_t* tmcu_platform_io_base(void) { return nullptr; }

extern "C" size_t tmcu_platform_io_size(void) { return 0; }
