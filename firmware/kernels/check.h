// Shape and dtype checks shared by the kernels' load-time `check` functions.
#ifndef TORCHMCU_KERNELS_CHECK_H_
#define TORCHMCU_KERNELS_CHECK_H_

#include "core/kernel.h"

namespace torchmcu {
namespace check {

inline bool is(const TensorView& t, schema::DType dtype, int32_t rank) {
  return t.present() && t.dtype == dtype && t.rank == rank;
}

inline bool same_dims(const TensorView& a, const TensorView& b) {
  if (a.rank != b.rank) return false;
  for (int32_t d = 0; d < a.rank; ++d) {
    if (a.dims[d] != b.dims[d]) return false;
  }
  return true;
}

/// Product of dims [from, to).
inline int64_t extent(const TensorView& t, int32_t from, int32_t to) {
  int64_t n = 1;
  for (int32_t d = from; d < to; ++d) n *= t.dims[d];
  return n;
}

/// Operand counts: `min_in` required inputs, up to `max_in`, `outs` outputs,
/// every present operand of `dtype`.
inline bool operands(const OpContext& ctx, uint32_t min_in, uint32_t max_in,
                     uint32_t outs, schema::DType dtype) {
  if (ctx.num_inputs < min_in || ctx.num_inputs > max_in || ctx.num_outputs != outs) {
    return false;
  }
  for (uint32_t i = 0; i < ctx.num_inputs; ++i) {
    const TensorView& t = ctx.inputs[i];
    if (i < min_in && !t.present()) return false;
    if (t.present() && t.dtype != dtype) return false;
  }
  for (uint32_t i = 0; i < outs; ++i) {
    if (ctx.outputs[i].dtype != dtype) return false;
  }
  return true;
}

/// Inputs 0 and 1 broadcast to output 0: all three at one rank, each input
/// dim equal to the output's or 1 (the element-wise binary kernels' contract).
inline bool broadcastable(const OpContext& ctx) {
  const TensorView& a = ctx.inputs[0];
  const TensorView& b = ctx.inputs[1];
  const TensorView& y = ctx.outputs[0];
  if (y.rank < 1 || a.rank != y.rank || b.rank != y.rank) return false;
  for (int32_t d = 0; d < y.rank; ++d) {
    if ((a.dims[d] != y.dims[d] && a.dims[d] != 1) || (b.dims[d] != y.dims[d] && b.dims[d] != 1)) {
      return false;
    }
  }
  return true;
}

/// The two operands' bytes do not overlap (kernels that copy with memcpy, or
/// read an input after writing part of the output, need this).
inline bool disjoint(const TensorView& a, const TensorView& b) {
  const auto* pa = static_cast<const uint8_t*>(a.data);
  const auto* pb = static_cast<const uint8_t*>(b.data);
  return pa + a.nbytes <= pb || pb + b.nbytes <= pa;
}

/// Spatial parameters stay small, so index arithmetic cannot overflow int32.
inline bool small(int32_t v, int32_t lo) { return v >= lo && v <= (1 << 16); }

}  // namespace check
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_CHECK_H_
