// a16w8 ADD and MUL with broadcasting (elementwise.h): add_s8's and mul_s8's
// arithmetic on int16 values.
#include "kernels/portable/common/broadcast.h"
#include "kernels/portable/common/requantize.h"
#include "kernels/portable/elementwise/elementwise.h"

namespace torchmcu {
namespace portable {
namespace {

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

}  // namespace

void add_s16(const int16_t* a, const int32_t* a_dims, const int16_t* b, const int32_t* b_dims,
             int16_t* out, const int32_t* out_dims, int32_t rank, const QuantAddParams& p) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, AddS16(p));
}

void mul_s16(const int16_t* a, const int32_t* a_dims, const int16_t* b, const int32_t* b_dims,
             int16_t* out, const int32_t* out_dims, int32_t rank, const QuantMulParams& p) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, MulS16(p));
}

}  // namespace portable
}  // namespace torchmcu
