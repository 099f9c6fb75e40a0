#include "kernels/portable/reduce/reduce.h"

#include <cmath>
#include <limits>

#include "kernels/portable/activations/activations.h"
#include "kernels/portable/common/fixedpoint.h"
#include "kernels/portable/common/requantize.h"

namespace torchmcu {
namespace portable {
namespace {

using fp::add_wrap;
using fp::mul_sat;

// TFLite's log_x_for_x_greater_than_or_equal_to_1<5> of a Q12.19 value, as
// Q5.26: 2^z (the input's power of two, adjusted by a quarter) times log 2
// plus a rational approximation on the normalised mantissa r. gemmlowp's
// arithmetic: raw adds wrap, products are mul_sat, Rescale a rounding or
// saturating power of two.
int32_t log_q5(int32_t x) {
  constexpr int32_t kLog2 = 1488522236, kSqrtSqrtHalf = 1805811301, kSqrtHalf = 1518500250;
  constexpr int32_t kAlphaN = 117049297, kAlphaD = 127690142, kAlphaI = 1057819769, kAlphaF = 638450708;
  constexpr int32_t kInputBits = 12, kAccumShift = 25;  // Q6.25 accumulator: 31 - (5 + 1)
  const int32_t quarter = fp::div_pow2(536870912, 6);
  const int32_t hp1 = fp::clz32(uint32_t(x));
  const int32_t r_a = fp::mul_pow2(mul_sat(fp::mul_pow2(x, hp1 - 1), kSqrtHalf), 1);
  const int32_t pow_a = fp::sat32(int64_t(fp::mul_pow2(kInputBits - hp1, kAccumShift)) + quarter);
  const int32_t hb = fp::clz32(uint32_t(mul_sat(x, kSqrtHalf))) - 1;
  const int32_t r_b = fp::mul_pow2(x, hb);
  const int32_t pow_b = fp::sat32(int64_t(fp::mul_pow2(kInputBits - hb, kAccumShift)) - quarter);
  const int32_t r = r_a < r_b ? r_a : r_b;
  const int32_t z_pow = pow_a > pow_b ? pow_a : pow_b;
  const int64_t s = int64_t(r) + kSqrtSqrtHalf;  // RoundingHalfSum
  const int32_t p = static_cast<int32_t>((s + (s >= 0 ? 1 : -1)) / 2);
  int32_t q = add_wrap(r, -kSqrtSqrtHalf);
  q = add_wrap(q, q);
  const int32_t sq = mul_sat(q, q);
  const int32_t num = add_wrap(mul_sat(q, r), mul_sat(mul_sat(q, sq), kAlphaN));
  const int32_t den =
      add_wrap(mul_sat(p, add_wrap(add_wrap(kAlphaI, q), mul_sat(kAlphaD, sq))), mul_sat(kAlphaF, q));
  const int32_t acc = add_wrap(mul_sat(z_pow, kLog2), mul_sat(fp::div_pow2(num, 6), fp::one_over_one_plus_x(den)));
  return fp::mul_pow2(acc, 1);
}

// Per output of a reduction: the input offsets of its reduced elements are
// an odometer over the reduced axes; the outputs step through the kept ones.
struct Axes {
  int32_t n = 0;
  int32_t extent[kMaxRank];
  int64_t stride[kMaxRank];
};

template <typename T>
void mean_q(const T* in, const int32_t* dims, int32_t rank, uint32_t axis_mask, const QuantMeanParams& p,
            T* out) {
  Axes kept, red;
  int64_t stride = 1, count = 1;
  for (int32_t d = rank - 1; d >= 0; --d) {
    Axes& a = (axis_mask >> d) & 1u ? red : kept;
    if ((axis_mask >> d) & 1u) count *= dims[d];
    if (dims[d] != 1) {  // index 0 innermost
      a.extent[a.n] = dims[d];
      a.stride[a.n] = stride;
      ++a.n;
    }
    stride *= dims[d];
  }
  const int32_t zero = static_cast<int32_t>(count * p.input_zero_point);
  const int32_t olo = p.act_min - p.output_zero_point, ohi = p.act_max - p.output_zero_point;
  int32_t ki[kMaxRank] = {};
  int64_t base = 0;
  for (;;) {
    int32_t sum = 0;
    int32_t ri[kMaxRank] = {};
    int64_t off = base;
    for (;;) {
      sum += in[off];
      int32_t d = 0;
      for (; d < red.n; ++d) {
        off += red.stride[d];
        if (++ri[d] < red.extent[d]) break;
        ri[d] = 0;
        off -= red.stride[d] * red.extent[d];
      }
      if (d == red.n) break;
    }
    int32_t v = s8::requantize(sum - zero, p.multiplier, p.shift);
    v = v < olo ? olo : v > ohi ? ohi : v;
    *out++ = static_cast<T>(v + p.output_zero_point);
    int32_t d = 0;
    for (; d < kept.n; ++d) {
      base += kept.stride[d];
      if (++ki[d] < kept.extent[d]) break;
      ki[d] = 0;
      base -= kept.stride[d] * kept.extent[d];
    }
    if (d == kept.n) break;
  }
}

}  // namespace

void log_softmax_f32(const float* in, float* out, int32_t outer, int32_t axis, int32_t inner) {
  const size_t step = static_cast<size_t>(inner);
  const size_t span = step * static_cast<size_t>(axis);
  for (int32_t o = 0; o < outer; ++o, in += span, out += span) {
    for (int32_t i = 0; i < inner; ++i) {
      const float* x = in + i;
      float m = -std::numeric_limits<float>::infinity();
      for (size_t k = 0; k < span; k += step) m = x[k] > m ? x[k] : m;
      float sum = 0.0f;
      for (size_t k = 0; k < span; k += step) sum += expf(x[k] - m);
      const float shift = m + logf(sum);
      for (size_t k = 0; k < span; k += step) out[i + k] = x[k] - shift;
    }
  }
}

void log_softmax_s8(const int8_t* in, int32_t rows, int32_t cols, const QuantLogSoftmaxParams& p,
                    int8_t* out) {
  for (int32_t r = 0; r < rows; ++r, in += cols, out += cols) {
    int32_t max = in[0];
    for (int32_t c = 1; c < cols; ++c) max = in[c] > max ? in[c] : max;
    int32_t sum = 0;  // Q12.19: fewer than 2^12 terms of at most 2^19
    for (int32_t c = 0; c < cols; ++c) {
      const int32_t diff = in[c] - max;
      if (diff >= p.diff_min) {
        const int32_t scaled = s8::requantize(diff, p.input_multiplier, p.input_left_shift);
        sum += fp::div_pow2(fp::exp_on_negative_values(scaled), 12);
      }
    }
    const int32_t log_sum = log_q5(sum);
    const int32_t limit = s8::requantize(add_wrap(log_sum, INT32_MIN), p.reverse_scaling_divisor,
                                         -p.reverse_scaling_right_shift);
    const int32_t adjusted = p.diff_min - 1 > limit ? p.diff_min - 1 : limit;
    for (int32_t c = 0; c < cols; ++c) {
      const int32_t diff = in[c] - max;
      int32_t v = -128;
      if (diff > adjusted) {
        const int32_t scaled = s8::requantize(diff, p.input_multiplier, p.input_left_shift);
        v = fp::div_pow2(add_wrap(scaled, -log_sum), 22) + 127;
        v = v < -128 ? -128 : v > 127 ? 127 : v;
      }
      out[c] = static_cast<int8_t>(v);
    }
  }
}

void mean_s8(const int8_t* in, const int32_t* dims, int32_t rank, uint32_t axis_mask,
             const QuantMeanParams& p, int8_t* out) {
  mean_q(in, dims, rank, axis_mask, p, out);
}

void mean_s16(const int16_t* in, const int32_t* dims, int32_t rank, uint32_t axis_mask,
              const QuantMeanParams& p, int16_t* out) {
  mean_q(in, dims, rank, axis_mask, p, out);
}

// softmax_s16's steps (below) over the unmasked entries.
namespace {

// The int16 softmax of softmax_s16 and, kMasked, of softmax_rows_s16 (the
// masked entries out of the max and the sum, and 0 in the output).
template <bool kMasked>
void softmax_s16_rows(const int16_t* in, int32_t rows, int32_t cols, int32_t multiplier, int32_t shift,
                      const int16_t* exp_lut, const int16_t* one_lut, const uint8_t* mask, int32_t mask_rows,
                      int16_t* out) {
  for (int32_t r = 0; r < rows; ++r, in += cols, out += cols) {
    const uint8_t* m = kMasked ? mask + int64_t(r % mask_rows) * cols : nullptr;
    int32_t max = kMasked ? -32768 : in[0];
    for (int32_t c = kMasked ? 0 : 1; c < cols; ++c) {
      if ((!kMasked || !m[c]) && in[c] > max) max = in[c];
    }
    int32_t sum = 0;  // |e| <= 2^15, at most 2^15 columns
    for (int32_t c = 0; c < cols; ++c) {
      int32_t v = s8::requantize(in[c] - max, multiplier, shift) + 32767;
      v = v < -32768 ? -32768 : v > 32767 ? 32767 : v;
      out[c] = kMasked && m[c] ? 0 : lut16(v, exp_lut);
      sum += out[c];
    }
    int32_t head = fp::clz32(static_cast<uint32_t>(sum));
    head = head < 1 ? 1 : head > 31 ? 31 : head;
    const int64_t shifted = (int64_t(sum) * (int64_t{1} << (head - 1)) + (1 << 13)) >> 14;
    int64_t sym = shifted - 98304;
    sym = sym < -32768 ? -32768 : sym > 32767 ? 32767 : sym;
    const int32_t recip = lut16(int32_t(sym), one_lut);
    const int32_t right = 31 - head;
    const int64_t rounding = right > 0 ? int64_t{1} << (right - 1) : 0;
    for (int32_t c = 0; c < cols; ++c) {
      int64_t v = (int64_t(out[c]) * recip + rounding) >> right;
      v = v < 0 ? 0 : v > 32767 ? 32767 : v;
      out[c] = static_cast<int16_t>(v);
    }
  }
}

}  // namespace

void softmax_rows_s16(const int16_t* in, int32_t rows, int32_t cols, int32_t multiplier, int32_t shift,
                      const int16_t* exp_lut, const int16_t* one_lut, const uint8_t* mask, int32_t mask_rows,
                      int16_t* out) {
  softmax_s16_rows<true>(in, rows, cols, multiplier, shift, exp_lut, one_lut, mask, mask_rows, out);
}

// The exp values are cached in the output row (as TFLM does), then scaled in place.
void softmax_s16(const int16_t* in, int32_t rows, int32_t cols, int32_t multiplier, int32_t shift,
                 const int16_t* exp_lut, const int16_t* one_lut, int16_t* out) {
  softmax_s16_rows<false>(in, rows, cols, multiplier, shift, exp_lut, one_lut, nullptr, 1, out);
}

}  // namespace portable
}  // namespace torchmcu
