// Float32 portable kernels: the plain math, free of the program format.
//
// Layouts: 4-D activations are NHWC (channels last). Convolution weights are
// OHWI ([out_channels][kernel_h][kernel_w][in_channels / groups]); depthwise
// weights are [kernel_h][kernel_w][out_channels] (CMSIS-NN's 1HWC), with
// out_channels = in_channels * multiplier and output channel c reading input
// channel c / multiplier. Every buffer is dense and row-major in that layout.
//
// Ownership: kernels never allocate; pointers are borrowed for the call.
// Input and output may be the same buffer only where a function says so.
// Shapes are trusted: the executor checks them when the program is loaded.
#ifndef TORCHMCU_KERNELS_PORTABLE_F32_H_
#define TORCHMCU_KERNELS_PORTABLE_F32_H_

#include <cstddef>
#include <cstdint>

namespace torchmcu {
namespace portable {

/// Fused activation: outputs are clamped to [min, max]. No activation is
/// (-inf, +inf); ReLU is (0, +inf); ReLU6 is (0, 6).
struct ActRange {
  float min;
  float max;
};

/// Dimensions of an NHWC tensor.
struct Shape4 {
  int32_t n, h, w, c;
};

/// out[b][o] = act(bias[o] + sum_i in[b][i] * w[o][i]).
/// w is [out_features][in_features]; bias may be null (zero).
void linear_f32(const float* in, const float* w, const float* bias, float* out,
                int32_t batch, int32_t in_features, int32_t out_features,
                ActRange act);

struct Conv2dParams {
  int32_t stride_h, stride_w;
  int32_t pad_top, pad_left;  // zero padding; bottom/right follow from shapes
  int32_t dilation_h, dilation_w;
  int32_t groups;             // in.c and out.c are both multiples of groups
  ActRange act;
};

/// Grouped 2-D convolution. in: NHWC `in_shape`; w: OHWI with
/// I = in_shape.c / groups; bias may be null; out: NHWC `out_shape`.
/// Taps that fall in the padding read zero.
void conv2d_f32(const float* in, Shape4 in_shape, const float* w,
                int32_t kernel_h, int32_t kernel_w, const float* bias,
                float* out, Shape4 out_shape, const Conv2dParams& p);

/// Depthwise 2-D convolution (groups == in channels). w: [kh][kw][out.c],
/// out.c = in.c * multiplier; p.groups is ignored.
void depthwise_conv2d_f32(const float* in, Shape4 in_shape, const float* w,
                          int32_t kernel_h, int32_t kernel_w, int32_t multiplier,
                          const float* bias, float* out, Shape4 out_shape,
                          const Conv2dParams& p);

/// out[i] = min(max(in[i], lo), hi) for i < n. in == out is allowed.
void clamp_f32(const float* in, float* out, size_t n, float lo, float hi);

/// out[i] = 1 / (1 + exp(-in[i])). in == out is allowed.
void sigmoid_f32(const float* in, float* out, size_t n);

/// out[i] = tanh(in[i]). in == out is allowed.
void tanh_f32(const float* in, float* out, size_t n);

/// Broadcasting element-wise ops. All three shapes have `rank` dims
/// (1 <= rank <= kMaxRank); a_dims[d] and b_dims[d] are out_dims[d] or 1.
/// out may alias a or b when that operand has out's shape.
constexpr int32_t kMaxRank = 6;
void add_f32(const float* a, const int32_t* a_dims, const float* b,
             const int32_t* b_dims, float* out, const int32_t* out_dims,
             int32_t rank, ActRange act);
void mul_f32(const float* a, const int32_t* a_dims, const float* b,
             const int32_t* b_dims, float* out, const int32_t* out_dims,
             int32_t rank, ActRange act);
/// Element-wise max / min (torch.maximum / torch.minimum: a NaN operand gives
/// NaN), broadcasting as add_f32.
void maximum_f32(const float* a, const int32_t* a_dims, const float* b,
                 const int32_t* b_dims, float* out, const int32_t* out_dims,
                 int32_t rank, ActRange act);
void minimum_f32(const float* a, const int32_t* a_dims, const float* b,
                 const int32_t* b_dims, float* out, const int32_t* out_dims,
                 int32_t rank, ActRange act);

/// out[i] = in[i] * min(max(in[i] + 3, 0), 6) / 6. in == out is allowed.
void hardswish_f32(const float* in, float* out, size_t n);

/// Batched matrix product: for each of `batch` matrices,
/// out[b][i][j] = sum_k a[b][i][k] * bm[b][k][j] with a [batch][m][k],
/// bm [batch][k][n], out [batch][m][n]. out must not overlap a or bm.
void batch_matmul_f32(const float* a, const float* bm, float* out, int32_t batch,
                      int32_t m, int32_t k, int32_t n);

struct Pool2dParams {
  int32_t kernel_h, kernel_w;
  int32_t stride_h, stride_w;
  int32_t pad_top, pad_left;
  int32_t dilation_h, dilation_w;  // max pool only; 1 for avg pool
  bool count_include_pad;          // avg pool: divide by the full window
  int32_t divisor_override;        // avg pool: > 0 replaces the divisor
  ActRange act;
};

/// Max pooling over NHWC; padded taps are ignored (as -inf). Windows that
/// start past the input (ceil_mode) take only their in-bounds taps.
void max_pool2d_f32(const float* in, Shape4 in_shape, float* out,
                    Shape4 out_shape, const Pool2dParams& p);

/// Average pooling over NHWC with PyTorch's divisor rules: the window is
/// clipped to input + padding (bottom/right padding taken equal to pad_top /
/// pad_left, as PyTorch pads symmetrically); count_include_pad divides by
/// that clipped size, otherwise by the number of in-bounds taps;
/// divisor_override wins.
void avg_pool2d_f32(const float* in, Shape4 in_shape, float* out,
                    Shape4 out_shape, const Pool2dParams& p);

/// Transposed 2-D convolution (TFLite's TRANSPOSE_CONV, PyTorch's
/// conv_transpose2d cropped at pad_top / pad_left to out_shape): output pixel
/// (oy, ox) = bias + sum of in[iy][ix] * w[oc][ky][kx] over the taps with
/// oy = iy * stride_h - pad_top + ky, ox likewise. w: [out_c][kh][kw][in_c];
/// bias may be null; dilation and groups of p are 1.
void transpose_conv2d_f32(const float* in, Shape4 in_shape, const float* w, int32_t kernel_h,
                          int32_t kernel_w, const float* bias, float* out, Shape4 out_shape,
                          const Conv2dParams& p);

/// Nearest-neighbour resizing of NHWC elements of elem_size bytes (any
/// dtype): out[n][i][j] = in[n][rows(i)][cols(j)], with TFLite's
/// GetNearestNeighbor without align_corners: min(floor((o + h) * (in /
/// out)), in - 1) in float32, h = 0.5 with half_pixel_centers else 0.
void resize_nearest(const void* in, Shape4 in_shape, void* out, Shape4 out_shape, size_t elem_size,
                    bool half_pixel_centers);

/// Bilinear resizing as PyTorch's upsample_bilinear2d: with align_corners
/// the source position is o * (in - 1) / (out - 1), else (the half-pixel
/// centres of TFLite's half_pixel_centers) max((o + 0.5) * in / out - 0.5, 0).
void resize_bilinear_f32(const float* in, Shape4 in_shape, float* out, Shape4 out_shape, bool align_corners);

/// Adaptive average pooling: output (i, j) averages rows [floor(i H / OH),
/// ceil((i + 1) H / OH)) and the columns likewise (PyTorch's windows).
void adaptive_avg_pool2d_f32(const float* in, Shape4 in_shape, float* out, Shape4 out_shape, ActRange act);

/// Mean over the axes whose bit is set in axis_mask (bit d = axis d),
/// 1 <= rank <= kMaxRank. out has the reduced axes removed (or kept as 1:
/// same memory order).
void mean_f32(const float* in, const int32_t* dims, int32_t rank,
              uint32_t axis_mask, float* out);

/// Softmax over one axis: the tensor is viewed as [outer][axis][inner].
void softmax_f32(const float* in, float* out, int32_t outer, int32_t axis,
                 int32_t inner);

/// out = in permuted: out dim d is in dim perm[d], 1 <= rank <= kMaxRank.
/// Elements are elem_size bytes (any dtype). in and out must not overlap.
void permute(const void* in, const int32_t* in_dims, int32_t rank,
             const int32_t* perm, void* out, size_t elem_size);

/// Concatenation along one axis of tensors viewed as [outer][inner_bytes_i]:
/// out row r is inputs[0] row r, then inputs[1] row r, ...
/// inner_bytes[i] = dims_i[axis] * prod(dims_i[axis+1:]) * elem_size.
void concat(const void* const* inputs, const size_t* inner_bytes,
            int32_t num_inputs, int32_t outer, void* out);

/// Constant padding: out dim d = before[d] + in_dims[d] + after[d] (all >= 0),
/// 1 <= rank <= kMaxRank; every element outside the copy of `in` is `value`
/// (elem_size bytes, any dtype). in and out must not overlap.
void pad(const void* in, const int32_t* in_dims, int32_t rank,
         const int32_t* before, const int32_t* after, const void* value,
         void* out, size_t elem_size);

}  // namespace portable
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_PORTABLE_F32_H_
