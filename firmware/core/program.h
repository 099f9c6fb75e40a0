// Program: a verified, zero-copy view of a model.pte held in memory (usually
// a const array in flash). Nothing is copied: the view points into the
// caller's buffer, which must outlive it.
#ifndef TORCHMCU_CORE_PROGRAM_H_
#define TORCHMCU_CORE_PROGRAM_H_

#include <cstddef>
#include <cstdint>

#include "core/config.h"
#include "core/program_generated.h"
#include "core/result.h"

namespace torchmcu {

/// How much of a program Program::load and Method::load check.
///
/// kFull: every offset and size the runtime reads, every operand of every
/// op against its region, every kernel's own check of its operands and
/// arguments. A corrupted, truncated or hostile program gets an error code,
/// never a crash (fuzzed: firmware/host/fuzz_program.cc). For programs read
/// from anywhere the firmware does not control (storage, a radio, a host).
///
/// kMinimal: for a trusted program, the one compiled into the firmware
/// image by `torchmcu build` (whose compile step produced it). Checked: the
/// identifier, the program's CRC32 when it has one (compile --crc: a
/// half-flashed image is caught at this level too), the format version,
/// the constant segment's bounds, the arenas against the plan, and that
/// this build has a kernel for every op.
/// Not checked: offsets inside the program, operands, kernel arguments; a
/// corrupted program may crash the device. Load then costs a few
/// instructions per op (ExecuTorch's Program::Verification::Minimal makes
/// the same trade).
enum class Verification : uint8_t {
  kMinimal = 0,
  kFull = 1,
};

/// Program::load's level when none is given: kFull, or kMinimal in a
/// runtime built without the full one (TORCHMCU_VERIFY=0).
constexpr Verification kDefaultVerification =
    TORCHMCU_VERIFY ? Verification::kFull : Verification::kMinimal;

/// The format version this runtime reads (Program.version; 2: init copies
/// and the executable section).
constexpr uint32_t kProgramVersion = 4;

/// CRC-32 as zlib's crc32() computes it (reflected polynomial 0xEDB88320,
/// initial and final XOR 0xFFFFFFFF): crc32(b, n2, crc32(a, n1)) is the CRC
/// of a followed by b. No heap; a 1 KiB table in flash.
uint32_t crc32(const void* data, size_t size, uint32_t crc = 0);

class Program {
 public:
  Program() = default;

  /// Checks the identifier, the program's CRC32 when it carries one (compile
  /// --crc: over exactly `size` bytes, so `size` must be the program's own
  /// length; Error::ChecksumMismatch; at both levels unless the build has
  /// TORCHMCU_PROGRAM_CRC=0), the version and that the constant segment lies
  /// inside `size`; with kFull also every offset and size of the fields the
  /// runtime reads (the arenas, the init copies, the executable section; not
  /// the tables only tools read). Method::load checks the rest at the same
  /// level. `data` must be 16-byte aligned so constants, and the records
  /// read in place, are aligned too. kFull in a runtime built without it:
  /// Error::VerifierMissing.
  static Result<Program> load(const void* data, size_t size,
                              Verification verification = kDefaultVerification);

  schema::Program root() const { return root_; }
  Verification verification() const { return verification_; }
  const uint8_t* constants() const { return constants_; }
  uint32_t constants_size() const { return constants_size_; }

 private:
  schema::Program root_;
  const uint8_t* constants_ = nullptr;
  uint32_t constants_size_ = 0;
  Verification verification_ = Verification::kFull;
};

}  // namespace torchmcu

#endif  // TORCHMCU_CORE_PROGRAM_H_
