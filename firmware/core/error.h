// Error codes of the runtime. Every fallible call returns one (or a Result).
// Codes are grouped by range so an application can tell whose fault it was:
// 0x1x the caller's arguments, 0x2x the program, 0x3x this build or the
// memory it was given, 0x4x the hardware behind a delegate.
#ifndef TORCHMCU_CORE_ERROR_H_
#define TORCHMCU_CORE_ERROR_H_

#include <cstdint>

namespace torchmcu {

enum class Error : uint32_t {
  Ok = 0x00,
  Internal = 0x01,  // a broken invariant of the runtime itself

  InvalidArgument = 0x10,  // null pointer, index out of range

  InvalidProgram = 0x20,      // not a program, or a structure out of bounds
  UnsupportedVersion = 0x21,  // written by an incompatible compiler
  MisalignedProgram = 0x22,   // the buffer is not 16-byte aligned
  InvalidTensor = 0x23,       // dims, dtype, offset or size inconsistent
  InvalidOp = 0x24,           // operands or parameters the kernel refuses
  ChecksumMismatch = 0x25,    // the program's CRC32 (compile --crc) does not match its bytes

  KernelMissing = 0x30,  // the op's kernel is not in this build
  ArenaTooSmall = 0x31,  // a memory region is smaller than the plan
  ArenaMismatch = 0x32,  // wrong number of regions, or misaligned
  VerifierMissing = 0x33,  // full verification asked of a TORCHMCU_VERIFY=0 build

  DelegateFailed = 0x40,  // a delegate's hardware failed, or did not start
};

#if TORCHMCU_STRIP_ERROR_STRINGS
constexpr const char* error_name(Error) { return ""; }
#else
constexpr const char* error_name(Error e) {
  switch (e) {
    case Error::Ok: return "Ok";
    case Error::Internal: return "Internal";
    case Error::InvalidArgument: return "InvalidArgument";
    case Error::InvalidProgram: return "InvalidProgram";
    case Error::UnsupportedVersion: return "UnsupportedVersion";
    case Error::MisalignedProgram: return "MisalignedProgram";
    case Error::InvalidTensor: return "InvalidTensor";
    case Error::InvalidOp: return "InvalidOp";
    case Error::ChecksumMismatch: return "ChecksumMismatch";
    case Error::KernelMissing: return "KernelMissing";
    case Error::ArenaTooSmall: return "ArenaTooSmall";
    case Error::ArenaMismatch: return "ArenaMismatch";
    case Error::VerifierMissing: return "VerifierMissing";
    case Error::DelegateFailed: return "DelegateFailed";
  }
  return "Unknown";
}
#endif

}  // namespace torchmcu

/// Returns the error of a fallible expression from the enclosing function.
#define TMCU_TRY(expr)                                    \
  do {                                                    \
    const ::torchmcu::Error tmcu_try_err_ = (expr);       \
    if (tmcu_try_err_ != ::torchmcu::Error::Ok) return tmcu_try_err_; \
  } while (0)

/// Returns `err` from the enclosing function unless `cond` holds.
#define TMCU_CHECK(cond, err)      \
  do {                             \
    if (!(cond)) return (err);     \
  } while (0)

#endif  // TORCHMCU_CORE_ERROR_H_
