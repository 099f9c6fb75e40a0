#include "app/app.h"

#include "boards/platform.h"
#include "core/method.h"
#include "core/program.h"
#include "torchmcu/torchmcu.h"

namespace torchmcu {
namespace app {
namespace {

static_assert(sizeof(tmcu_arena) == sizeof(ArenaSpan), "tmcu_arena mirrors ArenaSpan");

void write(const char* s) {
  size_t n = 0;
  while (s[n] != '\0') ++n;
  tmcu_platform_write(s, n);
}

void write_u64(uint64_t v) {
  char buf[21];
  int i = 20;
  buf[i] = '\0';
  do {
    buf[--i] = char('0' + v % 10);
    v /= 10;
  } while (v != 0);
  write(buf + i);
}

void write_hex(const uint8_t* p, uint32_t n) {
  static const char kDigits[] = "0123456789abcdef";
  char buf[64];
  uint32_t used = 0;
  for (uint32_t i = 0; i < n; ++i) {
    buf[used++] = kDigits[p[i] >> 4];
    buf[used++] = kDigits[p[i] & 15];
    if (used == sizeof(buf)) {
      tmcu_platform_write(buf, used);
      used = 0;
    }
  }
  tmcu_platform_write(buf, used);
}

uint32_t read_u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

int finish(int status, uint32_t samples) {
  write("tmcu: done status=");
  write_u64(uint64_t(status));
  write(" samples=");
  write_u64(samples);
  write("\n");
  return status;
}

class Profiler final : public OpObserver {
 public:
  void op_begin(uint32_t) override { start_ = tmcu_platform_ticks(); }
  void op_end(uint32_t index) override {
    const uint64_t ticks = tmcu_platform_ticks() - start_;
    write("tmcu: op ");
    write_u64(index);
    write(" ticks=");
    write_u64(ticks);
    write("\n");
  }

 private:
  uint64_t start_ = 0;
};

int run(const uint8_t* program, size_t program_size, const tmcu_arena* arenas,
        size_t num_arenas, const uint8_t* io, size_t io_size) {
  const uint64_t t0 = tmcu_platform_ticks();
  const Result<Program> p = Program::load(program, program_size);
  Error status = p.error();
  Method method;
  if (p.ok()) {
    const Result<Method> m =
        Method::load(p.get(), reinterpret_cast<const ArenaSpan*>(arenas), num_arenas);
    status = m.error();
    if (m.ok()) method = m.get();
  }
  const uint64_t t1 = tmcu_platform_ticks();
  write("tmcu: load status=");
  write_u64(uint32_t(status));
  write(" ticks=");
  write_u64(t1 - t0);
  write("\n");
  if (status != Error::Ok) return finish(int(status), 0);

  if (io == nullptr || io_size < kIoHeaderBytes || read_u32(io) != read_u32(
                                                       reinterpret_cast<const uint8_t*>("TMIO")) ||
      read_u32(io + 4) != kIoVersion) {
    return finish(kStatusBadIo, 0);
  }
  const uint32_t samples = read_u32(io + 8);
  const uint32_t sample_bytes = read_u32(io + 12);
  const uint32_t flags = read_u32(io + 16);
  uint64_t expected = 0;
  for (uint32_t i = 0; i < method.num_inputs(); ++i) expected += method.input(i).nbytes;
  if (sample_bytes != expected ||
      uint64_t(samples) * sample_bytes > io_size - kIoHeaderBytes) {
    return finish(kStatusBadIo, 0);
  }

  for (uint32_t s = 0; s < samples; ++s) {
    const uint8_t* src = io + kIoHeaderBytes + uint64_t(s) * sample_bytes;
    auto load_inputs = [&]() {
      const uint8_t* q = src;
      for (uint32_t i = 0; i < method.num_inputs(); ++i) {
        const TensorView in = method.input(i);
        auto* dst = static_cast<uint8_t*>(in.data);
        for (uint32_t b = 0; b < in.nbytes; ++b) dst[b] = q[b];
        q += in.nbytes;
      }
    };
    if (s == 0 && (flags & kIoFlagProfile) != 0) {
      load_inputs();
      Profiler profiler;
      const Error e = method.execute(&profiler);
      if (e != Error::Ok) return finish(int(e), s);
    }
    load_inputs();
    const uint64_t start = tmcu_platform_ticks();
    const Error e = method.execute();
    const uint64_t ticks = tmcu_platform_ticks() - start;
    if (e != Error::Ok) return finish(int(e), s);
    write("tmcu: sample ");
    write_u64(s);
    write(" ticks=");
    write_u64(ticks);
    for (uint32_t k = 0; k < method.num_outputs(); ++k) {
      const TensorView out = method.output(k);
      write(" out");
      write_u64(k);
      write("=");
      write_hex(static_cast<const uint8_t*>(out.data), out.nbytes);
    }
    write("\n");
  }
  return finish(0, samples);
}

}  // namespace
}  // namespace app
}  // namespace torchmcu

extern "C" int tmcu_app_run(const uint8_t* program, size_t program_size,
                            const tmcu_arena* arenas, size_t num_arenas, const uint8_t* io,
                            size_t io_size) {
  return torchmcu::app::run(program, program_size, arenas, num_arenas, io, io_size);
}
