#include "core/program.h"

#include "core/flatbuffer.h"

namespace torchmcu {

Result<Program> Program::load(const void* data, size_t size, Verification verification) {
  if (data == nullptr) return Error::InvalidArgument;
  if ((reinterpret_cast<uintptr_t>(data) & 15) != 0) return Error::MisalignedProgram;
  const auto* buf = static_cast<const uint8_t*>(data);
  if (size < 8 || size > 0x7fffffffu) return Error::InvalidProgram;
  if (fb::load<uint32_t>(buf + 4) != fb::load<uint32_t>(
                                         reinterpret_cast<const uint8_t*>(schema::kFileIdentifier))) {
    return Error::InvalidProgram;
  }
  Program p;
  p.verification_ = verification;
  if (verification == Verification::kFull) {
#if TORCHMCU_VERIFY
    fb::Verifier verifier(buf, size);
    p.root_ = verifier.root<schema::Program>(schema::kFileIdentifier);
    if (!verifier.table(p.root_)) return Error::InvalidProgram;
#else
    return Error::VerifierMissing;
#endif
  } else {
    // A trusted program: its tables are read as they are (the root offset
    // at least lands inside the buffer).
    const uint32_t root = fb::load<uint32_t>(buf);
    if (root > size - 4) return Error::InvalidProgram;
    p.root_ = schema::Program(buf + root);
  }
  if (p.root_.version() != kProgramVersion) return Error::UnsupportedVersion;
  const uint64_t seg = p.root_.constant_offset();
  const uint64_t seg_size = p.root_.constant_size();
  if ((seg & 15) != 0 || seg + seg_size > size) return Error::InvalidProgram;
  p.constants_ = buf + seg;
  p.constants_size_ = static_cast<uint32_t>(seg_size);
  return p;
}

}  // namespace torchmcu
