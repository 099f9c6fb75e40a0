// The test application shared by firmware and host builds: it runs a program
// over the samples of an io blob and reports in a line protocol that
// torchmcu.sim parses.
//
// io blob (little-endian), placed by the simulator runner or a host file:
//   0  "TMIO"        4  u32 version (1)
//   8  u32 samples   12 u32 bytes per sample (sum of the inputs' nbytes)
//   16 u32 flags (bit 0: profile the first sample op by op)
//   32 samples, each the model inputs' bytes back to back, in input order
//
// Lines (each starts with "tmcu: "):
//   load status=<code> ticks=<t>              program + method load
//   op <index> ticks=<t>                       profile of the first sample
//   sample <s> ticks=<t> out<k>=<hex bytes>    one inference
//   done status=<code> samples=<n>
// Ticks are the platform's counter; the runner converts them (under QEMU
// -icount shift=0 they are exact instruction counts times a board constant).
#ifndef TORCHMCU_APP_APP_H_
#define TORCHMCU_APP_APP_H_

#include <cstdint>

namespace torchmcu {
namespace app {

constexpr uint32_t kIoVersion = 1;
constexpr uint32_t kIoHeaderBytes = 32;
constexpr uint32_t kIoFlagProfile = 1;

/// Exit statuses of the app itself, above the runtime's error codes.
constexpr int kStatusBadIo = 0x50;

}  // namespace app
}  // namespace torchmcu

#endif  // TORCHMCU_APP_APP_H_
