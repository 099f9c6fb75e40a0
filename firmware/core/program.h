// Program: a verified, zero-copy view of a model.pte held in memory (usually
// a const array in flash). Nothing is copied: the view points into the
// caller's buffer, which must outlive it.
#ifndef TORCHMCU_CORE_PROGRAM_H_
#define TORCHMCU_CORE_PROGRAM_H_

#include <cstddef>
#include <cstdint>

#include "core/program_generated.h"
#include "core/result.h"

namespace torchmcu {

/// The format version this runtime reads (Program.version; 2: init copies
/// and the executable section).
constexpr uint32_t kProgramVersion = 2;

class Program {
 public:
  Program() = default;

  /// Checks the identifier, version and (unless TORCHMCU_VERIFY is 0) every
  /// offset and size of the fields the runtime reads (the arenas, the init
  /// copies, the executable section; not the tables only tools read), and
  /// that the constant segment lies inside `size`. `data` must be 16-byte
  /// aligned so constants, and the records read in place, are aligned too.
  static Result<Program> load(const void* data, size_t size);

  schema::Program root() const { return root_; }
  const uint8_t* constants() const { return constants_; }
  uint32_t constants_size() const { return constants_size_; }

 private:
  schema::Program root_;
  const uint8_t* constants_ = nullptr;
  uint32_t constants_size_ = 0;
};

}  // namespace torchmcu

#endif  // TORCHMCU_CORE_PROGRAM_H_
