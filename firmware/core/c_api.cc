// The C API's shared half: what every model's generated C API (NAME.cc,
// written by `torchmcu compile --symbol NAME`) and an application share.
// The codes and names of torchmcu/torchmcu.h are the runtime's own: checked
// here at compile time, so the two never drift apart.
#include "core/error.h"
#include "core/program_generated.h"
#include "torchmcu/torchmcu.h"

namespace torchmcu {
namespace {

using E = Error;
static_assert(TMCU_OK == uint32_t(E::Ok) && TMCU_ERROR_INTERNAL == uint32_t(E::Internal) &&
                  TMCU_ERROR_INVALID_ARGUMENT == uint32_t(E::InvalidArgument) &&
                  TMCU_ERROR_INVALID_PROGRAM == uint32_t(E::InvalidProgram) &&
                  TMCU_ERROR_UNSUPPORTED_VERSION == uint32_t(E::UnsupportedVersion) &&
                  TMCU_ERROR_MISALIGNED_PROGRAM == uint32_t(E::MisalignedProgram) &&
                  TMCU_ERROR_INVALID_TENSOR == uint32_t(E::InvalidTensor) &&
                  TMCU_ERROR_INVALID_OP == uint32_t(E::InvalidOp) &&
                  TMCU_ERROR_CHECKSUM_MISMATCH == uint32_t(E::ChecksumMismatch) &&
                  TMCU_ERROR_KERNEL_MISSING == uint32_t(E::KernelMissing) &&
                  TMCU_ERROR_ARENA_TOO_SMALL == uint32_t(E::ArenaTooSmall) &&
                  TMCU_ERROR_ARENA_MISMATCH == uint32_t(E::ArenaMismatch) &&
                  TMCU_ERROR_VERIFIER_MISSING == uint32_t(E::VerifierMissing) &&
                  TMCU_ERROR_DELEGATE_FAILED == uint32_t(E::DelegateFailed),
              "torchmcu/torchmcu.h's TMCU_ERROR_* mirror core/error.h");
static_assert(TMCU_DTYPE_FLOAT32 == uint32_t(schema::DType::F32) &&
                  TMCU_DTYPE_INT8 == uint32_t(schema::DType::I8) &&
                  TMCU_DTYPE_INT16 == uint32_t(schema::DType::I16) &&
                  TMCU_DTYPE_INT32 == uint32_t(schema::DType::I32),
              "torchmcu/torchmcu.h's TMCU_DTYPE_* mirror the schema's DType");

}  // namespace
}  // namespace torchmcu

extern "C" const char* tmcu_error_name(int err) {
  return torchmcu::error_name(torchmcu::Error(uint32_t(err)));
}
