#include "kernels/portable/common/requantize.h"

namespace torchmcu {
namespace portable {

int32_t requantize(int32_t x, int32_t multiplier, int32_t shift) {
  return s8::requantize(x, multiplier, shift);
}

}  // namespace portable
}  // namespace torchmcu
