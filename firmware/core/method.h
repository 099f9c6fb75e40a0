// Method: a program bound to the memory the application gives it, ready to
// execute. load() checks the program's executable section once (every
// operand of every op, the model inputs and outputs, the kernels' own
// checks, the init copies) and makes the init copies; execute() then runs
// the op records in place: per op, one table lookup and one call.
//
// Memory: the application owns one buffer per arena the plan names (see the
// generated model_arenas.h), each at least the planned size, 16-byte
// aligned. The Method itself is the only other state (a few dozen bytes:
// sizeof(Method)), and holds no pointer into the program's tables beyond
// those it checked.
#ifndef TORCHMCU_CORE_METHOD_H_
#define TORCHMCU_CORE_METHOD_H_

#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "core/kernel.h"
#include "core/program.h"
#include "core/result.h"
#include "core/tensor.h"

namespace torchmcu {

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

  /// Runs every op in order. Errors only on a misuse the load could not see,
  /// or when a delegate's hardware fails (Error::DelegateFailed: the ops
  /// after it do not run).
  Error execute(OpObserver* observer = nullptr) const;

  uint32_t num_inputs() const { return num_inputs_; }
  uint32_t num_outputs() const { return num_outputs_; }
  uint32_t num_ops() const { return num_ops_; }
  /// Views of the model's inputs (to fill before execute) and outputs; an
  /// index out of range gives an empty view (data == nullptr).
  TensorView input(uint32_t i) const;
  TensorView output(uint32_t i) const;

 private:
  TensorView view(const schema::IoTensor& t) const;

  Regions regions_;
  const schema::ExecOp* ops_ = nullptr;
  const schema::Operand* operands_ = nullptr;
  const uint32_t* args_ = nullptr;
  const schema::IoTensor* inputs_ = nullptr;
  const schema::IoTensor* outputs_ = nullptr;
  uint32_t num_ops_ = 0;
  uint32_t num_inputs_ = 0;
  uint32_t num_outputs_ = 0;
};

}  // namespace torchmcu

#endif  // TORCHMCU_CORE_METHOD_H_
