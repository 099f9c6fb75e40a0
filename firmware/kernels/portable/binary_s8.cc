#include "portable_s8.h"
#include "requantize_s8.h"

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

// Broadcasting as add_f32: size-1 axes are dropped and neighbouring axes with
// the same broadcast pattern merged, so common cases are one flat loop.
template <typename Op>
void broadcast_binary(const int8_t* a, const int32_t* a_dims, const int8_t* b,
                      const int32_t* b_dims, int8_t* out, const int32_t* out_dims, int32_t rank,
                      const Op op) {
  int32_t n[kMaxRank];
  int32_t sa[kMaxRank];
  int32_t sb[kMaxRank];
  int32_t r = 0;
  int32_t ca = 1, cb = 1;
  for (int32_t d = rank - 1; d >= 0; --d) {
    const int32_t extent = out_dims[d];
    const int32_t as = a_dims[d] == 1 ? 0 : ca;
    const int32_t bs = b_dims[d] == 1 ? 0 : cb;
    ca *= a_dims[d];
    cb *= b_dims[d];
    if (extent == 1) continue;
    if (r > 0 && (as == 0) == (sa[r - 1] == 0) && (bs == 0) == (sb[r - 1] == 0)) {
      n[r - 1] *= extent;
    } else {
      n[r] = extent;
      sa[r] = as;
      sb[r] = bs;
      ++r;
    }
  }
  if (r == 0) {
    *out = op.combine(op.lhs(*a), op.rhs(*b));
    return;
  }
  int32_t idx[kMaxRank] = {};
  const int32_t inner = n[0];
  const bool a_vec = sa[0] != 0;
  const bool b_vec = sb[0] != 0;
  for (;;) {
    if (a_vec && b_vec) {
      for (int32_t i = 0; i < inner; ++i) out[i] = op.combine(op.lhs(a[i]), op.rhs(b[i]));
    } else if (a_vec) {
      const int32_t y = op.rhs(*b);
      for (int32_t i = 0; i < inner; ++i) out[i] = op.combine(op.lhs(a[i]), y);
    } else if (b_vec) {
      const int32_t x = op.lhs(*a);
      for (int32_t i = 0; i < inner; ++i) out[i] = op.combine(x, op.rhs(b[i]));
    } else {
      const int8_t v = op.combine(op.lhs(*a), op.rhs(*b));
      for (int32_t i = 0; i < inner; ++i) out[i] = v;
    }
    out += inner;
    int32_t d = 1;
    for (; d < r; ++d) {
      a += sa[d];
      b += sb[d];
      if (++idx[d] < n[d]) break;
      idx[d] = 0;
      a -= sa[d] * n[d];
      b -= sb[d] * n[d];
    }
    if (d == r) return;
  }
}

}  // namespace

void add_s8(const int8_t* a, const int32_t* a_dims, const int8_t* b, const int32_t* b_dims,
            int8_t* out, const int32_t* out_dims, int32_t rank, const QuantAddParams& p) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, AddS8(p));
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
