// The shape_views family as the executor sees it (PERMUTE, CONCAT, COPY, PAD,
// SLICE; any dtype): load-time checks of operands and arguments, and run
// functions handing them to the byte movers of shape_views.h.
//
// SLICE: a strided copy. Per physical dim d, output index i reads input
// index begin[d] + i * step[d]; step 0 reads one index every time (a
// broadcast: expand). Views that are one contiguous block of their input
// never get here: the compiler makes them aliases at an offset.
#include <cstring>

#include "kernels/portable/common/glue.h"
#include "kernels/portable/kernels.h"
#include "kernels/portable/shape_views/shape_views.h"

namespace torchmcu {
namespace portable {
namespace {

TMCU_INLINE bool movable(DType t) {
  return t == DType::F32 || t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::U8;
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

// ---- data movement: permute, concat, copy, pad (any dtype) -------------------

Error permute_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) && same_dtype(ctx) &&
                 check::args<schema::PermuteArgs>(ctx, OpParams::PermuteParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::PermuteArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_TRY(check::holds(x, a.x));
  TMCU_TRY(check::holds(y, a.y));
  TMCU_CHECK(x.rank >= 1 && y.rank == x.rank && a.perm_size == int32_t(x.rank), Error::InvalidOp);
  uint32_t seen = 0;
  for (uint32_t d = 0; d < x.rank; ++d) {
    const int32_t from = a.perm[d];
    TMCU_CHECK(from >= 0 && from < int32_t(x.rank) && ((seen >> from) & 1) == 0, Error::InvalidOp);
    seen |= 1u << from;
    TMCU_CHECK(a.y[d] == a.x[from], Error::InvalidOp);
  }
  return Error::Ok;
}

void permute_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::PermuteArgs>();
  const Operand& x = ctx.input(0);
  permute(ctx.data<const void>(x), a.x, int32_t(x.rank), a.perm, ctx.out<void>(0),
          dtype_size(x.dtype));
}

// CONCAT's arguments: ConcatArgs, then [int:6] dims per input.
const int32_t* concat_dims(const OpContext& ctx, uint32_t i) {
  return reinterpret_cast<const int32_t*>(ctx.arg_words() + sizeof(schema::ConcatArgs) / 4) +
         kMaxRank * i;
}

Error concat_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, kMaxInputs, 1) && same_dtype(ctx) &&
                 ctx.num_args() * 4 == sizeof(schema::ConcatArgs) + 4 * kMaxRank * ctx.num_inputs() &&
                 ctx.params_type() == OpParams::ConcatParams,
             Error::InvalidOp);
  const auto& a = ctx.args<schema::ConcatArgs>();
  const Operand& y = ctx.output(0);
  TMCU_TRY(check::holds(y, a.y));
  TMCU_CHECK(a.axis >= 0 && a.axis < int32_t(y.rank), Error::InvalidOp);
  int64_t total = 0;
  for (uint32_t i = 0; i < ctx.num_inputs(); ++i) {
    const Operand& x = ctx.input(i);
    const int32_t* dims = concat_dims(ctx, i);
    TMCU_TRY(check::holds(x, dims));
    TMCU_CHECK(x.rank == y.rank, Error::InvalidOp);
    for (int32_t d = 0; d < int32_t(y.rank); ++d) {
      TMCU_CHECK(d == a.axis || dims[d] == a.y[d], Error::InvalidOp);
    }
    total += dims[a.axis];
  }
  TMCU_CHECK(total == a.y[a.axis], Error::InvalidOp);
  return Error::Ok;
}

void concat_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::ConcatArgs>();
  const void* srcs[kMaxInputs];
  size_t inner[kMaxInputs];
  const size_t elem = dtype_size(ctx.output(0).dtype);
  const int32_t rank = int32_t(ctx.output(0).rank);
  for (uint32_t i = 0; i < ctx.num_inputs(); ++i) {
    srcs[i] = ctx.data<const void>(ctx.input(i));
    inner[i] = size_t(check::extent(concat_dims(ctx, i), a.axis, rank)) * elem;
  }
  concat(srcs, inner, int32_t(ctx.num_inputs()), int32_t(check::extent(a.y, 0, a.axis)),
         ctx.out<void>(0));
}

Error copy_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) && same_dtype(ctx) && ctx.num_args() == 0 &&
                 ctx.input(0).nbytes == ctx.output(0).nbytes,
             Error::InvalidOp);
  return Error::Ok;
}

void copy_run(const OpContext& ctx) {
  // memmove: the output may be the input itself (a no-op then).
  std::memmove(ctx.out<void>(0), ctx.in<const void>(0), ctx.output(0).nbytes);
}

// Constant padding (F32 or I8): out dim d = before[d] + in dim d + after[d].
Error pad_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) && same_dtype(ctx) &&
                 check::args<schema::PadArgs>(ctx, OpParams::PadParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::PadArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(x.dtype == DType::F32 || x.dtype == DType::I8, Error::InvalidOp);
  TMCU_TRY(check::holds(x, a.x));
  TMCU_TRY(check::holds(y, a.y));
  const int32_t rank = int32_t(x.rank);
  TMCU_CHECK(rank >= 1 && y.rank == x.rank && a.before_size == rank && a.after_size == rank,
             Error::InvalidOp);
  for (int32_t d = 0; d < rank; ++d) {
    TMCU_CHECK(check::small(a.before[d], 0) && check::small(a.after[d], 0) &&
                   int64_t(a.before[d]) + a.x[d] + a.after[d] == int64_t(a.y[d]),
               Error::InvalidOp);
  }
  if (x.dtype == DType::I8) {  // one quantization in and out; the value an int8
    TMCU_CHECK(a.qvalue >= -128 && a.qvalue <= 127 && a.x_scale == a.y_scale &&
                   a.x_zero_point == a.y_zero_point,
               Error::InvalidOp);
  }
  return Error::Ok;
}

void pad_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::PadArgs>();
  const Operand& x = ctx.input(0);
  const float fvalue = a.value;
  const int8_t qvalue = static_cast<int8_t>(a.qvalue);
  const void* value = x.dtype == DType::F32 ? static_cast<const void*>(&fvalue)
                                            : static_cast<const void*>(&qvalue);
  pad(ctx.data<const void>(x), a.x, int32_t(x.rank), a.before, a.after, value, ctx.out<void>(0),
      dtype_size(x.dtype));
}

// GATHER: table [rows, cols] (any movable dtype), ids (I32, count of them) ->
// y [count, cols] of the table's dtype: row ids[i] of the table (an id out of
// [0, rows): zeros, as no row; PyTorch raises).
Error gather_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 2, 1) && check::args<schema::GatherArgs>(ctx, OpParams::NONE), Error::InvalidOp);
  const auto& a = ctx.args<schema::GatherArgs>();
  const Operand& table = ctx.input(0);
  const Operand& ids = ctx.input(1);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(movable(table.dtype) && check::is(ids, DType::I32) && check::is(y, table.dtype), Error::InvalidOp);
  TMCU_TRY(check::holds(table, a.rows, a.cols));
  TMCU_TRY(check::holds(y, a.count, a.cols));
  TMCU_CHECK(ids.nbytes == uint32_t(a.count) * 4u, Error::InvalidTensor);
  return Error::Ok;
}

void gather_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::GatherArgs>();
  const size_t row = size_t(a.cols) * dtype_size(ctx.input(0).dtype);
  gather(ctx.data<const void>(ctx.input(0)), a.rows, row, ctx.in<const int32_t>(1), a.count, ctx.out<void>(0));
}

}  // namespace

const Kernel kGather = {gather_check, gather_run};
const Kernel kPermute = {permute_check, permute_run};
const Kernel kConcat = {concat_check, concat_run};
const Kernel kCopy = {copy_check, copy_run, inplace::kCopy};
const Kernel kPad = {pad_check, pad_run};
const Kernel kSlice = {slice_check, slice_run};

}  // namespace portable
}  // namespace torchmcu
