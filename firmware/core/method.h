// Method: a program bound to the memory the application gives it, ready to
// execute. load() validates every tensor and op once (bounds, dtypes, the
// kernels' own checks); execute() then runs the op list with no lookups
// beyond reading the program and no checks that load already made.
//
// Memory: the application owns one buffer per arena the plan names (see the
// generated model_arenas.h), each at least the planned size, 16-byte
// aligned. The Method itself is the only other state (a few dozen bytes).
#ifndef TORCHMCU_CORE_METHOD_H_
#define TORCHMCU_CORE_METHOD_H_

#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "core/program.h"
#include "core/result.h"
#include "core/tensor.h"

namespace torchmcu {

constexpr uint32_t kMaxArenas = 4;

struct ArenaSpan {
  uint8_t* data;
  size_t size;
};

/// Called around each op when profiling; `index` is the op's position.
class OpObserver {
 public:
  virtual void op_begin(uint32_t index) = 0;
  virtual void op_end(uint32_t index) = 0;

 protected:
  ~OpObserver() = default;
};

class Method {
 public:
  Method() = default;

  static Result<Method> load(const Program& program, const ArenaSpan* arenas,
                             size_t num_arenas);

  /// Runs every op in order. Errors only on a misuse the load could not see.
  Error execute(OpObserver* observer = nullptr) const;

  uint32_t num_inputs() const { return program_.root().inputs().size(); }
  uint32_t num_outputs() const { return program_.root().outputs().size(); }
  uint32_t num_ops() const { return program_.root().ops().size(); }
  /// Views of the model's inputs (to fill before execute) and outputs; an
  /// index out of range gives an empty view (data == nullptr).
  TensorView input(uint32_t i) const;
  TensorView output(uint32_t i) const;

 private:
  TensorView view(int32_t tensor_index) const;
  /// Fills *v for a tensor index known to be in range, in place.
  void fill(int32_t tensor_index, TensorView* v) const;

  Program program_;
  // The tensor table, looked up once at load: view() runs for every operand
  // of every op.
  fb::TableVector<schema::Tensor> tensors_;
  ArenaSpan arenas_[kMaxArenas] = {};
  uint32_t num_arenas_ = 0;
};

}  // namespace torchmcu

#endif  // TORCHMCU_CORE_METHOD_H_
