#include "kernels/fast/elementwise/binary_s8.h"
#include "kernels/portable/common/broadcast.h"
#include "kernels/fast/fast.h"
#include "kernels/portable/elementwise/elementwise.h"
#include "kernels/portable/common/requantize.h"

namespace torchmcu {
namespace portable {
namespace {

// An op maps each operand on its own (lhs, rhs), then the pair to the output
// (combine); a broadcast operand is mapped once per inner run.
struct AddS8 {
  QuantAddParams p;  // copies: out is int8 and could alias a reference
  s8::OutQuant quant;
  explicit AddS8(const QuantAddParams& params)
      : p(params), quant(params.output_offset, params.act_min, params.act_max) {}
  int32_t lhs(int8_t a) const {
    return s8::requantize((a + p.input1_offset) * (1 << p.left_shift), p.input1_multiplier,
                          p.input1_shift);
  }
  int32_t rhs(int8_t b) const {
    return s8::requantize((b + p.input2_offset) * (1 << p.left_shift), p.input2_multiplier,
                          p.input2_shift);
  }
  int8_t combine(int32_t a, int32_t b) const {
    return quant(s8::requantize(a + b, p.output_multiplier, p.output_shift));
  }
};

struct MulS8 {
  QuantMulParams p;
  s8::OutQuant quant;
  explicit MulS8(const QuantMulParams& params)
      : p(params), quant(params.output_offset, params.act_min, params.act_max) {}
  int32_t lhs(int8_t a) const { return a + p.input1_offset; }
  int32_t rhs(int8_t b) const { return b + p.input2_offset; }
  int8_t combine(int32_t a, int32_t b) const {
    return quant(s8::requantize(a * b, p.output_multiplier, p.output_shift));
  }
};

// Max / min of the raw values: no requantization (one shared quantization).
struct MaxS8 {
  int32_t lhs(int8_t a) const { return a; }
  int32_t rhs(int8_t b) const { return b; }
  int8_t combine(int32_t a, int32_t b) const { return static_cast<int8_t>(a > b ? a : b); }
};

struct MinS8 {
  int32_t lhs(int8_t a) const { return a; }
  int32_t rhs(int8_t b) const { return b; }
  int8_t combine(int32_t a, int32_t b) const { return static_cast<int8_t>(a < b ? a : b); }
};

#if TMCU_S8_MVE && TMCU_FAST_ADD && TMCU_FAST_ADD_LANES
// ADD of operands of the output's shape (a residual connection), 4 lanes
// per step, the tail predicated: AddS8's arithmetic with fast::requant_v, where
// that is requantize() (kernels/fast/fast.h). Wrapping lane arithmetic is the generic
// kernel's int32 arithmetic, whose parameters the load-time check keeps from
// overflowing. False when the shapes differ or the multipliers do not suit.
bool add_s8_same_shape(const int8_t* a, const int32_t* a_dims, const int8_t* b, const int32_t* b_dims,
                       int8_t* out, const int32_t* out_dims, int32_t rank, const QuantAddParams& p) {
  int32_t n = 1;
  for (int32_t d = 0; d < rank; ++d) {
    if (a_dims[d] != out_dims[d] || b_dims[d] != out_dims[d]) return false;
    n *= out_dims[d];
  }
  if (!fast::requant_vector_ok(&p.input1_multiplier, &p.input1_shift, 1) ||
      !fast::requant_vector_ok(&p.input2_multiplier, &p.input2_shift, 1) ||
      !fast::requant_vector_ok(&p.output_multiplier, &p.output_shift, 1)) {
    return false;
  }
  const s8::OutQuant quant(p.output_offset, p.act_min, p.act_max);
  const int32_t scale = 1 << p.left_shift;
  const int32_t off1 = p.input1_offset, off2 = p.input2_offset;
  const int32x4_t m1 = vdupq_n_s32(p.input1_multiplier), s1 = vdupq_n_s32(p.input1_shift);
  const int32x4_t m2 = vdupq_n_s32(p.input2_multiplier), s2 = vdupq_n_s32(p.input2_shift);
  const int32x4_t mo = vdupq_n_s32(p.output_multiplier), so = vdupq_n_s32(p.output_shift);
  for (int32_t i = 0; i < n; i += 4) {
    const mve_pred16_t live = vctp32q(static_cast<uint32_t>(n - i));
    const int32x4_t x = vmulq_n_s32(vaddq_n_s32(vldrbq_z_s32(a + i, live), off1), scale);
    const int32x4_t y = vmulq_n_s32(vaddq_n_s32(vldrbq_z_s32(b + i, live), off2), scale);
    const int32x4_t sum = vaddq_s32(fast::requant_v(x, m1, s1), fast::requant_v(y, m2, s2));
    vstrbq_p_s32(out + i, fast::clamp_v(fast::requant_v(sum, mo, so), quant), live);
  }
  return true;
}
#endif

// The generic kernel in its own frame, not beneath the fast path's table.
[[gnu::noinline]] void add_generic(const int8_t* a, const int32_t* a_dims, const int8_t* b, const int32_t* b_dims,
                                   int8_t* out, const int32_t* out_dims, int32_t rank, const QuantAddParams& p) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, AddS8(p));
}

}  // namespace

// Equal shapes: the tabulated fast path (kernels/fast/elementwise/binary_s8.h), else (MVE,
// fewer elements or other parameters) the 4-lane one above; broadcasts and
// the rest: the generic kernel.
void add_s8(const int8_t* a, const int32_t* a_dims, const int8_t* b, const int32_t* b_dims,
            int8_t* out, const int32_t* out_dims, int32_t rank, const QuantAddParams& p) {
#if TMCU_S8_FAST && TMCU_FAST_ADD
  int32_t n = 1;
  bool same = true;
  for (int32_t d = 0; d < rank; ++d) {
    same = same && a_dims[d] == out_dims[d] && b_dims[d] == out_dims[d];
    n *= out_dims[d];
  }
  if (same && fast::add_s8_same_shape(a, b, out, n, p)) return;
#endif
#if TMCU_S8_MVE && TMCU_FAST_ADD && TMCU_FAST_ADD_LANES
  if (add_s8_same_shape(a, a_dims, b, b_dims, out, out_dims, rank, p)) return;
#endif
  add_generic(a, a_dims, b, b_dims, out, out_dims, rank, p);
}

void mul_s8(const int8_t* a, const int32_t* a_dims, const int8_t* b, const int32_t* b_dims,
            int8_t* out, const int32_t* out_dims, int32_t rank, const QuantMulParams& p) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, MulS8(p));
}

void maximum_s8(const int8_t* a, const int32_t* a_dims, const int8_t* b, const int32_t* b_dims,
                int8_t* out, const int32_t* out_dims, int32_t rank) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, MaxS8());
}

void minimum_s8(const int8_t* a, const int32_t* a_dims, const int8_t* b, const int32_t* b_dims,
                int8_t* out, const int32_t* out_dims, int32_t rank) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, MinS8());
}

}  // namespace portable
}  // namespace torchmcu
