#include <cstring>

#include "kernels/portable/shape_views/shape_views.h"

namespace torchmcu {
namespace portable {

void concat(const void* const* inputs, const size_t* inner_bytes,
            int32_t num_inputs, int32_t outer, void* out) {
  uint8_t* dst = static_cast<uint8_t*>(out);
  for (int32_t r = 0; r < outer; ++r) {
    for (int32_t i = 0; i < num_inputs; ++i) {
      const size_t n = inner_bytes[i];
      std::memcpy(dst, static_cast<const uint8_t*>(inputs[i]) + r * n, n);
      dst += n;
    }
  }
}

}  // namespace portable
}  // namespace torchmcu
