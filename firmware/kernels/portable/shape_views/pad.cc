#include <cstring>

#include "kernels/portable/shape_views/shape_views.h"

namespace torchmcu {
namespace portable {

void pad(const void* in, const int32_t* in_dims, int32_t rank,
         const int32_t* before, const int32_t* after, const void* value,
         void* out, size_t elem_size) {
  size_t out_stride[kMaxRank];
  size_t total = 1;
  for (int32_t d = rank - 1; d >= 0; --d) {
    out_stride[d] = total;
    total *= size_t(before[d]) + size_t(in_dims[d]) + size_t(after[d]);
  }
  uint8_t* dst = static_cast<uint8_t*>(out);
  // Fill everything with the value, then copy the input's rows in place.
  for (size_t i = 0; i < total; ++i) std::memcpy(dst + i * elem_size, value, elem_size);
  size_t rows = 1;
  for (int32_t d = 0; d + 1 < rank; ++d) rows *= size_t(in_dims[d]);
  const size_t row_bytes = size_t(in_dims[rank - 1]) * elem_size;
  if (rows == 0 || row_bytes == 0) return;
  const uint8_t* src = static_cast<const uint8_t*>(in);
  int32_t idx[kMaxRank] = {};
  for (size_t r = 0; r < rows; ++r) {
    size_t off = size_t(before[rank - 1]);
    for (int32_t d = 0; d + 1 < rank; ++d) off += (size_t(idx[d]) + size_t(before[d])) * out_stride[d];
    std::memcpy(dst + off * elem_size, src + r * row_bytes, row_bytes);
    for (int32_t d = rank - 2; d >= 0; --d) {  // odometer over the outer dims
      if (++idx[d] < in_dims[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace portable
}  // namespace torchmcu
