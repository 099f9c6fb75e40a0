// Checks shared by the kernels' load-time `check` functions (see
// core/kernel.h for what Method::load has checked before they run).
// Error codes: InvalidTensor when an operand's bytes disagree with the dims
// the arguments give it, InvalidOp for everything else an op gets wrong.
#ifndef TORCHMCU_KERNELS_CHECK_H_
#define TORCHMCU_KERNELS_CHECK_H_

#include "core/kernel.h"

namespace torchmcu {
namespace check {

using schema::DType;
using schema::Operand;

/// The arguments are exactly struct A, and the op carries params table
/// `params` (NONE: any, none needed).
template <typename A>
TMCU_INLINE bool args(const OpContext& ctx, schema::OpParams params) {
  return ctx.num_args() * 4 == sizeof(A) &&
         (params == schema::OpParams::NONE || ctx.params_type() == params);
}

/// Operand counts: inputs in [min_in, max_in], `outs` outputs.
TMCU_INLINE bool counts(const OpContext& ctx, uint32_t min_in, uint32_t max_in, uint32_t outs) {
  return ctx.num_inputs() >= min_in && ctx.num_inputs() <= max_in && ctx.num_outputs() == outs;
}

/// Present, of this dtype (and rank).
TMCU_INLINE bool is(const Operand& o, DType dtype) {
  return o.location != kLocAbsent && o.dtype == dtype;
}
/// (An absent operand has rank 0: a rank of 1 or more implies present.)
TMCU_INLINE bool is(const Operand& o, DType dtype, uint32_t rank) {
  return o.dtype == dtype && o.rank == rank && (rank != 0 || o.location != kLocAbsent);
}

/// Bytes of dims[0..n) elements of `elem` bytes when every dim is in
/// [1, 2^31) and the total stays below 2^31; 0 otherwise.
TMCU_INLINE uint32_t bytes(const int32_t* dims, uint32_t n, uint32_t elem) {
  uint32_t total = elem;
  for (uint32_t d = 0; d < n; ++d) {
    const uint32_t v = uint32_t(dims[d]);
    const uint64_t t = uint64_t(total) * v;  // both below 2^31: one 32x32 multiply
    if (v - 1 >= 0x7fffffffu || t > 0x7fffffffu) return 0;
    total = uint32_t(t);
  }
  return total;
}

/// The operand's bytes are exactly the elements of `dims` (its own rank of
/// them): InvalidTensor if not.
TMCU_INLINE Error holds(const Operand& o, const int32_t* dims) {
  const uint32_t b = bytes(dims, o.rank, dtype_size(o.dtype));
  return b != 0 && b == o.nbytes ? Error::Ok : Error::InvalidTensor;
}

/// The same for a matrix view: rows (all dims but the last) by cols.
TMCU_INLINE Error holds(const Operand& o, int32_t rows, int32_t cols) {
  const int32_t dims[2] = {rows, cols};
  const uint32_t b = bytes(dims, 2, dtype_size(o.dtype));
  return b != 0 && b == o.nbytes ? Error::Ok : Error::InvalidTensor;
}

/// A vector operand (rank 1) of n elements of `dtype`.
TMCU_INLINE bool vector(const Operand& o, DType dtype, int32_t n) {
  return is(o, dtype, 1) && n >= 1 && uint64_t(n) * dtype_size(dtype) == o.nbytes;
}

TMCU_INLINE bool same_dims(const int32_t* a, const int32_t* b, uint32_t rank) {
  for (uint32_t d = 0; d < rank; ++d) {
    if (a[d] != b[d]) return false;
  }
  return true;
}

/// Product of dims [from, to).
TMCU_INLINE int64_t extent(const int32_t* dims, int32_t from, int32_t to) {
  int64_t n = 1;
  for (int32_t d = from; d < to; ++d) n *= dims[d];
  return n;
}

/// a and b broadcast to y (the element-wise binary kernels' contract): all
/// three at y's rank (>= 1), each input dim y's or 1.
TMCU_INLINE bool broadcastable(const Operand& a, const int32_t* ad, const Operand& b, const int32_t* bd,
                          const Operand& y, const int32_t* yd) {
  if (y.rank < 1 || a.rank != y.rank || b.rank != y.rank) return false;
  for (uint32_t d = 0; d < y.rank; ++d) {
    if ((ad[d] != yd[d] && ad[d] != 1) || (bd[d] != yd[d] && bd[d] != 1)) return false;
  }
  return true;
}

/// The two operands are the same bytes (an op in place).
TMCU_INLINE bool same_bytes(const OpContext& ctx, const Operand& a, const Operand& b) {
  return ctx.data<uint8_t>(a) == ctx.data<uint8_t>(b) && a.nbytes == b.nbytes;
}

/// In place, an input must be read where it is written: not broadcast.
TMCU_INLINE bool inplace_ok(const OpContext& ctx, const Operand& in, const int32_t* in_dims,
                       const Operand& out, const int32_t* out_dims) {
  return !same_bytes(ctx, in, out) || same_dims(in_dims, out_dims, out.rank);
}

/// Spatial parameters stay small, so index arithmetic cannot overflow int32.
TMCU_INLINE bool small(int32_t v, int32_t lo) { return v >= lo && v <= (1 << 16); }

/// PyTorch's output size of a window op with symmetric padding:
/// out == floor(span / stride) + 1 where span = in + 2 pad - dilation (k - 1) - 1.
/// With ceil_mode (float pools) one more window may start inside the input
/// or its left padding. Multiplications only, in 64 bits: k comes from a
/// weight's dims, which only their bytes bound.
inline bool window(int32_t in, int32_t out, int32_t k, int32_t stride, int32_t pad,
                   int32_t dilation, bool ceil_mode) {
  const int64_t span = int64_t(in) + 2 * int64_t(pad) - int64_t(dilation) * (int64_t(k) - 1) - 1;
  if (span < 0 || stride < 1 || out < 1) return false;
  // out - 1 == floor(span / stride)  <=>  (out - 1) stride <= span < out stride
  const int64_t start = (int64_t(out) - 1) * stride;  // where the last window starts
  if (start <= span && span < start + stride) return true;
  return ceil_mode && start - stride <= span && span < start && start < int64_t(in) + pad;
}

/// Output rows may also be a band of a taller tensor (aot/torchmcu/tiling.py):
/// the padding below is then whatever the band needs (less than a window).
inline bool rows(int32_t in, int32_t out, int32_t k, int32_t stride, int32_t pad,
                 int32_t dilation, bool ceil_mode) {
  if (window(in, out, k, stride, pad, dilation, ceil_mode)) return true;
  const int64_t reach = int64_t(dilation) * (int64_t(k) - 1) + 1;
  // The last window ends at or below the input's last row (no row unread,
  // which kernels with fast paths for in == out rely on) and starts above it.
  const int64_t end = (int64_t(out) - 1) * stride - pad + reach;
  return in >= 1 && out >= 1 && pad < reach && end >= in && end - in < reach;
}

/// A window op padded on either side (a causal convolution pads before the
/// input only, padding='same' with an even kernel one more after): out
/// windows of reach dilation (k - 1) + 1 start at o * stride - pad_before,
/// and the padding they reach past the input, pad_after = (out - 1) stride
/// + reach - in - pad_before, is at most the larger of pad_before and
/// reach - 1, and more than -stride (out is the most windows that fit).
/// Symmetric padding (window()) and row bands (rows()) are such geometries.
inline bool window_padded(int32_t in, int32_t out, int32_t k, int32_t stride, int32_t pad_before,
                          int32_t dilation) {
  if (in < 1 || out < 1 || k < 1 || stride < 1 || dilation < 1 || pad_before < 0) return false;
  const int64_t reach = int64_t(dilation) * (int64_t(k) - 1) + 1;
  const int64_t after = (int64_t(out) - 1) * stride + reach - in - pad_before;
  const int64_t limit = pad_before > reach - 1 ? int64_t(pad_before) : reach - 1;
  return after > -int64_t(stride) && after <= limit;
}

/// An NHWC operand (rank 4, checked) holds exactly dims' elements: the
/// four-dim case of holds().
TMCU_INLINE Error holds4(const Operand& o, const int32_t* dims) {
  return bytes(dims, 4, dtype_size(o.dtype)) == o.nbytes ? Error::Ok : Error::InvalidTensor;
}

/// BATCH_MATMUL_F32/S8/S16 shapes: a [..., M, K], b [..., K, N] ([..., N, K]
/// when p.adj_y) and y [..., M, N], all of y's rank >= 2, a's and b's batch
/// dims each y's or 1 (broadcast), each operand holding its dims in the args
/// (p.a, p.b, p.y). Dtypes are the caller's to check.
template <typename Args>
Error batch_matmul_shapes(const OpContext& ctx, const Args& p) {
  const Operand& a = ctx.input(0);
  const Operand& b = ctx.input(1);
  const Operand& y = ctx.output(0);
  TMCU_TRY(holds(a, p.a));
  TMCU_TRY(holds(b, p.b));
  TMCU_TRY(holds(y, p.y));
  const int32_t r = int32_t(y.rank);
  TMCU_CHECK(r >= 2 && a.rank == y.rank && b.rank == y.rank && (p.adj_y == 0 || p.adj_y == 1), Error::InvalidOp);
  for (int32_t d = 0; d < r - 2; ++d) {
    TMCU_CHECK((p.a[d] == p.y[d] || p.a[d] == 1) && (p.b[d] == p.y[d] || p.b[d] == 1), Error::InvalidOp);
  }
  const int32_t k = p.adj_y ? p.b[r - 1] : p.b[r - 2];
  const int32_t n = p.adj_y ? p.b[r - 2] : p.b[r - 1];
  TMCU_CHECK(p.a[r - 1] == k && p.a[r - 2] == p.y[r - 2] && n == p.y[r - 1], Error::InvalidOp);
  return Error::Ok;
}

/// MAX_POOL2D / AVG_POOL2D on integers (S8, S16): one input and one output,
/// NHWC of `dtype` holding their dims, the same batch and channels, windows
/// of at most `max_taps` taps (what the kernel's sum can hold) over rows and
/// columns consistent with the output (PyTorch's, ceil_mode's last window
/// included; dilated max pools), count_include_pad 0 or 1 with the padding
/// after (its divisor's bound) no larger than a window, a divisor_override
/// of 0 (none) or at most 2^16, an int8 zero point (0 at int16); dilation for a max pool only (`max`), the
/// divisor options for an average pool only. The activation range is the
/// caller's.
inline Error quant_pool(const OpContext& ctx, DType dtype, int64_t max_taps, bool max) {
  TMCU_CHECK(counts(ctx, 1, 1, 1) && args<schema::QuantPool2dArgs>(ctx, schema::OpParams::QuantPool2dParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantPool2dArgs>();
  TMCU_CHECK(small(a.kernel_h, 1) && small(a.kernel_w, 1) && int64_t(a.kernel_h) * a.kernel_w <= max_taps &&
                 small(a.stride_h, 1) && small(a.stride_w, 1) && small(a.pad_top, 0) && small(a.pad_left, 0) &&
                 small(a.dilation_h, 1) && small(a.dilation_w, 1) && small(a.divisor_override, 0) &&
                 (a.count_include_pad == 0 || a.count_include_pad == 1) && a.pad_bottom >= 0 &&
                 a.pad_bottom <= a.kernel_h && a.pad_right >= 0 && a.pad_right <= a.kernel_w &&
                 a.zero_point >= -128 && a.zero_point <= 127 && (dtype == DType::I8 || a.zero_point == 0) &&
                 (a.round_half_even == 0 || a.round_half_even == 1),
             Error::InvalidOp);
  // Dilation is the max pool's, divisors and rounding the avg pool's.
  TMCU_CHECK(max ? a.count_include_pad == 0 && a.divisor_override == 0 && a.round_half_even == 0
                 : a.dilation_h == 1 && a.dilation_w == 1,
             Error::InvalidOp);
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(is(x, dtype, 4) && is(y, dtype, 4), Error::InvalidOp);
  TMCU_TRY(holds4(x, a.x));
  TMCU_TRY(holds4(y, a.y));
  TMCU_CHECK(a.x[0] == a.y[0] && a.x[3] == a.y[3] &&
                 rows(a.x[1], a.y[1], a.kernel_h, a.stride_h, a.pad_top, a.dilation_h, true) &&
                 window(a.x[2], a.y[2], a.kernel_w, a.stride_w, a.pad_left, a.dilation_w, true),
             Error::InvalidOp);
  return Error::Ok;
}

}  // namespace check
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_CHECK_H_
