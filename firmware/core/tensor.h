// TensorView: a model input or output as the application sees it
// (Method::input, Method::output). Borrowed, never owning.
#ifndef TORCHMCU_CORE_TENSOR_H_
#define TORCHMCU_CORE_TENSOR_H_

#include <cstddef>
#include <cstdint>

#include "core/program_generated.h"

namespace torchmcu {

constexpr int32_t kMaxRank = 6;

/// Bytes per element of each dtype, by schema::DType value. I4 (packed, two
/// elements a byte) counts 1: its alignment; the kernels that take I4
/// operands size them as ceil(elements / 2) bytes themselves.
constexpr uint8_t kDTypeBytes[schema::kNumDType] = {4, 1, 2, 4, 1, 1, 8};
static_assert(uint32_t(schema::DType::F32) == 0 && uint32_t(schema::DType::I4) == 5 &&
                  uint32_t(schema::DType::I64) == 6,
              "kDTypeBytes order");

/// Bytes per element of a dtype; 0 for an unknown value.
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
constexpr uint32_t dtype_size(schema::DType t) {
  return uint32_t(t) < schema::kNumDType ? kDTypeBytes[uint32_t(t)] : 0;
}

struct TensorView {
  /// Null for no tensor (an index out of range).
  void* data = nullptr;
  schema::DType dtype = schema::DType::F32;
  int32_t rank = 0;
  int32_t dims[kMaxRank] = {};
  uint32_t nbytes = 0;
  /// Affine quantization of int8 tensors: real = scale * (q - zero_point).
  float scale = 0.0f;
  int32_t zero_point = 0;

  bool present() const { return data != nullptr; }
  uint32_t numel() const { return nbytes / dtype_size(dtype); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

}  // namespace torchmcu

#endif  // TORCHMCU_CORE_TENSOR_H_
