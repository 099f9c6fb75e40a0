// The test application shared by firmware and host builds: it runs a program
// over the samples of an io blob and reports in a line protocol that
// torchmcu.sim parses.
//
// io blob (little-endian), placed by the simulator runner or a host file:
//   0  "TMIO"        4  u32 version (1)
//   8  u32 samples   12 u32 bytes per sample (sum of the inputs' nbytes)
//   16 u32 flags (bit 0: profile the first sample op by op)
//   20 u32 repeat: measure the load, the profile and the first sample this
//      many times (0 is 1; at most kMaxRepeat)
//   32 samples, each the model inputs' bytes back to back, in input order
//
// Lines (each starts with "tmcu: "):
//   load status=<code> ticks=<t> runs=<r>      program + method load, r times
//   calib ticks=<t> runs=<r>                   the profiler's own cost, r times
//   op <index> ticks=<t>                       one op of the first sample; r passes
//   npu <partition> cycles=<c> <counter>=<n>.. after an op that was a delegate call
//                                              (profile only): its hardware's counts
//   repeat ticks=<t> runs=<r>                  the first sample, r more times
//   sample <s> ticks=<t> out<k>=<hex bytes>    one inference
//   done status=<code> samples=<n>
// Ticks are the platform's counter; the runner converts them (under QEMU
// -icount shift=0 one tick is a board constant of instructions, e.g. 31.25 at
// 32 MHz). Repeats average the tick quantization out: each run starts at
// another, pseudo-random phase of the counter.
//
// Profile: `calib` is the instructions between the two tick reads of an op
// with no kernel in between; an op's own instructions (its kernel's run,
// the call included) are its ticks less that.
#ifndef TORCHMCU_APP_APP_H_
#define TORCHMCU_APP_APP_H_

#include <cstdint>

namespace torchmcu {
namespace app {

constexpr uint32_t kIoVersion = 1;
constexpr uint32_t kIoHeaderBytes = 32;
constexpr uint32_t kIoFlagProfile = 1;
constexpr uint32_t kMaxRepeat = 1024;

/// Exit statuses of the app itself, above the runtime's error codes.
constexpr int kStatusBadIo = 0x50;

}  // namespace app
}  // namespace torchmcu

#endif  // TORCHMCU_APP_APP_H_
