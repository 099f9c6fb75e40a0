#include "core/method.h"

#include "core/kernel.h"

namespace torchmcu {
namespace {

Error check_tensor(const schema::Tensor& t, const Program& program,
                   const schema::Program& root) {
  const uint32_t elem = dtype_size(t.dtype());
  TMCU_CHECK(elem != 0, Error::InvalidTensor);
  const fb::Vector<int32_t> dims = t.dims();
  TMCU_CHECK(dims.size() <= uint32_t(kMaxRank), Error::InvalidTensor);
  uint64_t bytes = elem;
  for (uint32_t d = 0; d < dims.size(); ++d) {
    TMCU_CHECK(dims[d] >= 0, Error::InvalidTensor);
    bytes *= uint32_t(dims[d]);
    TMCU_CHECK(bytes <= 0x7fffffffu, Error::InvalidTensor);
  }
  TMCU_CHECK(bytes == t.nbytes() && bytes > 0, Error::InvalidTensor);
  TMCU_CHECK(t.offset() % elem == 0, Error::InvalidTensor);
  uint64_t limit = 0;
  switch (t.region()) {
    case schema::Region::CONSTANT:
      limit = program.constants_size();
      break;
    case schema::Region::ARENA:
      TMCU_CHECK(t.arena() < root.arenas().size(), Error::InvalidTensor);
      limit = root.arenas()[t.arena()].size();
      break;
    default:
      return Error::InvalidTensor;
  }
  TMCU_CHECK(uint64_t(t.offset()) + bytes <= limit, Error::InvalidTensor);
  return Error::Ok;
}

// An index list (model inputs/outputs, op outputs) must name arena tensors:
// nothing ever writes to the constant segment.
Error check_writable(const fb::Vector<int32_t>& indices, const schema::Program& root) {
  for (uint32_t i = 0; i < indices.size(); ++i) {
    const int32_t t = indices[i];
    TMCU_CHECK(t >= 0 && uint32_t(t) < root.tensors().size(), Error::InvalidOp);
    TMCU_CHECK(root.tensors()[uint32_t(t)].region() == schema::Region::ARENA,
               Error::InvalidOp);
  }
  return Error::Ok;
}

// Builds the operand views of one op; checked at load, trusted at run.
struct OpViews {
  TensorView inputs[kMaxInputs];
  TensorView outputs[kMaxOutputs];
};

}  // namespace

TensorView Method::view(int32_t index) const {
  TensorView v;
  if (index >= 0 && uint32_t(index) < tensors_.size()) fill(index, &v);
  return v;
}

void Method::fill(int32_t index, TensorView* v) const {
  // index checked at load (execute) or by view().
  const schema::Tensor t = tensors_[uint32_t(index)];
  v->constant = t.region() == schema::Region::CONSTANT;
  uint8_t* base = v->constant ? const_cast<uint8_t*>(program_.constants()) : arenas_[t.arena()].data;
  v->data = base + t.offset();
  v->dtype = t.dtype();
  const fb::Vector<int32_t> dims = t.dims();
  v->rank = int32_t(dims.size());
  for (int32_t d = 0; d < v->rank; ++d) v->dims[d] = dims[uint32_t(d)];
  v->nbytes = t.nbytes();
  v->scale = t.scale();
  v->zero_point = t.zero_point();
}

TensorView Method::input(uint32_t i) const {
  return i < num_inputs() ? view(program_.root().inputs()[i]) : TensorView();
}

TensorView Method::output(uint32_t i) const {
  return i < num_outputs() ? view(program_.root().outputs()[i]) : TensorView();
}

Result<Method> Method::load(const Program& program, const ArenaSpan* arenas,
                            size_t num_arenas) {
  const schema::Program root = program.root();
  if (!root.valid()) return Error::InvalidArgument;
  if (num_arenas > 0 && arenas == nullptr) return Error::InvalidArgument;
  if (root.arenas().size() != num_arenas || num_arenas > kMaxArenas) {
    return Error::ArenaMismatch;
  }
  Method m;
  m.program_ = program;
  m.tensors_ = root.tensors();
  m.num_arenas_ = uint32_t(num_arenas);
  for (uint32_t i = 0; i < num_arenas; ++i) {
    if (arenas[i].data == nullptr || (reinterpret_cast<uintptr_t>(arenas[i].data) & 15) != 0) {
      return Error::ArenaMismatch;
    }
    if (arenas[i].size < root.arenas()[i].size()) return Error::ArenaTooSmall;
    m.arenas_[i] = arenas[i];
  }

  const auto tensors = root.tensors();
  for (uint32_t i = 0; i < tensors.size(); ++i) {
    TMCU_TRY(check_tensor(tensors[i], program, root));
  }
  TMCU_TRY(check_writable(root.inputs(), root));
  TMCU_TRY(check_writable(root.outputs(), root));

  const auto ops = root.ops();
  for (uint32_t i = 0; i < ops.size(); ++i) {
    const schema::Op op = ops[i];
    const uint32_t code = uint32_t(op.code());
    if (code >= schema::kNumOpCode) return Error::InvalidOp;
    const Kernel* kernel = kKernelTable[code];
    if (kernel == nullptr) return Error::KernelMissing;
    const fb::Vector<int32_t> ins = op.inputs();
    const fb::Vector<int32_t> outs = op.outputs();
    TMCU_CHECK(ins.size() <= kMaxInputs && outs.size() <= kMaxOutputs, Error::InvalidOp);
    TMCU_TRY(check_writable(outs, root));
    OpViews views;
    for (uint32_t k = 0; k < ins.size(); ++k) {
      TMCU_CHECK(ins[k] >= -1 && ins[k] < int32_t(tensors.size()), Error::InvalidOp);
      views.inputs[k] = m.view(ins[k]);
    }
    for (uint32_t k = 0; k < outs.size(); ++k) views.outputs[k] = m.view(outs[k]);
    const OpContext ctx{op, views.inputs, ins.size(), views.outputs, outs.size()};
    TMCU_TRY(kernel->check(ctx));
  }
  return m;
}

Error Method::execute(OpObserver* observer) const {
  const auto ops = program_.root().ops();
  OpViews views;
  for (uint32_t i = 0; i < ops.size(); ++i) {
    const schema::Op op = ops[i];
    // Checked at load: code in range, kernel present, operand counts and indices.
    const Kernel* kernel = kKernelTable[uint32_t(op.code())];
    const fb::Vector<int32_t> ins = op.inputs();
    const fb::Vector<int32_t> outs = op.outputs();
    for (uint32_t k = 0; k < ins.size(); ++k) {
      if (ins[k] < 0) {
        views.inputs[k] = TensorView();  // an absent optional operand
      } else {
        fill(ins[k], &views.inputs[k]);
      }
    }
    for (uint32_t k = 0; k < outs.size(); ++k) fill(outs[k], &views.outputs[k]);
    const OpContext ctx{op, views.inputs, ins.size(), views.outputs, outs.size()};
    if (observer != nullptr) observer->op_begin(i);
    kernel->run(ctx);
    if (observer != nullptr) observer->op_end(i);
  }
  return Error::Ok;
}

}  // namespace torchmcu
