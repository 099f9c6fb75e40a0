// The a16w8 portable kernels as the executor sees them: load-time checks of
// operands and arguments, run functions handing the arguments to the integer
// math of portable_s16.h, and that header's element-wise, pool and
// quantize math. Each Kernel is its own const object (unused ones are never
// linked).
//
// Tensor values (biases, multipliers, shifts) are data: no check reads them,
// and the math is defined for any of them (portable_s16.h). Zero points of
// int16 tensors are 0: the checks refuse any other offset.
#include <cmath>

#include "kernels/check.h"
#include "kernels/portable/broadcast.h"
#include "kernels/portable/kernels.h"
#include "kernels/portable/portable_s16.h"
#include "kernels/portable/requantize_s8.h"

namespace torchmcu {
namespace portable {

// ---- math: element-wise, pools, quantize --------------------------------------

namespace {

inline int16_t clamp16(int32_t v, int32_t lo, int32_t hi) {
  v = v < lo ? lo : v;
  v = v > hi ? hi : v;
  return static_cast<int16_t>(v);
}

struct AddS16 {
  QuantAddParams p;
  explicit AddS16(const QuantAddParams& params) : p(params) {}
  int32_t lhs(int16_t a) const {
    return s8::requantize((a + p.input1_offset) * (1 << p.left_shift), p.input1_multiplier,
                          p.input1_shift);
  }
  int32_t rhs(int16_t b) const {
    return s8::requantize((b + p.input2_offset) * (1 << p.left_shift), p.input2_multiplier,
                          p.input2_shift);
  }
  int16_t combine(int32_t a, int32_t b) const {
    return clamp16(s8::requantize(a + b, p.output_multiplier, p.output_shift) + p.output_offset,
                   p.act_min, p.act_max);
  }
};

struct MulS16 {
  QuantMulParams p;
  explicit MulS16(const QuantMulParams& params) : p(params) {}
  int32_t lhs(int16_t a) const { return a + p.input1_offset; }
  int32_t rhs(int16_t b) const { return b + p.input2_offset; }
  int16_t combine(int32_t a, int32_t b) const {
    return clamp16(s8::requantize(a * b, p.output_multiplier, p.output_shift) + p.output_offset,
                   p.act_min, p.act_max);
  }
};

// One pool over the in-bounds taps of every output pixel: Max keeps the
// largest value, Avg the int32 sum (rounded division at the end).
template <bool kMax>
void pool2d_s16(const int16_t* in, Shape4 in_shape, int16_t* out, Shape4 out_shape,
                const QuantPoolParams& p, const PoolOptions& o) {
  const int32_t c_n = in_shape.c;
  const int32_t row_stride = in_shape.w * c_n;
  const int32_t dil_h = kMax ? o.dilation_h : 1, dil_w = kMax ? o.dilation_w : 1;
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const int16_t* in_n = in + int64_t(n) * in_shape.h * row_stride;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      const int32_t iy0 = oy * p.stride_h - p.pad_top;
      int32_t ky0, ky1;
      s8::tap_range(iy0, in_shape.h, p.kernel_h, dil_h, &ky0, &ky1);
      for (int32_t ox = 0; ox < out_shape.w; ++ox) {
        const int32_t ix0 = ox * p.stride_w - p.pad_left;
        int32_t kx0, kx1;
        s8::tap_range(ix0, in_shape.w, p.kernel_w, dil_w, &kx0, &kx1);
        const int32_t count = (ky1 - ky0) * (kx1 - kx0);
        const int32_t divisor = pool_divisor(p, o, in_shape, iy0, ix0, count);
        for (int32_t c = 0; c < c_n; ++c) {
          // max: starting at act_min folds in the lower clamp; avg: the taps the divisor adds hold the zero point
          int32_t acc = kMax ? p.act_min : (count > 0 ? (divisor - count) * o.zero_point : 0);
          for (int32_t ky = ky0; ky < ky1; ++ky) {
            const int16_t* x = in_n + (iy0 + ky * dil_h) * row_stride + (ix0 + kx0 * dil_w) * c_n + c;
            for (int32_t kx = kx0; kx < kx1; ++kx, x += dil_w * c_n) {
              if (kMax) {
                acc = *x > acc ? *x : acc;
              } else {
                acc += *x;  // at most 2^16 taps (checked) of |x| <= 2^15: fits int32
              }
            }
          }
          if (!kMax) {
            const int32_t half = divisor / 2;
            acc = (acc > 0 ? acc + half : acc - half) / divisor;
          }
          *out++ = clamp16(acc, p.act_min, p.act_max);
        }
      }
    }
  }
}

}  // namespace

void add_s16(const int16_t* a, const int32_t* a_dims, const int16_t* b, const int32_t* b_dims,
             int16_t* out, const int32_t* out_dims, int32_t rank, const QuantAddParams& p) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, AddS16(p));
}

void mul_s16(const int16_t* a, const int32_t* a_dims, const int16_t* b, const int32_t* b_dims,
             int16_t* out, const int32_t* out_dims, int32_t rank, const QuantMulParams& p) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, MulS16(p));
}

void max_pool2d_s16(const int16_t* in, Shape4 in_shape, int16_t* out, Shape4 out_shape,
                    const QuantPoolParams& p, const PoolOptions& o) {
  pool2d_s16<true>(in, in_shape, out, out_shape, p, o);
}

void avg_pool2d_s16(const int16_t* in, Shape4 in_shape, int16_t* out, Shape4 out_shape,
                    const QuantPoolParams& p, const PoolOptions& o) {
  pool2d_s16<false>(in, in_shape, out, out_shape, p, o);
}

namespace {

// TFLite's generic_int16_table_lookup: 513 entries, v in [-32768, 32767].
inline int16_t lut16(int32_t v, const int16_t* lut) {
  const int32_t index = 256 + (v >> 7);
  const int16_t base = lut[index];
  const int16_t slope = static_cast<int16_t>(lut[index + 1] - base);
  const int32_t delta = (slope * (v & 0x7f) + 64) >> 7;
  return static_cast<int16_t>(base + delta);
}

inline int32_t leading_zeros(uint32_t v) {
  int32_t n = 0;
  for (uint32_t bit = 0x80000000u; bit != 0 && (v & bit) == 0; bit >>= 1) ++n;
  return n;
}

}  // namespace

// The exp values are cached in the output row (as TFLM does), then scaled in place.
void softmax_s16(const int16_t* in, int32_t rows, int32_t cols, int32_t multiplier, int32_t shift,
                 const int16_t* exp_lut, const int16_t* one_lut, int16_t* out) {
  for (int32_t r = 0; r < rows; ++r, in += cols, out += cols) {
    int32_t max = in[0];
    for (int32_t c = 1; c < cols; ++c) max = in[c] > max ? in[c] : max;
    int32_t sum = 0;  // |e| <= 2^15, at most 2^15 columns
    for (int32_t c = 0; c < cols; ++c) {
      int32_t v = s8::requantize(in[c] - max, multiplier, shift) + 32767;
      v = v < -32768 ? -32768 : v > 32767 ? 32767 : v;
      out[c] = lut16(v, exp_lut);
      sum += out[c];
    }
    int32_t head = leading_zeros(static_cast<uint32_t>(sum));
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

// ---- checks and runs -------------------------------------------------------------

namespace {

using schema::DType;
using schema::OpParams;
using schema::Operand;

TMCU_INLINE Shape4 shape4(const int32_t* d) { return Shape4{d[0], d[1], d[2], d[3]}; }
TMCU_INLINE bool s16(const Operand& o) { return check::is(o, DType::I16); }
TMCU_INLINE bool s16_nhwc(const Operand& o) { return check::is(o, DType::I16, 4); }
TMCU_INLINE bool act16_ok(int32_t lo, int32_t hi) { return -32768 <= lo && lo <= hi && hi <= 32767; }
TMCU_INLINE bool shift_ok(int32_t s) { return s >= -31 && s <= 30; }

// conv / depthwise / linear: x, w, bias (i64), multiplier, shift [, scratch (i16, any size)].
TMCU_INLINE bool operand_count_ok(const OpContext& ctx) {
  if (ctx.num_outputs() != 1) return false;
  if (ctx.num_inputs() == 5) return true;
  return ctx.num_inputs() == 6 && s16(ctx.input(5));
}

Error conv_check_common(const OpContext& ctx, int32_t out_channels) {
  TMCU_CHECK(operand_count_ok(ctx) &&
                 check::args<schema::QuantConv2dArgs>(ctx, OpParams::QuantConv2dParams) &&
                 check::is(ctx.input(1), DType::I8, 4),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  TMCU_TRY(check::holds4(ctx.input(1), a.w));
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(s16_nhwc(x) && s16_nhwc(y), Error::InvalidOp);
  TMCU_TRY(check::holds4(x, a.x));
  TMCU_TRY(check::holds4(y, a.y));
  TMCU_CHECK(a.x[0] == a.y[0] && a.y[3] == out_channels, Error::InvalidOp);
  TMCU_CHECK(check::small(a.stride_h, 1) && check::small(a.stride_w, 1) &&
                 check::small(a.dilation_h, 1) && check::small(a.dilation_w, 1) &&
                 check::small(a.pad_top, 0) && check::small(a.pad_left, 0),
             Error::InvalidOp);
  TMCU_CHECK(check::window_padded(a.x[1], a.y[1], a.w[1], a.stride_h, a.pad_top, a.dilation_h) &&
                 check::window_padded(a.x[2], a.y[2], a.w[2], a.stride_w, a.pad_left, a.dilation_w),
             Error::InvalidOp);
  TMCU_CHECK(a.input_offset == 0 && a.output_offset == 0 && act16_ok(a.act_min, a.act_max),
             Error::InvalidOp);
  TMCU_CHECK(check::vector(ctx.input(2), DType::I64, out_channels) &&
                 check::vector(ctx.input(3), DType::I32, out_channels) &&
                 check::vector(ctx.input(4), DType::I32, out_channels),
             Error::InvalidOp);
  return Error::Ok;
}

QuantConvS16Params conv_params(const schema::QuantConv2dArgs& a) {
  return QuantConvS16Params{a.stride_h,   a.stride_w,   a.pad_top, a.pad_left,
                            a.dilation_h, a.dilation_w, a.act_min, a.act_max};
}

Error conv2d_check(const OpContext& ctx) {
  TMCU_CHECK(check::args<schema::QuantConv2dArgs>(ctx, OpParams::QuantConv2dParams), Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  TMCU_TRY(conv_check_common(ctx, a.w[0]));
  // Grouped when w has fewer input channels than x (groups = their ratio).
  TMCU_CHECK(a.w[3] >= 1 && a.x[3] >= a.w[3] && a.x[3] % a.w[3] == 0 && a.w[0] % (a.x[3] / a.w[3]) == 0,
             Error::InvalidOp);
  return Error::Ok;
}

void conv2d_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  grouped_conv2d_s16(ctx.in<const int16_t>(0), shape4(a.x), ctx.in<const int8_t>(1), a.w[1], a.w[2], a.w[3],
                     ctx.in<const int64_t>(2), ctx.in<const int32_t>(3), ctx.in<const int32_t>(4),
             ctx.out<int16_t>(0), shape4(a.y), conv_params(a));
}

Error depthwise_check(const OpContext& ctx) {
  TMCU_CHECK(check::args<schema::QuantConv2dArgs>(ctx, OpParams::QuantConv2dParams), Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  TMCU_TRY(conv_check_common(ctx, a.w[3]));
  TMCU_CHECK(a.w[0] == 1 && a.multiplier >= 1 && int64_t(a.x[3]) * a.multiplier == a.w[3],
             Error::InvalidOp);
  return Error::Ok;
}

void depthwise_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  depthwise_conv2d_s16(ctx.in<const int16_t>(0), shape4(a.x), ctx.in<const int8_t>(1), a.w[1],
                       a.w[2], a.multiplier, ctx.in<const int64_t>(2), ctx.in<const int32_t>(3),
                       ctx.in<const int32_t>(4), ctx.out<int16_t>(0), shape4(a.y), conv_params(a));
}

Error linear_check(const OpContext& ctx) {
  TMCU_CHECK(operand_count_ok(ctx) &&
                 check::args<schema::QuantLinearArgs>(ctx, OpParams::QuantLinearParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantLinearArgs>();
  TMCU_CHECK(a.input_offset == 0 && a.output_offset == 0 && act16_ok(a.act_min, a.act_max),
             Error::InvalidOp);
  const Operand& x = ctx.input(0);
  const Operand& w = ctx.input(1);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(s16(x) && x.rank >= 1 && s16(y) && y.rank == x.rank && check::is(w, DType::I8, 2),
             Error::InvalidOp);
  TMCU_TRY(check::holds(x, a.x_rows, a.x_cols));
  TMCU_TRY(check::holds(w, a.w));
  TMCU_TRY(check::holds(y, a.y_rows, a.y_cols));
  TMCU_CHECK(a.x_cols == a.w[1] && a.y_cols == a.w[0] && a.x_rows == a.y_rows, Error::InvalidOp);
  TMCU_CHECK(check::vector(ctx.input(2), DType::I64, a.w[0]), Error::InvalidOp);
  const Operand& mult = ctx.input(3);
  const int32_t n = int32_t(mult.nbytes / 4);
  TMCU_CHECK((n == 1 || n == a.w[0]) && check::vector(mult, DType::I32, n) &&
                 check::vector(ctx.input(4), DType::I32, n),
             Error::InvalidOp);
  return Error::Ok;
}

void linear_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantLinearArgs>();
  linear_s16(ctx.in<const int16_t>(0), ctx.in<const int8_t>(1), ctx.in<const int64_t>(2),
             ctx.in<const int32_t>(3), ctx.in<const int32_t>(4), int32_t(ctx.input(3).nbytes / 4),
             ctx.out<int16_t>(0), a.x_rows, a.w[1], a.w[0], a.act_min, a.act_max);
}

template <typename A>
Error binary_shapes_check(const OpContext& ctx) {
  const A& s = ctx.args<A>();
  const Operand& a = ctx.input(0);
  const Operand& b = ctx.input(1);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(s16(a) && s16(b) && s16(y), Error::InvalidOp);
  TMCU_TRY(check::holds(a, s.a));
  TMCU_TRY(check::holds(b, s.b));
  TMCU_TRY(check::holds(y, s.y));
  TMCU_CHECK(check::broadcastable(a, s.a, b, s.b, y, s.y), Error::InvalidOp);
  return Error::Ok;
}

Error add_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 2, 1) &&
                 check::args<schema::QuantAddArgs>(ctx, OpParams::QuantAddParams),
             Error::InvalidOp);
  TMCU_TRY(binary_shapes_check<schema::QuantAddArgs>(ctx));
  const auto& p = ctx.args<schema::QuantAddArgs>();
  // |x| <= 2^15 shifted left by at most 15 stays below 2^31; input
  // multipliers < 1 keep each rescaled input below 2^30, so the sum fits.
  TMCU_CHECK(act16_ok(p.act_min, p.act_max) && p.left_shift >= 0 && p.left_shift <= 15 &&
                 shift_ok(p.output_shift) && p.input1_shift >= -31 && p.input1_shift <= 0 &&
                 p.input1_multiplier >= 0 && p.input2_shift >= -31 && p.input2_shift <= 0 &&
                 p.input2_multiplier >= 0 && p.output_multiplier >= 0 && p.input1_offset == 0 &&
                 p.input2_offset == 0 && p.output_offset == 0,
             Error::InvalidOp);
  return Error::Ok;
}

void add_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::QuantAddArgs>();
  const QuantAddParams q{p.input1_offset, p.input1_multiplier, p.input1_shift,
                         p.input2_offset, p.input2_multiplier, p.input2_shift,
                         p.left_shift,    p.output_multiplier, p.output_shift,
                         p.output_offset, p.act_min,           p.act_max};
  add_s16(ctx.in<const int16_t>(0), p.a, ctx.in<const int16_t>(1), p.b, ctx.out<int16_t>(0), p.y,
          int32_t(ctx.output(0).rank), q);
}

Error mul_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 2, 1) &&
                 check::args<schema::QuantMulArgs>(ctx, OpParams::QuantMulParams),
             Error::InvalidOp);
  TMCU_TRY(binary_shapes_check<schema::QuantMulArgs>(ctx));
  const auto& p = ctx.args<schema::QuantMulArgs>();
  // |a * b| <= 2^30 with zero offsets.
  TMCU_CHECK(act16_ok(p.act_min, p.act_max) && shift_ok(p.output_shift) && p.output_multiplier >= 0 &&
                 p.input1_offset == 0 && p.input2_offset == 0 && p.output_offset == 0,
             Error::InvalidOp);
  return Error::Ok;
}

void mul_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::QuantMulArgs>();
  const QuantMulParams q{p.input1_offset, p.input2_offset, p.output_multiplier, p.output_shift,
                         p.output_offset, p.act_min,       p.act_max};
  mul_s16(ctx.in<const int16_t>(0), p.a, ctx.in<const int16_t>(1), p.b, ctx.out<int16_t>(0), p.y,
          int32_t(ctx.output(0).rank), q);
}

// Windows of more than 2^16 taps could overflow the int32 sum of int16 values.
template <bool kMax>
Error pool_check(const OpContext& ctx) {
  TMCU_TRY(check::quant_pool(ctx, DType::I16, 65536, kMax));
  const auto& a = ctx.args<schema::QuantPool2dArgs>();
  return act16_ok(a.act_min, a.act_max) ? Error::Ok : Error::InvalidOp;
}

QuantPoolParams pool_params(const schema::QuantPool2dArgs& a) {
  return QuantPoolParams{a.kernel_h, a.kernel_w, a.stride_h, a.stride_w,
                         a.pad_top,  a.pad_left, a.act_min,  a.act_max};
}

PoolOptions pool_options(const schema::QuantPool2dArgs& a) {
  PoolOptions o;
  o.dilation_h = a.dilation_h;
  o.dilation_w = a.dilation_w;
  o.count_include_pad = a.count_include_pad;
  o.divisor_override = a.divisor_override;
  o.pad_bottom = a.pad_bottom;
  o.pad_right = a.pad_right;
  o.zero_point = a.zero_point;
  return o;
}

void max_pool_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantPool2dArgs>();
  max_pool2d_s16(ctx.in<const int16_t>(0), shape4(a.x), ctx.out<int16_t>(0), shape4(a.y),
                pool_params(a), pool_options(a));
}

void avg_pool_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantPool2dArgs>();
  avg_pool2d_s16(ctx.in<const int16_t>(0), shape4(a.x), ctx.out<int16_t>(0), shape4(a.y),
                 pool_params(a), pool_options(a));
}

// x, exp table, 1/(1+x) table (int16 [513] each) -> y, over the last axis.
Error softmax_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 3, 3, 1) &&
                 check::args<schema::QuantSoftmaxArgs>(ctx, OpParams::QuantSoftmaxParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantSoftmaxArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(s16(x) && s16(y) && x.rank >= 1 && y.rank == x.rank, Error::InvalidOp);
  TMCU_TRY(check::holds(x, a.x));
  TMCU_TRY(check::holds(y, a.y));
  TMCU_CHECK(check::same_dims(a.x, a.y, x.rank) && a.x[x.rank - 1] <= 32768 &&
                 check::vector(ctx.input(1), DType::I16, 513) && check::vector(ctx.input(2), DType::I16, 513) &&
                 a.input_multiplier >= 0 && shift_ok(a.input_left_shift),
             Error::InvalidOp);
  return Error::Ok;
}

void softmax_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantSoftmaxArgs>();
  const int32_t rank = int32_t(ctx.input(0).rank);
  softmax_s16(ctx.in<const int16_t>(0), int32_t(check::extent(a.x, 0, rank - 1)), a.x[rank - 1],
              a.input_multiplier, a.input_left_shift, ctx.in<const int16_t>(1), ctx.in<const int16_t>(2),
              ctx.out<int16_t>(0));
}

// REQUANTIZE: int8 or int16 in, int8 or int16 out, element for element.
Error requantize_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) && check::args<schema::RequantizeArgs>(ctx, OpParams::NONE),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::RequantizeArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  const bool x8 = check::is(x, DType::I8);
  const bool y8 = check::is(y, DType::I8);
  TMCU_CHECK((x8 || s16(x)) && (y8 || s16(y)), Error::InvalidOp);
  // Same element count; zero points of the operands' widths (int16: 0), so
  // x - input_zero_point stays within 17 bits.
  TMCU_CHECK(uint64_t(x.nbytes) * (y8 ? 1 : 2) == uint64_t(y.nbytes) * (x8 ? 1 : 2) &&
                 (x8 ? (a.input_zero_point >= -128 && a.input_zero_point <= 127) : a.input_zero_point == 0) &&
                 (y8 ? (a.output_zero_point >= -128 && a.output_zero_point <= 127) : a.output_zero_point == 0) &&
                 a.multiplier >= 0 && shift_ok(a.shift),
             Error::InvalidOp);
  return Error::Ok;
}

template <typename In, typename Out>
void requantize_loop(const In* x, Out* y, size_t n, const schema::RequantizeArgs& a, int32_t lo, int32_t hi) {
  for (size_t i = 0; i < n; ++i) {
    int32_t v = s8::requantize(int32_t(x[i]) - a.input_zero_point, a.multiplier, a.shift) + a.output_zero_point;
    v = v < lo ? lo : v > hi ? hi : v;
    y[i] = static_cast<Out>(v);
  }
}

void requantize_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::RequantizeArgs>();
  const bool x8 = ctx.input(0).dtype == DType::I8;
  const bool y8 = ctx.output(0).dtype == DType::I8;
  const size_t n = x8 ? ctx.input(0).nbytes : ctx.input(0).nbytes / 2;
  if (x8 && y8) {
    requantize_loop(ctx.in<const int8_t>(0), ctx.out<int8_t>(0), n, a, -128, 127);
  } else if (x8) {
    requantize_loop(ctx.in<const int8_t>(0), ctx.out<int16_t>(0), n, a, -32768, 32767);
  } else if (y8) {
    requantize_loop(ctx.in<const int16_t>(0), ctx.out<int8_t>(0), n, a, -128, 127);
  } else {
    requantize_loop(ctx.in<const int16_t>(0), ctx.out<int16_t>(0), n, a, -32768, 32767);
  }
}

// Zero points of int16 tensors are 0 (symmetric).
Error quantize_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) && check::args<schema::QuantizeArgs>(ctx, OpParams::NONE),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantizeArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(check::is(x, DType::F32) && s16(y) && x.nbytes == 2 * uint64_t(y.nbytes) &&
                 a.scale > 0.0f && a.zero_point == 0,
             Error::InvalidOp);
  return Error::Ok;
}

void quantize_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantizeArgs>();
  quantize_f32_s16(ctx.in<const float>(0), ctx.out<int16_t>(0), ctx.output(0).nbytes / 2, a.scale,
                   a.zero_point);
}

Error dequantize_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) && check::args<schema::QuantizeArgs>(ctx, OpParams::NONE),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantizeArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(s16(x) && check::is(y, DType::F32) && y.nbytes == 2 * uint64_t(x.nbytes) &&
                 a.zero_point == 0,
             Error::InvalidOp);
  return Error::Ok;
}

void dequantize_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantizeArgs>();
  dequantize_s16_f32(ctx.in<const int16_t>(0), ctx.out<float>(0), ctx.input(0).nbytes / 2, a.scale,
                     a.zero_point);
}

}  // namespace

const Kernel kQuantizeS16 = {quantize_check, quantize_run};
const Kernel kDequantizeS16 = {dequantize_check, dequantize_run};
const Kernel kConv2dS16 = {conv2d_check, conv2d_run};
const Kernel kDepthwiseConv2dS16 = {depthwise_check, depthwise_run};
const Kernel kLinearS16 = {linear_check, linear_run};
const Kernel kAddS16 = {add_check, add_run};
const Kernel kMulS16 = {mul_check, mul_run};
const Kernel kMaxPool2dS16 = {pool_check<true>, max_pool_run};
const Kernel kAvgPool2dS16 = {pool_check<false>, avg_pool_run};
const Kernel kSoftmaxS16 = {softmax_check, softmax_run};
const Kernel kRequantize = {requantize_check, requantize_run};

}  // namespace portable
}  // namespace torchmcu
