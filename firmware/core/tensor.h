// TensorView: what a kernel sees of one operand. Built by the executor from
// the program for each op; borrowed, never owning.
#ifndef TORCHMCU_CORE_TENSOR_H_
#define TORCHMCU_CORE_TENSOR_H_

#include <cstddef>
#include <cstdint>

#include "core/program_generated.h"

namespace torchmcu {

constexpr int32_t kMaxRank = 6;

/// Bytes per element of a dtype; 0 for an unknown value.
constexpr uint32_t dtype_size(schema::DType t) {
  switch (t) {
    case schema::DType::F32: return 4;
    case schema::DType::I8: return 1;
    case schema::DType::I16: return 2;
    case schema::DType::I32: return 4;
    case schema::DType::U8: return 1;
  }
  return 0;
}

struct TensorView {
  /// Null for an absent optional operand (e.g. a conv without bias).
  void* data = nullptr;
  schema::DType dtype = schema::DType::F32;
  int32_t rank = 0;
  int32_t dims[kMaxRank] = {};
  uint32_t nbytes = 0;
  float scale = 0.0f;
  int32_t zero_point = 0;
  /// In the constant segment: read-only, and the same at run time as when
  /// load() checked its values (kernels that validate values, such as
  /// requantization shifts, require their operand to be constant).
  bool constant = false;

  bool present() const { return data != nullptr; }
  uint32_t numel() const { return nbytes / dtype_size(dtype); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

}  // namespace torchmcu

#endif  // TORCHMCU_CORE_TENSOR_H_
