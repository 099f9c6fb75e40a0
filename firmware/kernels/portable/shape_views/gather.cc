// GATHER: rows of a table by index (nn.Embedding's lookup), any dtype.
#include <cstring>

#include "kernels/portable/shape_views/shape_views.h"

namespace torchmcu {
namespace portable {

void gather(const void* table, int32_t rows, size_t row_bytes, const int32_t* ids, int32_t count, void* out) {
  const uint8_t* t = static_cast<const uint8_t*>(table);
  uint8_t* o = static_cast<uint8_t*>(out);
  for (int32_t i = 0; i < count; ++i, o += row_bytes) {
    const int32_t id = ids[i];
    if (id >= 0 && id < rows) {
      std::memcpy(o, t + size_t(id) * row_bytes, row_bytes);
    } else {
      std::memset(o, 0, row_bytes);
    }
  }
}

}  // namespace portable
}  // namespace torchmcu
