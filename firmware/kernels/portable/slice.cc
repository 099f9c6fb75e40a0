// SLICE (any dtype): a strided copy. Per physical dim d, output index i
// reads input index begin[d] + i * step[d]; step 0 reads one index every
// time (a broadcast: expand). Views that are one contiguous block of their
// input never get here: the compiler makes them aliases at an offset.
#include <cstring>

#include "kernels/check.h"
#include "kernels/portable/kernels.h"

namespace torchmcu {
namespace portable {
namespace {

using schema::DType;
using schema::OpParams;
using schema::Operand;

TMCU_INLINE bool movable(DType t) {
  return t == DType::F32 || t == DType::I8 || t == DType::I16 || t == DType::I32;
}

Error slice_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) && check::args<schema::SliceArgs>(ctx, OpParams::SliceParams),
             Error::InvalidOp);
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(check::is(x, x.dtype) && movable(x.dtype) && y.dtype == x.dtype, Error::InvalidOp);
  const auto& a = ctx.args<schema::SliceArgs>();
  TMCU_TRY(check::holds(x, a.x));
  TMCU_TRY(check::holds(y, a.y));
  const int32_t rank = int32_t(x.rank);
  TMCU_CHECK(rank >= 1 && y.rank == x.rank && a.begin_size == rank && a.step_size == rank,
             Error::InvalidOp);
  for (int32_t d = 0; d < rank; ++d) {
    // Every index read lies in the input: begin and the last one, in 64 bits.
    const int64_t last = int64_t(a.begin[d]) + (int64_t(a.y[d]) - 1) * int64_t(a.step[d]);
    TMCU_CHECK(a.begin[d] >= 0 && a.begin[d] < a.x[d] && a.step[d] >= 0 && last < a.x[d],
               Error::InvalidOp);
  }
  return Error::Ok;
}

void slice_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::SliceArgs>();
  const Operand& x = ctx.input(0);
  const int32_t rank = int32_t(x.rank);
  const size_t elem = dtype_size(x.dtype);
  size_t stride[kMaxRank];  // input bytes between indices of each dim
  size_t s = elem;
  for (int32_t d = rank - 1; d >= 0; --d) {
    stride[d] = s;
    s *= size_t(a.x[d]);
  }
  const uint8_t* src = ctx.data<const uint8_t>(x);
  for (int32_t d = 0; d < rank; ++d) src += size_t(a.begin[d]) * stride[d];
  uint8_t* dst = ctx.out<uint8_t>(0);
  const int32_t inner = a.y[rank - 1];
  const size_t inner_step = size_t(a.step[rank - 1]) * stride[rank - 1];
  const size_t row_bytes = size_t(inner) * elem;
  int32_t idx[kMaxRank] = {};
  for (;;) {
    if (inner_step == elem) {
      std::memcpy(dst, src, row_bytes);
    } else {
      const uint8_t* p = src;
      for (int32_t i = 0; i < inner; ++i, p += inner_step) std::memcpy(dst + size_t(i) * elem, p, elem);
    }
    dst += row_bytes;
    int32_t d = rank - 2;  // odometer over the outer dims
    for (; d >= 0; --d) {
      const size_t step = size_t(a.step[d]) * stride[d];
      src += step;
      if (++idx[d] < a.y[d]) break;
      idx[d] = 0;
      src -= step * size_t(a.y[d]);
    }
    if (d < 0) return;
  }
}

}  // namespace

const Kernel kSlice = {slice_check, slice_run};

}  // namespace portable
}  // namespace torchmcu
