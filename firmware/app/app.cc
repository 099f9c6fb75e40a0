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

// Decimal without a 64-bit division (which would link libgcc's, ~0.8 KB):
// each digit by subtracting its power of ten.
void write_u64(uint64_t v) {
  static const uint64_t kPowers[] = {
      10000000000000000000ull, 1000000000000000000ull, 100000000000000000ull,
      10000000000000000ull,    1000000000000000ull,    100000000000000ull,
      10000000000000ull,       1000000000000ull,       100000000000ull,
      10000000000ull,          1000000000ull,          100000000ull,
      10000000ull,             1000000ull,             100000ull,
      10000ull,                1000ull,                100ull,
      10ull,                   1ull};
  char buf[21];
  int n = 0;
  for (uint64_t power : kPowers) {
    char digit = '0';
    while (v >= power) {
      v -= power;
      ++digit;
    }
    if (digit != '0' || n > 0 || power == 1) buf[n++] = digit;
  }
  buf[n] = '\0';
  write(buf);
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

// "tmcu: <what> ticks=<t> runs=<r>"
void write_ticks(const char* what, uint64_t ticks, uint32_t runs) {
  write(what);
  write(" ticks=");
  write_u64(ticks);
  write(" runs=");
  write_u64(runs);
  write("\n");
}

// Starts the next measurement at another phase of the tick counter: a
// pseudo-random pause outside the measured interval, so that a mean over
// runs averages the counter's granularity out (runs of equal length would
// otherwise all start at the same phase).
void dither(uint32_t& seed) {
  seed = seed * 1664525u + 1013904223u;
  for (volatile uint32_t i = 0; i < ((seed >> 24) & 63u); i = i + 1) {
  }
}

// Calibration runs: cheap (an empty op), so many.
constexpr uint32_t kCalibRuns = 256;

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

// "tmcu: npu <partition> cycles=<c> <counter>=<n> ..." after a delegate's
// call, when the delegate measured it (torchmcu.sim.fvp.parse_npu reads it).
void write_delegate_sample() {
  tmcu_delegate_sample s;
  if (tmcu_delegate_take_sample == nullptr || tmcu_delegate_take_sample(&s) == 0) return;
  write("tmcu: npu ");
  write_u64(s.partition);
  write(" cycles=");
  write_u64(s.cycles);
  for (uint32_t i = 0; i < s.num_counters && i < TMCU_DELEGATE_MAX_COUNTERS; ++i) {
    write(" ");
    write(s.names[i]);
    write("=");
    write_u64(s.counters[i]);
  }
  write("\n");
}

class Profiler final : public OpObserver {
 public:
  void op_begin(uint32_t) override { start_ = tmcu_platform_ticks(); }
  void op_end(uint32_t index) override {
    const uint64_t ticks = tmcu_platform_ticks() - start_;
    if (quiet_) {
      total_ += ticks;
      return;
    }
    write("tmcu: op ");
    write_u64(index);
    write(" ticks=");
    write_u64(ticks);
    write("\n");
    write_delegate_sample();
  }

  // The ticks of an op with no kernel in between, summed over `runs`: the
  // two calls go through the interface, as the executor makes them.
  uint64_t calibrate(uint32_t runs, uint32_t& seed) {
    OpObserver* volatile self = this;  // no devirtualization: a real call, as in execute()
    quiet_ = true;
    total_ = 0;
    for (uint32_t r = 0; r < runs; ++r) {
      OpObserver* o = self;
      dither(seed);
      o->op_begin(0);
      o->op_end(0);
    }
    quiet_ = false;
    return total_;
  }

 private:
  uint64_t start_ = 0;
  uint64_t total_ = 0;
  bool quiet_ = false;
};

bool io_header_ok(const uint8_t* io, size_t io_size) {
  return io != nullptr && io_size >= kIoHeaderBytes &&
         read_u32(io) == read_u32(reinterpret_cast<const uint8_t*>("TMIO")) &&
         read_u32(io + 4) == kIoVersion;
}

int run(const uint8_t* program, size_t program_size, const tmcu_arena* arenas,
        size_t num_arenas, const uint8_t* io, size_t io_size) {
  const bool io_ok = io_header_ok(io, io_size);
  uint32_t repeat = io_ok ? read_u32(io + 20) : 1;
  repeat = repeat == 0 ? 1 : (repeat > kMaxRepeat ? kMaxRepeat : repeat);

  // The load, `repeat` times over (each the same work: the program is only
  // read, and the init copies write the same bytes again).
  Error status = Error::Ok;
  Method method;
  uint64_t load_ticks = 0;
  uint32_t loads = 0;
  uint32_t seed = 1;
  while (loads < repeat && status == Error::Ok) {
    if (repeat > 1) dither(seed);
    const uint64_t t0 = tmcu_platform_ticks();
    const Result<Program> p = Program::load(program, program_size);
    status = p.error();
    if (p.ok()) {
      const Result<Method> m =
          Method::load(p.get(), reinterpret_cast<const ArenaSpan*>(arenas), num_arenas);
      status = m.error();
      if (m.ok()) method = m.get();
    }
    load_ticks += tmcu_platform_ticks() - t0;
    ++loads;
  }
  write("tmcu: load status=");
  write_u64(uint32_t(status));
  write_ticks("", load_ticks, loads);
  if (status != Error::Ok) return finish(int(status), 0);

  if (!io_ok) return finish(kStatusBadIo, 0);
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
      Profiler profiler;
      write_ticks("tmcu: calib", profiler.calibrate(kCalibRuns, seed), kCalibRuns);
      for (uint32_t r = 0; r < repeat; ++r) {
        load_inputs();
        if (repeat > 1) dither(seed);
        const Error e = method.execute(&profiler);
        if (e != Error::Ok) return finish(int(e), s);
      }
    }
    if (s == 0 && repeat > 1) {
      uint64_t total = 0;
      for (uint32_t r = 0; r < repeat; ++r) {
        load_inputs();  // in-place ops may have overwritten an input
        dither(seed);
        const uint64_t start = tmcu_platform_ticks();
        const Error e = method.execute();
        total += tmcu_platform_ticks() - start;
        if (e != Error::Ok) return finish(int(e), s);
      }
      write_ticks("tmcu: repeat", total, repeat);
    }
    if (s == 0 && ((flags & kIoFlagProfile) != 0 || repeat > 1)) {
      // The measured runs advanced a streaming model's state (a persistent
      // arena): loading the method again resets it, as at the start.
      const Result<Program> p = Program::load(program, program_size);
      const Result<Method> m = p.ok() ? Method::load(p.get(), reinterpret_cast<const ArenaSpan*>(arenas), num_arenas)
                                      : Result<Method>(p.error());
      if (!m.ok()) return finish(int(m.error()), s);
      method = m.get();
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
