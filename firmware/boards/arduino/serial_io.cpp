// Requests of `torchmcu run --device PORT` over Serial (see
// torchmcu_arduino.h): an io blob in, the app's line protocol out.
#include <Arduino.h>

#include "boards/arduino/torchmcu_arduino.h"
#include "boards/platform.h"

namespace {

constexpr uint8_t kMagic[4] = {'T', 'M', 'I', 'O'};

uint32_t read_u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

void write_line(const char* s) {
  size_t n = 0;
  while (s[n] != '\0') ++n;
  tmcu_platform_write(s, n);
}

// Reads up to n bytes, waiting at most the Serial timeout for them; returns
// how many arrived.
size_t read_bytes(uint8_t* dst, size_t n) {
  return Serial.readBytes(reinterpret_cast<char*>(dst), n);
}

// Reads and drops n bytes (the part of a blob that does not fit the buffer);
// stops early when the sender goes quiet for the Serial timeout.
void drain(uint64_t n) {
  uint8_t chunk[32];
  while (n > 0) {
    const size_t want = n < sizeof(chunk) ? size_t(n) : sizeof(chunk);
    const size_t got = read_bytes(chunk, want);
    if (got == 0) return;
    n -= got;
  }
}

// Skips bytes until the magic has been read; false when Serial goes quiet
// first. A partial match restarts at the byte that broke it.
bool sync_on_magic() {
  size_t matched = 0;
  while (matched < sizeof(kMagic)) {
    uint8_t c = 0;
    if (read_bytes(&c, 1) != 1) return false;
    if (c == kMagic[matched]) {
      ++matched;
    } else {
      matched = c == kMagic[0] ? 1 : 0;
    }
  }
  return true;
}

}  // namespace

extern "C" void tmcu_arduino_ready(void) { write_line("tmcu: ready\n"); }

extern "C" int tmcu_arduino_serve(const uint8_t* program, size_t program_size,
                                  const tmcu_arena* arenas, size_t num_arenas, uint8_t* buffer,
                                  size_t capacity) {
  if (buffer == nullptr || capacity < TMCU_IO_HEADER_BYTES) return TMCU_ARDUINO_BUFFER_TOO_SMALL;
  if (Serial.available() <= 0) return TMCU_ARDUINO_NO_REQUEST;
  if (!sync_on_magic()) return TMCU_ARDUINO_NO_REQUEST;

  for (size_t i = 0; i < sizeof(kMagic); ++i) buffer[i] = kMagic[i];
  size_t size = sizeof(kMagic);
  size += read_bytes(buffer + size, TMCU_IO_HEADER_BYTES - size);
  if (size == TMCU_IO_HEADER_BYTES) {
    // The header announces samples x bytes per sample; 64 bits cannot overflow.
    const uint64_t payload = uint64_t(read_u32(buffer + 8)) * read_u32(buffer + 12);
    const uint64_t room = capacity - TMCU_IO_HEADER_BYTES;
    const uint64_t kept = payload < room ? payload : room;
    size += read_bytes(buffer + size, size_t(kept));
    if (size == TMCU_IO_HEADER_BYTES + kept && payload > kept) drain(payload - kept);
  }
  // An incomplete or oversized blob reaches the app shorter than its header
  // announces: the app answers it with its bad-io status, so the host always
  // gets a "done" line rather than silence.
  const int status = tmcu_app_run(program, program_size, arenas, num_arenas, buffer, size);
  tmcu_arduino_ready();
  return status;
}
