#include "kernels/fast/conv/linear_s8.h"
#include "kernels/portable/conv/conv.h"
#include "kernels/portable/common/requantize.h"

namespace torchmcu {
namespace portable {

// Two weight rows per pass over the input row, so each input value loaded
// feeds two multiply-accumulates.
void linear_s8(const int8_t* in, const int8_t* w, const int32_t* bias,
               const int32_t* multiplier, const int32_t* shift, int32_t num_requant, int8_t* out,
               int32_t batch, int32_t in_features, int32_t out_features, int32_t output_offset,
               int32_t act_min, int32_t act_max) {
#if TMCU_S8_FAST && TMCU_FAST_LINEAR
  if (fast::linear_s8(in, w, bias, multiplier, shift, num_requant, out, batch, in_features, out_features,
                      output_offset, act_min, act_max)) {
    return;
  }
#endif
  const s8::OutQuant quant(output_offset, act_min, act_max);
  const bool per_channel = num_requant == out_features;
  for (int32_t b = 0; b < batch; ++b) {
    const int8_t* x = in + b * in_features;
    const int8_t* const x_end = x + in_features;
    const int8_t* w0 = w;
    int32_t o = 0;
    for (; o + 2 <= out_features; o += 2) {
      const int8_t* w1 = w0 + in_features;
      int32_t acc0 = bias ? bias[o] : 0;
      int32_t acc1 = bias ? bias[o + 1] : 0;
      for (const int8_t* xp = x; xp != x_end; ++xp) {
        const int32_t xv = *xp;
        acc0 += xv * *w0++;
        acc1 += xv * *w1++;
      }
      const int32_t c0 = per_channel ? o : 0;
      const int32_t c1 = per_channel ? o + 1 : 0;
      out[o] = quant(s8::requantize(acc0, multiplier[c0], shift[c0]));
      out[o + 1] = quant(s8::requantize(acc1, multiplier[c1], shift[c1]));
      w0 = w1;
    }
    if (o < out_features) {
      int32_t acc = bias ? bias[o] : 0;
      for (const int8_t* xp = x; xp != x_end; ++xp) acc += *xp * *w0++;
      const int32_t c = per_channel ? o : 0;
      out[o] = quant(s8::requantize(acc, multiplier[c], shift[c]));
    }
    out += out_features;
  }
}

}  // namespace portable
}  // namespace torchmcu
