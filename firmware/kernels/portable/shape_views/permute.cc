#include <cstring>

#include "kernels/portable/shape_views/shape_views.h"

namespace torchmcu {
namespace portable {
namespace {

// Strided gather of one output row. The element size is a template constant
// for the common dtypes so memcpy becomes a single load/store pair.
template <size_t N>
inline void gather(const uint8_t* src, size_t src_step, uint8_t* dst,
                   int32_t count) {
  for (int32_t i = 0; i < count; ++i, src += src_step, dst += N) {
    std::memcpy(dst, src, N);
  }
}

inline void gather_any(const uint8_t* src, size_t src_step, uint8_t* dst,
                       int32_t count, size_t elem) {
  for (int32_t i = 0; i < count; ++i, src += src_step, dst += elem) {
    std::memcpy(dst, src, elem);
  }
}

}  // namespace

void permute(const void* in, const int32_t* in_dims, int32_t rank,
             const int32_t* perm, void* out, size_t elem_size) {
  size_t in_stride[kMaxRank];  // bytes
  size_t s = elem_size;
  for (int32_t d = rank - 1; d >= 0; --d) {
    in_stride[d] = s;
    s *= static_cast<size_t>(in_dims[d]);
  }
  // Output axes, innermost first, with their input byte strides. Size-1
  // axes vanish and an axis that continues its inner neighbour in input
  // memory merges with it, so a permute that keeps runs of axes together
  // copies whole runs.
  int32_t n[kMaxRank];
  size_t st[kMaxRank];
  int32_t r = 0;
  for (int32_t d = rank - 1; d >= 0; --d) {
    const int32_t e = in_dims[perm[d]];
    if (e == 1) continue;
    const size_t stride = in_stride[perm[d]];
    if (r > 0 && stride == st[r - 1] * static_cast<size_t>(n[r - 1])) {
      n[r - 1] *= e;
    } else {
      n[r] = e;
      st[r] = stride;
      ++r;
    }
  }
  const uint8_t* src = static_cast<const uint8_t*>(in);
  uint8_t* dst = static_cast<uint8_t*>(out);
  if (r == 0) {
    std::memcpy(dst, src, elem_size);
    return;
  }

  const int32_t inner = n[0];
  const size_t step = st[0];
  const size_t row_bytes = static_cast<size_t>(inner) * elem_size;
  int32_t idx[kMaxRank] = {};
  for (;;) {
    if (step == elem_size) {
      std::memcpy(dst, src, row_bytes);
    } else if (elem_size == 4) {
      gather<4>(src, step, dst, inner);
    } else if (elem_size == 1) {
      gather<1>(src, step, dst, inner);
    } else if (elem_size == 2) {
      gather<2>(src, step, dst, inner);
    } else {
      gather_any(src, step, dst, inner, elem_size);
    }
    dst += row_bytes;
    int32_t d = 1;
    for (; d < r; ++d) {
      src += st[d];
      if (++idx[d] < n[d]) break;
      idx[d] = 0;
      src -= st[d] * static_cast<size_t>(n[d]);
    }
    if (d == r) return;
  }
}

}  // namespace portable
}  // namespace torchmcu
