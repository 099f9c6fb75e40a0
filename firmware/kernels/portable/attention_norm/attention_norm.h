// The attention_norm family's math (LAYER_NORM_*, GROUP_NORM_* and
// BATCH_MATMUL_*): layer and group norm in float and in torchmcu's integer scheme
// (aot/torchmcu/reference/attention_norm.py states it; TFLite has no
// layer-norm operator), and batched matrix products with broadcast batch dims
// and the right operand optionally transposed (TFLite's adj_y, CMSIS-NN's
// arm_batch_matmul form), TFLite's int8 and int16 BATCH_MATMUL bit for bit.
#ifndef TORCHMCU_KERNELS_PORTABLE_ATTENTION_NORM_ATTENTION_NORM_H_
#define TORCHMCU_KERNELS_PORTABLE_ATTENTION_NORM_ATTENTION_NORM_H_

#include <cstdint>

#include "kernels/portable/common/types.h"

namespace torchmcu {
namespace portable {

/// Batched matrix product: for each of `batch` matrices,
/// out[b][i][j] = sum_k a[b][i][k] * bm[b][k][j] with a [batch][m][k],
/// bm [batch][k][n], out [batch][m][n]. out must not overlap a or bm.
void batch_matmul_f32(const float* a, const float* bm, float* out, int32_t batch,
                      int32_t m, int32_t k, int32_t n);

struct QuantBatchMatmulParams {
  int32_t lhs_offset, rhs_offset;
  int32_t output_multiplier, output_shift, output_offset;
  int32_t act_min, act_max;
};

/// TFLite's int8 BATCH_MATMUL (reference_ops::BatchMatMul, per-tensor): for
/// each of `batch` matrices a [m][k] and bm [k][n],
///   acc = sum_k (a[i][k] + lhs_offset) * (bm[k][j] + rhs_offset)  (int32)
///   out[i][j] = clamp(requantize(acc, output_multiplier, output_shift) + output_offset).
/// The caller keeps k * 255 * 255 within int32.
void batch_matmul_s8(const int8_t* a, const int8_t* bm, int8_t* out, int32_t batch, int32_t m,
                     int32_t k, int32_t n, const QuantBatchMatmulParams& p);

/// out = (x - mean) / sqrt(var + eps) * gamma + beta per row of `cols`
/// (biased variance); gamma, beta may be null (1, 0).
void layer_norm_f32(const float* in, const float* gamma, const float* beta, float* out, int32_t rows,
                    int32_t cols, float eps);

struct QuantLayerNormParams {
  int32_t input_zero_point;
  int64_t eps_term;  // round(cols^2 eps / s_in^2), below 2^62 - 2^57
  int32_t output_multiplier, output_shift, output_zero_point;
  int32_t act_min, act_max;
};

constexpr int32_t kLayerNormMaxCols = 4096;
constexpr int32_t kLayerNormFractionBits = 16;  // n in Q16
constexpr int64_t kLayerNormMaxEps = (int64_t{1} << 62) - (int64_t{1} << 57);

/// The integer layer norm, per row of cols <= kLayerNormMaxCols: d = x - zp;
/// V = cols sum d^2 - (sum d)^2 + eps_term; n = (cols d - sum d) / sqrt(V) in
/// Q16 (integer square root of V scaled into [2^60, 2^62), its reciprocal
/// in Q60, one rounding); out = clamp(requantize(sat32(n gamma + beta)) + zp_out).
void layer_norm_s8(const int8_t* in, const int8_t* gamma, const int32_t* beta, int8_t* out, int32_t rows,
                   int32_t cols, const QuantLayerNormParams& p);
void layer_norm_s16(const int16_t* in, const int8_t* gamma, const int32_t* beta, int16_t* out,
                    int32_t rows, int32_t cols, const QuantLayerNormParams& p);

/// Group norm's shape: x [n][positions][channels] (channels last), in `groups`
/// groups of channels / groups channels.
struct GroupNormShape {
  int32_t n, positions, channels, groups;
};

/// Each group normalised over its positions * channels / groups values as
/// layer_norm_f32 normalises a row; gamma, beta [channels] may be null.
void group_norm_f32(const float* in, const float* gamma, const float* beta, float* out, const GroupNormShape& g,
                    float eps);

/// The integer layer norm's scheme per group (count = positions * channels /
/// groups <= kLayerNormMaxCols in place of cols; eps_term at that count);
/// gamma and beta per channel.
void group_norm_s8(const int8_t* in, const int8_t* gamma, const int32_t* beta, int8_t* out, const GroupNormShape& g,
                   const QuantLayerNormParams& p);
void group_norm_s16(const int16_t* in, const int8_t* gamma, const int32_t* beta, int16_t* out,
                    const GroupNormShape& g, const QuantLayerNormParams& p);

/// One product out [m][n] = a [m][k] times bt [n][k] transposed (float).
void matmul_t_f32(const float* a, const float* bt, float* out, int32_t m, int32_t k, int32_t n);

/// batch_matmul_s8's arithmetic for one product with b given transposed, [n][k].
void matmul_t_s8(const int8_t* a, const int8_t* bt, int8_t* out, int32_t m, int32_t k, int32_t n,
                 const QuantBatchMatmulParams& p);

/// TFLite's int16 BATCH_MATMUL for one product: acc = sum a * b in int64 (no
/// offsets), out = clamp(requantize_s64(acc, multiplier, shift)); b is [k][n],
/// or [n][k] when transposed.
void matmul_s16(const int16_t* a, const int16_t* b, int16_t* out, int32_t m, int32_t k, int32_t n,
                bool b_transposed, int32_t multiplier, int32_t shift, int32_t act_min, int32_t act_max);

/// The broadcast batch of a batched product: for every output matrix (in
/// order), fn(a_offset, b_offset) in elements, where a, b and y have `rank`
/// dims of which the first rank - 2 are batch dims (a's and b's each 1 or
/// y's), and a_mat, b_mat are the elements of one matrix of a and b.
template <typename Fn>
void for_each_batch(const int32_t* a, const int32_t* b, const int32_t* y, int32_t rank, int64_t a_mat,
                    int64_t b_mat, Fn fn) {
  const int32_t batch_rank = rank - 2;
  int64_t sa[kMaxRank], sb[kMaxRank];
  int64_t ca = a_mat, cb = b_mat;
  for (int32_t d = batch_rank - 1; d >= 0; --d) {  // element strides, 0 where broadcast
    sa[d] = a[d] == 1 ? 0 : ca;
    sb[d] = b[d] == 1 ? 0 : cb;
    ca *= a[d];
    cb *= b[d];
  }
  int32_t idx[kMaxRank] = {};
  int64_t oa = 0, ob = 0;
  for (;;) {
    fn(oa, ob);
    int32_t d = batch_rank - 1;
    for (; d >= 0; --d) {
      oa += sa[d];
      ob += sb[d];
      if (++idx[d] < y[d]) break;
      idx[d] = 0;
      oa -= sa[d] * y[d];
      ob -= sb[d] * y[d];
    }
    if (d < 0) return;
  }
}

}  // namespace portable
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_PORTABLE_ATTENTION_NORM_ATTENTION_NORM_H_
