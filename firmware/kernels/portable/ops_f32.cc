// The float32 portable kernels as the executor sees them: for each op code, a
// load-time check of operands and parameters, and a run function that unpacks
// the program's parameters into the plain math of portable_f32.h.
//
// Each Kernel is a separate const object: the generated kernel table names
// only the ones a model uses, and --gc-sections drops the rest.
#include <cstring>
#include <limits>

#include "kernels/check.h"
#include "kernels/portable/kernels.h"
#include "kernels/portable/portable_f32.h"

namespace torchmcu {
namespace portable {
namespace {

using schema::DType;

constexpr ActRange act_range(float lo, float hi) { return ActRange{lo, hi}; }
constexpr float kInf = std::numeric_limits<float>::infinity();

bool nhwc(const TensorView& t) { return check::is(t, DType::F32, 4); }
Shape4 shape4(const TensorView& t) { return Shape4{t.dims[0], t.dims[1], t.dims[2], t.dims[3]}; }

// PyTorch's output size for a window op with symmetric padding. ceil_mode
// may add one more window, which must start inside the input or left padding.
bool window_out_ok(int32_t in, int32_t out, int32_t k, int32_t stride, int32_t pad,
                   int32_t dilation) {
  const int32_t span = in + 2 * pad - dilation * (k - 1) - 1;
  if (span < 0) return false;
  const int32_t floor_out = span / stride + 1;
  return out == floor_out || (out == floor_out + 1 && (out - 1) * stride < in + pad);
}

// ---- linear: inputs x [..., in], w [out, in], optional bias [out] ----------

Error linear_check(const OpContext& ctx) {
  TMCU_CHECK(check::operands(ctx, 2, 3, 1, DType::F32), Error::InvalidOp);
  const TensorView& x = ctx.inputs[0];
  const TensorView& w = ctx.inputs[1];
  const TensorView& y = ctx.outputs[0];
  TMCU_CHECK(w.rank == 2 && x.rank >= 1 && y.rank == x.rank, Error::InvalidOp);
  TMCU_CHECK(x.dims[x.rank - 1] == w.dims[1] && y.dims[y.rank - 1] == w.dims[0],
             Error::InvalidOp);
  TMCU_CHECK(check::extent(x, 0, x.rank - 1) == check::extent(y, 0, y.rank - 1),
             Error::InvalidOp);
  if (ctx.num_inputs == 3 && ctx.inputs[2].present()) {
    TMCU_CHECK(ctx.inputs[2].rank == 1 && ctx.inputs[2].dims[0] == w.dims[0], Error::InvalidOp);
  }
  return Error::Ok;
}

void linear_run(const OpContext& ctx) {
  const TensorView& x = ctx.inputs[0];
  const TensorView& w = ctx.inputs[1];
  const float* bias = ctx.num_inputs == 3 ? ctx.inputs[2].as<const float>() : nullptr;
  const schema::LinearParams p = ctx.op.params_as_LinearParams();
  const ActRange act = p.valid() ? act_range(p.act_min(), p.act_max())
                                 : act_range(-kInf, kInf);
  linear_f32(x.as<const float>(), w.as<const float>(), bias, ctx.outputs[0].as<float>(),
             int32_t(check::extent(x, 0, x.rank - 1)), w.dims[1], w.dims[0], act);
}

// ---- conv2d / depthwise: x NHWC, w OHWI or [1, kh, kw, oc], bias [oc] ------

Error conv_params_check(const OpContext& ctx, int32_t kh, int32_t kw) {
  const schema::Conv2dParams p = ctx.op.params_as_Conv2dParams();
  TMCU_CHECK(p.valid(), Error::InvalidOp);
  TMCU_CHECK(check::small(p.stride_h(), 1) && check::small(p.stride_w(), 1) &&
                 check::small(p.dilation_h(), 1) && check::small(p.dilation_w(), 1) &&
                 check::small(p.pad_top(), 0) && check::small(p.pad_left(), 0),
             Error::InvalidOp);
  const TensorView& x = ctx.inputs[0];
  const TensorView& y = ctx.outputs[0];
  TMCU_CHECK(nhwc(x) && nhwc(y) && x.dims[0] == y.dims[0], Error::InvalidOp);
  TMCU_CHECK(window_out_ok(x.dims[1], y.dims[1], kh, p.stride_h(), p.pad_top(), p.dilation_h()) &&
                 window_out_ok(x.dims[2], y.dims[2], kw, p.stride_w(), p.pad_left(), p.dilation_w()),
             Error::InvalidOp);
  if (ctx.num_inputs == 3 && ctx.inputs[2].present()) {
    TMCU_CHECK(ctx.inputs[2].rank == 1 && ctx.inputs[2].dims[0] == y.dims[3], Error::InvalidOp);
  }
  return Error::Ok;
}

Conv2dParams conv_params(const schema::Conv2dParams& p) {
  return Conv2dParams{p.stride_h(),   p.stride_w(),   p.pad_top(), p.pad_left(),
                      p.dilation_h(), p.dilation_w(), p.groups(),
                      act_range(p.act_min(), p.act_max())};
}

Error conv2d_check(const OpContext& ctx) {
  TMCU_CHECK(check::operands(ctx, 2, 3, 1, DType::F32), Error::InvalidOp);
  const TensorView& w = ctx.inputs[1];
  TMCU_CHECK(w.rank == 4, Error::InvalidOp);
  TMCU_TRY(conv_params_check(ctx, w.dims[1], w.dims[2]));
  const int32_t groups = ctx.op.params_as_Conv2dParams().groups();
  const TensorView& x = ctx.inputs[0];
  const TensorView& y = ctx.outputs[0];
  TMCU_CHECK(groups >= 1 && x.dims[3] % groups == 0 && y.dims[3] % groups == 0, Error::InvalidOp);
  TMCU_CHECK(w.dims[0] == y.dims[3] && w.dims[3] * groups == x.dims[3], Error::InvalidOp);
  return Error::Ok;
}

void conv2d_run(const OpContext& ctx) {
  const TensorView& w = ctx.inputs[1];
  const float* bias = ctx.num_inputs == 3 ? ctx.inputs[2].as<const float>() : nullptr;
  conv2d_f32(ctx.inputs[0].as<const float>(), shape4(ctx.inputs[0]), w.as<const float>(),
             w.dims[1], w.dims[2], bias, ctx.outputs[0].as<float>(), shape4(ctx.outputs[0]),
             conv_params(ctx.op.params_as_Conv2dParams()));
}

Error depthwise_check(const OpContext& ctx) {
  TMCU_CHECK(check::operands(ctx, 2, 3, 1, DType::F32), Error::InvalidOp);
  const TensorView& w = ctx.inputs[1];
  TMCU_CHECK(w.rank == 4 && w.dims[0] == 1, Error::InvalidOp);
  TMCU_TRY(conv_params_check(ctx, w.dims[1], w.dims[2]));
  const int32_t multiplier = ctx.op.params_as_Conv2dParams().multiplier();
  TMCU_CHECK(multiplier >= 1 && w.dims[3] == ctx.outputs[0].dims[3] &&
                 int64_t(ctx.inputs[0].dims[3]) * multiplier == w.dims[3],
             Error::InvalidOp);
  return Error::Ok;
}

void depthwise_run(const OpContext& ctx) {
  const TensorView& w = ctx.inputs[1];
  const schema::Conv2dParams p = ctx.op.params_as_Conv2dParams();
  const float* bias = ctx.num_inputs == 3 ? ctx.inputs[2].as<const float>() : nullptr;
  depthwise_conv2d_f32(ctx.inputs[0].as<const float>(), shape4(ctx.inputs[0]),
                       w.as<const float>(), w.dims[1], w.dims[2], p.multiplier(), bias,
                       ctx.outputs[0].as<float>(), shape4(ctx.outputs[0]), conv_params(p));
}

// ---- element-wise unary: clamp (relu, relu6, hardtanh), sigmoid, tanh -------

Error unary_check(const OpContext& ctx) {
  TMCU_CHECK(check::operands(ctx, 1, 1, 1, DType::F32), Error::InvalidOp);
  TMCU_CHECK(ctx.inputs[0].nbytes == ctx.outputs[0].nbytes, Error::InvalidOp);
  return Error::Ok;
}

Error clamp_check(const OpContext& ctx) {
  TMCU_TRY(unary_check(ctx));
  TMCU_CHECK(ctx.op.params_as_ClampParams().valid(), Error::InvalidOp);
  return Error::Ok;
}

void clamp_run(const OpContext& ctx) {
  const schema::ClampParams p = ctx.op.params_as_ClampParams();
  clamp_f32(ctx.inputs[0].as<const float>(), ctx.outputs[0].as<float>(),
            ctx.outputs[0].numel(), p.min(), p.max());
}

void sigmoid_run(const OpContext& ctx) {
  sigmoid_f32(ctx.inputs[0].as<const float>(), ctx.outputs[0].as<float>(),
              ctx.outputs[0].numel());
}

void tanh_run(const OpContext& ctx) {
  tanh_f32(ctx.inputs[0].as<const float>(), ctx.outputs[0].as<float>(), ctx.outputs[0].numel());
}

// ---- add / mul with broadcasting: all operands at the output's rank --------

Error binary_check(const OpContext& ctx) {
  TMCU_CHECK(check::operands(ctx, 2, 2, 1, DType::F32), Error::InvalidOp);
  TMCU_CHECK(check::broadcastable(ctx), Error::InvalidOp);
  TMCU_CHECK(ctx.op.params_as_BinaryParams().valid(), Error::InvalidOp);
  return Error::Ok;
}

template <void (*Fn)(const float*, const int32_t*, const float*, const int32_t*, float*,
                     const int32_t*, int32_t, ActRange)>
void binary_run(const OpContext& ctx) {
  const schema::BinaryParams p = ctx.op.params_as_BinaryParams();
  const TensorView& a = ctx.inputs[0];
  const TensorView& b = ctx.inputs[1];
  const TensorView& y = ctx.outputs[0];
  Fn(a.as<const float>(), a.dims, b.as<const float>(), b.dims, y.as<float>(), y.dims, y.rank,
     act_range(p.act_min(), p.act_max()));
}

// ---- pooling over NHWC ------------------------------------------------------

Error pool_check(const OpContext& ctx) {
  TMCU_CHECK(check::operands(ctx, 1, 1, 1, DType::F32), Error::InvalidOp);
  const schema::Pool2dParams p = ctx.op.params_as_Pool2dParams();
  TMCU_CHECK(p.valid(), Error::InvalidOp);
  TMCU_CHECK(check::small(p.kernel_h(), 1) && check::small(p.kernel_w(), 1) &&
                 check::small(p.stride_h(), 1) && check::small(p.stride_w(), 1) &&
                 check::small(p.dilation_h(), 1) && check::small(p.dilation_w(), 1) &&
                 check::small(p.pad_top(), 0) && check::small(p.pad_left(), 0) &&
                 p.divisor_override() >= 0,
             Error::InvalidOp);
  const TensorView& x = ctx.inputs[0];
  const TensorView& y = ctx.outputs[0];
  TMCU_CHECK(nhwc(x) && nhwc(y) && x.dims[0] == y.dims[0] && x.dims[3] == y.dims[3],
             Error::InvalidOp);
  TMCU_CHECK(window_out_ok(x.dims[1], y.dims[1], p.kernel_h(), p.stride_h(), p.pad_top(),
                           p.dilation_h()) &&
                 window_out_ok(x.dims[2], y.dims[2], p.kernel_w(), p.stride_w(), p.pad_left(),
                               p.dilation_w()),
             Error::InvalidOp);
  return Error::Ok;
}

Pool2dParams pool_params(const schema::Pool2dParams& p) {
  return Pool2dParams{p.kernel_h(),          p.kernel_w(),         p.stride_h(),
                      p.stride_w(),          p.pad_top(),          p.pad_left(),
                      p.dilation_h(),        p.dilation_w(),       p.count_include_pad(),
                      p.divisor_override(),  act_range(p.act_min(), p.act_max())};
}

void max_pool_run(const OpContext& ctx) {
  max_pool2d_f32(ctx.inputs[0].as<const float>(), shape4(ctx.inputs[0]),
                 ctx.outputs[0].as<float>(), shape4(ctx.outputs[0]),
                 pool_params(ctx.op.params_as_Pool2dParams()));
}

void avg_pool_run(const OpContext& ctx) {
  avg_pool2d_f32(ctx.inputs[0].as<const float>(), shape4(ctx.inputs[0]),
                 ctx.outputs[0].as<float>(), shape4(ctx.outputs[0]),
                 pool_params(ctx.op.params_as_Pool2dParams()));
}

// ---- mean over axes ---------------------------------------------------------

Error mean_check(const OpContext& ctx) {
  TMCU_CHECK(check::operands(ctx, 1, 1, 1, DType::F32), Error::InvalidOp);
  const schema::ReduceParams p = ctx.op.params_as_ReduceParams();
  const TensorView& x = ctx.inputs[0];
  TMCU_CHECK(p.valid() && x.rank >= 1 && p.axis_mask() != 0 &&
                 (p.axis_mask() >> x.rank) == 0,
             Error::InvalidOp);
  int64_t kept = 1;
  for (int32_t d = 0; d < x.rank; ++d) {
    if (((p.axis_mask() >> d) & 1) == 0) kept *= x.dims[d];
  }
  TMCU_CHECK(kept == ctx.outputs[0].numel(), Error::InvalidOp);
  return Error::Ok;
}

void mean_run(const OpContext& ctx) {
  const TensorView& x = ctx.inputs[0];
  mean_f32(x.as<const float>(), x.dims, x.rank, ctx.op.params_as_ReduceParams().axis_mask(),
           ctx.outputs[0].as<float>());
}

// ---- softmax over one axis --------------------------------------------------

Error softmax_check(const OpContext& ctx) {
  TMCU_CHECK(check::operands(ctx, 1, 1, 1, DType::F32), Error::InvalidOp);
  const schema::SoftmaxParams p = ctx.op.params_as_SoftmaxParams();
  const TensorView& x = ctx.inputs[0];
  TMCU_CHECK(p.valid() && p.axis() >= 0 && p.axis() < x.rank, Error::InvalidOp);
  TMCU_CHECK(check::same_dims(x, ctx.outputs[0]), Error::InvalidOp);
  return Error::Ok;
}

void softmax_run(const OpContext& ctx) {
  const TensorView& x = ctx.inputs[0];
  const int32_t axis = ctx.op.params_as_SoftmaxParams().axis();
  softmax_f32(x.as<const float>(), ctx.outputs[0].as<float>(),
              int32_t(check::extent(x, 0, axis)), x.dims[axis],
              int32_t(check::extent(x, axis + 1, x.rank)));
}

// ---- data movement: permute, concat, copy (any dtype) -----------------------

Error same_dtype_operands(const OpContext& ctx, uint32_t min_in, uint32_t max_in) {
  TMCU_CHECK(ctx.num_inputs >= 1, Error::InvalidOp);
  TMCU_CHECK(check::operands(ctx, min_in, max_in, 1, ctx.inputs[0].dtype), Error::InvalidOp);
  return Error::Ok;
}

Error permute_check(const OpContext& ctx) {
  TMCU_TRY(same_dtype_operands(ctx, 1, 1));
  const schema::PermuteParams p = ctx.op.params_as_PermuteParams();
  TMCU_CHECK(p.valid(), Error::InvalidOp);
  const TensorView& x = ctx.inputs[0];
  const TensorView& y = ctx.outputs[0];
  const fb::Vector<int32_t> perm = p.perm();
  TMCU_CHECK(x.rank >= 1 && y.rank == x.rank && perm.size() == uint32_t(x.rank),
             Error::InvalidOp);
  TMCU_CHECK(check::disjoint(x, y), Error::InvalidOp);  // the kernel copies with memcpy
  uint32_t seen = 0;
  for (int32_t d = 0; d < x.rank; ++d) {
    const int32_t from = perm[uint32_t(d)];
    TMCU_CHECK(from >= 0 && from < x.rank && ((seen >> from) & 1) == 0, Error::InvalidOp);
    seen |= 1u << from;
    TMCU_CHECK(y.dims[d] == x.dims[from], Error::InvalidOp);
  }
  return Error::Ok;
}

void permute_run(const OpContext& ctx) {
  const TensorView& x = ctx.inputs[0];
  const fb::Vector<int32_t> perm_fb = ctx.op.params_as_PermuteParams().perm();
  int32_t perm[kMaxRank];
  for (int32_t d = 0; d < x.rank; ++d) perm[d] = perm_fb[uint32_t(d)];
  permute(x.data, x.dims, x.rank, perm, ctx.outputs[0].data, dtype_size(x.dtype));
}

Error concat_check(const OpContext& ctx) {
  TMCU_TRY(same_dtype_operands(ctx, ctx.num_inputs, kMaxInputs));
  const schema::ConcatParams p = ctx.op.params_as_ConcatParams();
  const TensorView& y = ctx.outputs[0];
  TMCU_CHECK(p.valid() && p.axis() >= 0 && p.axis() < y.rank, Error::InvalidOp);
  int64_t total = 0;
  for (uint32_t i = 0; i < ctx.num_inputs; ++i) {
    const TensorView& x = ctx.inputs[i];
    TMCU_CHECK(x.rank == y.rank && check::disjoint(x, y), Error::InvalidOp);
    for (int32_t d = 0; d < y.rank; ++d) {
      TMCU_CHECK(d == p.axis() || x.dims[d] == y.dims[d], Error::InvalidOp);
    }
    total += x.dims[p.axis()];
  }
  TMCU_CHECK(total == y.dims[p.axis()], Error::InvalidOp);
  return Error::Ok;
}

void concat_run(const OpContext& ctx) {
  const int32_t axis = ctx.op.params_as_ConcatParams().axis();
  const void* srcs[kMaxInputs];
  size_t inner[kMaxInputs];
  const size_t elem = dtype_size(ctx.outputs[0].dtype);
  for (uint32_t i = 0; i < ctx.num_inputs; ++i) {
    srcs[i] = ctx.inputs[i].data;
    inner[i] = size_t(check::extent(ctx.inputs[i], axis, ctx.inputs[i].rank)) * elem;
  }
  concat(srcs, inner, int32_t(ctx.num_inputs), int32_t(check::extent(ctx.outputs[0], 0, axis)),
         ctx.outputs[0].data);
}

Error copy_check(const OpContext& ctx) {
  TMCU_TRY(same_dtype_operands(ctx, 1, 1));
  TMCU_CHECK(ctx.inputs[0].nbytes == ctx.outputs[0].nbytes, Error::InvalidOp);
  return Error::Ok;
}

void copy_run(const OpContext& ctx) {
  std::memmove(ctx.outputs[0].data, ctx.inputs[0].data, ctx.outputs[0].nbytes);
}

// ---- constant padding (F32 or I8): out dim d = before[d] + in dim d + after[d]

Error pad_check(const OpContext& ctx) {
  TMCU_TRY(same_dtype_operands(ctx, 1, 1));
  const TensorView& x = ctx.inputs[0];
  const TensorView& y = ctx.outputs[0];
  TMCU_CHECK((x.dtype == DType::F32 || x.dtype == DType::I8) && check::disjoint(x, y), Error::InvalidOp);
  const schema::PadParams p = ctx.op.params_as_PadParams();
  TMCU_CHECK(p.valid(), Error::InvalidOp);
  const fb::Vector<int32_t> before = p.before();
  const fb::Vector<int32_t> after = p.after();
  TMCU_CHECK(x.rank >= 1 && y.rank == x.rank && before.size() == uint32_t(x.rank) &&
                 after.size() == uint32_t(x.rank),
             Error::InvalidOp);
  for (int32_t d = 0; d < x.rank; ++d) {
    const int32_t b = before[uint32_t(d)];
    const int32_t a = after[uint32_t(d)];
    TMCU_CHECK(check::small(b, 0) && check::small(a, 0) &&
                   int64_t(b) + x.dims[d] + a == int64_t(y.dims[d]),
               Error::InvalidOp);
  }
  if (x.dtype == DType::I8) {  // one quantization in and out; the value an int8
    TMCU_CHECK(p.qvalue() >= -128 && p.qvalue() <= 127 && x.scale == y.scale &&
                   x.zero_point == y.zero_point,
               Error::InvalidOp);
  }
  return Error::Ok;
}

void pad_run(const OpContext& ctx) {
  const TensorView& x = ctx.inputs[0];
  const schema::PadParams p = ctx.op.params_as_PadParams();
  int32_t before[kMaxRank];
  int32_t after[kMaxRank];
  for (int32_t d = 0; d < x.rank; ++d) {
    before[d] = p.before()[uint32_t(d)];
    after[d] = p.after()[uint32_t(d)];
  }
  const float fvalue = p.value();
  const int8_t qvalue = static_cast<int8_t>(p.qvalue());
  const void* value = x.dtype == DType::F32 ? static_cast<const void*>(&fvalue)
                                            : static_cast<const void*>(&qvalue);
  pad(x.data, x.dims, x.rank, before, after, value, ctx.outputs[0].data, dtype_size(x.dtype));
}

// ---- hardswish ----------------------------------------------------------------

void hardswish_run(const OpContext& ctx) {
  hardswish_f32(ctx.inputs[0].as<const float>(), ctx.outputs[0].as<float>(),
                ctx.outputs[0].numel());
}

// ---- batch matmul: a [..., M, K], b [..., K, N] -> [..., M, N], same batch dims

Error matmul_shapes_check(const OpContext& ctx) {
  const TensorView& a = ctx.inputs[0];
  const TensorView& b = ctx.inputs[1];
  const TensorView& y = ctx.outputs[0];
  const int32_t r = y.rank;
  TMCU_CHECK(r >= 2 && a.rank == r && b.rank == r, Error::InvalidOp);
  for (int32_t d = 0; d < r - 2; ++d) {
    TMCU_CHECK(a.dims[d] == y.dims[d] && b.dims[d] == y.dims[d], Error::InvalidOp);
  }
  TMCU_CHECK(a.dims[r - 1] == b.dims[r - 2] && a.dims[r - 2] == y.dims[r - 2] &&
                 b.dims[r - 1] == y.dims[r - 1],
             Error::InvalidOp);
  return Error::Ok;
}

Error batch_matmul_check(const OpContext& ctx) {
  TMCU_CHECK(check::operands(ctx, 2, 2, 1, DType::F32), Error::InvalidOp);
  TMCU_CHECK(check::disjoint(ctx.inputs[0], ctx.outputs[0]) && check::disjoint(ctx.inputs[1], ctx.outputs[0]),
             Error::InvalidOp);
  return matmul_shapes_check(ctx);
}

void batch_matmul_run(const OpContext& ctx) {
  const TensorView& a = ctx.inputs[0];
  const TensorView& b = ctx.inputs[1];
  const int32_t r = a.rank;
  batch_matmul_f32(a.as<const float>(), b.as<const float>(), ctx.outputs[0].as<float>(),
                   int32_t(check::extent(a, 0, r - 2)), a.dims[r - 2], a.dims[r - 1],
                   b.dims[r - 1]);
}

}  // namespace

const Kernel kLinearF32 = {linear_check, linear_run};
const Kernel kConv2dF32 = {conv2d_check, conv2d_run};
const Kernel kDepthwiseConv2dF32 = {depthwise_check, depthwise_run};
const Kernel kClampF32 = {clamp_check, clamp_run};
const Kernel kSigmoidF32 = {unary_check, sigmoid_run};
const Kernel kTanhF32 = {unary_check, tanh_run};
const Kernel kAddF32 = {binary_check, binary_run<add_f32>};
const Kernel kMulF32 = {binary_check, binary_run<mul_f32>};
const Kernel kMaxPool2dF32 = {pool_check, max_pool_run};
const Kernel kAvgPool2dF32 = {pool_check, avg_pool_run};
const Kernel kMeanF32 = {mean_check, mean_run};
const Kernel kSoftmaxF32 = {softmax_check, softmax_run};
const Kernel kPermute = {permute_check, permute_run};
const Kernel kConcat = {concat_check, concat_run};
const Kernel kCopy = {copy_check, copy_run};
const Kernel kPad = {pad_check, pad_run};
const Kernel kMaximumF32 = {binary_check, binary_run<maximum_f32>};
const Kernel kMinimumF32 = {binary_check, binary_run<minimum_f32>};
const Kernel kHardswishF32 = {unary_check, hardswish_run};
const Kernel kBatchMatmulF32 = {batch_matmul_check, batch_matmul_run};

}  // namespace portable
}  // namespace torchmcu
