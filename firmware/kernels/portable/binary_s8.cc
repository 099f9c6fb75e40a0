#include "broadcast.h"
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
