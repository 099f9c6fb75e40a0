#include <cmath>

#include "kernels/portable/elementwise/elementwise.h"

namespace torchmcu {
namespace portable {

void quantize_f32_s8(const float* in, int8_t* out, size_t n, float scale, int32_t zero_point) {
  // Clamp before the conversion so every float has a defined result: values
  // beyond the int8 range saturate, NaN gives -128.
  const float lo = static_cast<float>(-128 - zero_point);
  const float hi = static_cast<float>(127 - zero_point);
  for (size_t i = 0; i < n; ++i) {
    const float r = std::round(in[i] / scale);
    int32_t q;
    if (!(r >= lo)) {
      q = -128;
    } else if (r > hi) {
      q = 127;
    } else {
      q = static_cast<int32_t>(r) + zero_point;
    }
    out[i] = static_cast<int8_t>(q);
  }
}

void dequantize_s8_f32(const int8_t* in, float* out, size_t n, float scale, int32_t zero_point) {
  for (size_t i = 0; i < n; ++i) {
    out[i] = static_cast<float>(in[i] - zero_point) * scale;
  }
}

void clamp_s8(const int8_t* in, int8_t* out, size_t n, int32_t lo, int32_t hi) {
  for (size_t i = 0; i < n; ++i) {
    int32_t v = in[i];
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    out[i] = static_cast<int8_t>(v);
  }
}

void lut_s8(const int8_t* in, int8_t* out, size_t n, const int8_t* table) {
  const int8_t* centre = table + 128;
  for (size_t i = 0; i < n; ++i) out[i] = centre[in[i]];
}

void quantize_f32_s16(const float* in, int16_t* out, size_t n, float scale, int32_t zero_point) {
  const float lo = static_cast<float>(-32768 - zero_point);
  const float hi = static_cast<float>(32767 - zero_point);
  for (size_t i = 0; i < n; ++i) {
    const float r = std::round(in[i] / scale);
    int32_t q;
    if (!(r >= lo)) {
      q = -32768;
    } else if (r > hi) {
      q = 32767;
    } else {
      q = static_cast<int32_t>(r) + zero_point;
    }
    out[i] = static_cast<int16_t>(q);
  }
}

void dequantize_s16_f32(const int16_t* in, float* out, size_t n, float scale, int32_t zero_point) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i] - zero_point) * scale;
}

}  // namespace portable
}  // namespace torchmcu
