// The shape_views family's math (PERMUTE, CONCAT, PAD; SLICE and COPY are
// in ops_shape_views.cc): byte movers for any dtype.
#ifndef TORCHMCU_KERNELS_PORTABLE_SHAPE_VIEWS_SHAPE_VIEWS_H_
#define TORCHMCU_KERNELS_PORTABLE_SHAPE_VIEWS_SHAPE_VIEWS_H_

#include <cstddef>
#include <cstdint>

#include "kernels/portable/common/types.h"

namespace torchmcu {
namespace portable {

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

/// out row i (row_bytes bytes) = table row ids[i], or zeros for an id
/// outside [0, rows) (GATHER: an embedding lookup).
void gather(const void* table, int32_t rows, size_t row_bytes, const int32_t* ids, int32_t count, void* out);

}  // namespace portable
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_PORTABLE_SHAPE_VIEWS_SHAPE_VIEWS_H_
