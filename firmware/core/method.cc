#include "core/method.h"

#include <cstring>

namespace torchmcu {
namespace {

// What load() knows of the regions while it checks: the bytes the plan gives
// each location (0 where there is none).
struct Limits {
  uint32_t bytes[kNumLocations];
  uint32_t num_locations;  // kLocArena0 + the number of arenas
};

// Two byte ranges are disjoint.
bool apart(const uint8_t* a, size_t na, const uint8_t* b, size_t nb) {
  return a + na <= b || b + nb <= a;
}

#if TORCHMCU_VERIFY

// Every operand record on its own (see core/kernel.h for what the kernels
// add): in one pass, whatever op it belongs to.
Error check_operands(const schema::Operand* o, uint32_t n, const Limits& limits) {
  const uint32_t arenas_end = limits.num_locations;
  for (const schema::Operand* const end = o + n; o != end; ++o) {
    const uint32_t loc = o->location;
    const uint32_t offset = o->offset;
    const uint32_t nbytes = o->nbytes;
    if (loc - kLocConstant < arenas_end - kLocConstant) {  // the constant segment or an arena
      const uint32_t dtype = uint32_t(o->dtype);
      const uint32_t limit = limits.bytes[loc];
      // nbytes - 1 >= limit: none, or more than the region (wraps for 0).
      if (dtype >= schema::kNumDType || o->rank > uint32_t(kMaxRank) ||
          (offset & (kDTypeBytes[dtype] - 1u)) != 0 || nbytes - 1u >= limit || offset > limit - nbytes) {
        return Error::InvalidTensor;
      }
    } else if (loc == kLocAbsent) {  // optional; kernels decide. Null data: no offset.
      TMCU_CHECK((offset | nbytes) == 0, Error::InvalidTensor);
    } else {
      return loc == kLocNoTensor ? Error::InvalidOp : Error::InvalidTensor;
    }
  }
  return Error::Ok;
}

// A model input or output: an arena tensor whose dims give its bytes.
Error check_io(const schema::IoTensor& t, const Limits& limits) {
  const uint32_t loc = t.location;
  TMCU_CHECK(loc != kLocNoTensor && loc >= kLocArena0, Error::InvalidOp);  // written by the app
  const schema::Operand o{t.offset, t.nbytes, t.location, t.dtype, t.rank};
  TMCU_TRY(check_operands(&o, 1, limits));
  uint64_t bytes = kDTypeBytes[uint32_t(t.dtype)];
  for (uint32_t d = 0; d < t.rank; ++d) {
    const uint32_t v = uint32_t(t.dims[d]);
    TMCU_CHECK(v - 1 < 0x7fffffffu, Error::InvalidTensor);  // 1 <= dim < 2^31
    bytes *= v;
    TMCU_CHECK(bytes <= 0x7fffffffu, Error::InvalidTensor);
  }
  TMCU_CHECK(bytes == t.nbytes, Error::InvalidTensor);
  return Error::Ok;
}

// One op's record: its kernel, its operand and argument ranges inside the
// section, its outputs in arenas and sharing no byte with its inputs (but as
// the kernel's inplace mask allows: the very same bytes) nor with each other;
// then the kernel's own check. The regions are disjoint (checked first), so
// only operands in the same region can meet: compared by offset.
Error check_op(const schema::ExecOp& op, const Regions& regions, const schema::Operand* operands,
               uint32_t num_operands, const uint32_t* args, uint32_t num_words) {
  const uint32_t code = uint32_t(op.code);
  TMCU_CHECK(code < schema::kNumOpCode, Error::InvalidOp);
  const Kernel* kernel = kKernelTable[code];
  if (kernel == nullptr) return Error::KernelMissing;
  TMCU_CHECK((kernel->run == nullptr) != (kernel->invoke == nullptr), Error::Internal);
  const uint32_t nin = op.num_inputs;
  const uint32_t nout = op.num_outputs;
  TMCU_CHECK(nin <= kMaxInputs && nout - 1 < kMaxOutputs, Error::InvalidOp);
  const uint32_t first = op.operands;
  TMCU_CHECK(first <= num_operands && nin + nout <= num_operands - first && op.args <= num_words &&
                 op.num_args <= num_words - op.args,
             Error::InvalidProgram);
  const schema::Operand* const ins = operands + first;
  const schema::Operand* const outs = ins + nin;
  for (uint32_t o = 0; o < nout; ++o) {
    const uint32_t loc = outs[o].location;
    // Nothing ever writes to the constant segment (nor is an output absent).
    TMCU_CHECK(loc >= kLocArena0, Error::InvalidOp);
    const uint32_t lo = outs[o].offset;
    const uint32_t hi = lo + outs[o].nbytes;  // both inside the region: no wrap
    for (const schema::Operand* p = ins; p != outs + o; ++p) {  // inputs, then earlier outputs
      if (p->location != loc || p->offset + p->nbytes <= lo || hi <= p->offset) continue;
      const uint32_t i = uint32_t(p - ins);
      const bool same = p->offset == lo && p->nbytes == outs[o].nbytes;
      TMCU_CHECK(same && o == 0 && i < nin && ((kernel->inplace >> i) & 1) != 0, Error::InvalidOp);
    }
  }
  return kernel->check(OpContext(regions, op, ins, args + op.args));
}
#endif  // TORCHMCU_VERIFY

}  // namespace

Result<Method> Method::load(const Program& program, const ArenaSpan* arenas,
                            size_t num_arenas) {
  const schema::Program root = program.root();
  if (!root.valid()) return Error::InvalidArgument;
  if (num_arenas > 0 && arenas == nullptr) return Error::InvalidArgument;
  const auto specs = root.arenas();
  if (specs.size() != num_arenas || num_arenas > kMaxArenas) return Error::ArenaMismatch;

  Method m;
  Limits limits;  // every entry set below
  for (uint32_t k = 0; k < kNumLocations; ++k) limits.bytes[k] = 0;
  limits.num_locations = kLocArena0 + uint32_t(num_arenas);
  m.regions_.base[kLocConstant] = const_cast<uint8_t*>(program.constants());
  limits.bytes[kLocConstant] = program.constants_size();
  for (uint32_t i = 0; i < num_arenas; ++i) {
    uint8_t* const data = arenas[i].data;
    if (data == nullptr || (reinterpret_cast<uintptr_t>(data) & 15) != 0) return Error::ArenaMismatch;
    const uint32_t planned = specs[i].size();
    if (arenas[i].size < planned) return Error::ArenaTooSmall;
    // Regions share no byte, so operands in different ones never overlap.
    for (uint32_t k = kLocConstant; k < kLocArena0 + i; ++k) {
      TMCU_CHECK(apart(data, planned, m.regions_.base[k], limits.bytes[k]), Error::ArenaMismatch);
    }
    m.regions_.base[kLocArena0 + i] = data;
    limits.bytes[kLocArena0 + i] = planned;
  }

  // The executable section (with kFull the verifier has checked its
  // vectors' bounds).
  const schema::Exec exec = root.exec();
  if (!exec.valid()) return Error::InvalidProgram;
  const auto ops = exec.ops();
  const auto operands = exec.operands();
  const auto args = exec.args();
  const auto inputs = exec.inputs();
  const auto outputs = exec.outputs();
  m.ops_ = ops.data();
  m.operands_ = operands.data();
  m.args_ = reinterpret_cast<const uint32_t*>(args.data());
  m.inputs_ = inputs.data();
  m.outputs_ = outputs.data();
  m.num_ops_ = ops.size();
  m.num_inputs_ = inputs.size();
  m.num_outputs_ = outputs.size();
  // [uint] elements are 4-byte aligned in any buffer the builder wrote.
  TMCU_CHECK((reinterpret_cast<uintptr_t>(m.args_) & 3) == 0, Error::InvalidProgram);

  const auto copies = root.init_copies();
  if (program.verification() == Verification::kFull) {
#if TORCHMCU_VERIFY
    // The model inputs and outputs, every operand record, every op (its
    // record, overlaps, its kernel's check), then every init copy, all
    // before the first copy is made.
    for (uint32_t i = 0; i < m.num_inputs_; ++i) TMCU_TRY(check_io(m.inputs_[i], limits));
    for (uint32_t i = 0; i < m.num_outputs_; ++i) TMCU_TRY(check_io(m.outputs_[i], limits));
    const uint32_t num_operands = operands.size();
    TMCU_TRY(check_operands(m.operands_, num_operands, limits));
    const uint32_t num_words = args.size();
    for (uint32_t i = 0; i < m.num_ops_; ++i) {
      TMCU_TRY(check_op(m.ops_[i], m.regions_, m.operands_, num_operands, m.args_, num_words));
    }
    for (uint32_t i = 0; i < copies.size(); ++i) {
      const schema::InitCopy& c = copies[i];
      TMCU_CHECK(c.src % 4 == 0 && c.dst % 4 == 0 && c.arena < num_arenas, Error::InvalidTensor);
      const uint32_t dst_limit = limits.bytes[kLocArena0 + c.arena];
      TMCU_CHECK(c.src <= limits.bytes[kLocConstant] && c.nbytes <= limits.bytes[kLocConstant] - c.src &&
                     c.dst <= dst_limit && c.nbytes <= dst_limit - c.dst,
                 Error::InvalidTensor);
    }
#else
    return Error::VerifierMissing;  // Program::load has refused it already
#endif
  } else {
    // A trusted program: only what this build can get wrong with a good
    // program, a kernel left out of it.
    for (const schema::ExecOp* op = m.ops_; op != m.ops_ + m.num_ops_; ++op) {
      const uint32_t code = uint32_t(op->code);
      if (code >= schema::kNumOpCode || kKernelTable[code] == nullptr) return Error::KernelMissing;
    }
  }

  // The init copies (checked above with kFull).
  for (uint32_t i = 0; i < copies.size(); ++i) {
    const schema::InitCopy& c = copies[i];
    std::memcpy(m.regions_.base[kLocArena0 + c.arena] + c.dst, program.constants() + c.src,
                c.nbytes);
  }
  return m;
}

Error Method::execute(OpObserver* observer) const {
  // Checked at load: codes in range with a kernel (a run or, for a
  // delegate, an invoke), operand and argument ranges inside the section,
  // every kernel's check passed.
  const schema::ExecOp* op = ops_;
  const schema::ExecOp* const end = ops_ + num_ops_;
  if (observer == nullptr) {
    for (; op != end; ++op) {
      const Kernel* kernel = kKernelTable[uint32_t(op->code)];
      const OpContext ctx(regions_, *op, operands_ + op->operands, args_ + op->args);
      if (kernel->run != nullptr) {
        kernel->run(ctx);
      } else {
        TMCU_TRY(kernel->invoke(ctx));
      }
    }
    return Error::Ok;
  }
  for (uint32_t i = 0; op != end; ++op, ++i) {
    const Kernel* kernel = kKernelTable[uint32_t(op->code)];
    const OpContext ctx(regions_, *op, operands_ + op->operands, args_ + op->args);
    observer->op_begin(i);
    const Error e = kernel->run != nullptr ? (kernel->run(ctx), Error::Ok) : kernel->invoke(ctx);
    observer->op_end(i);
    TMCU_TRY(e);
  }
  return Error::Ok;
}

TensorView Method::view(const schema::IoTensor& t) const {
  TensorView v;
  v.data = regions_.base[t.location] + t.offset;  // an arena: checked at load
  v.dtype = t.dtype;
  v.rank = int32_t(t.rank);
  for (int32_t d = 0; d < v.rank; ++d) v.dims[d] = t.dims[d];
  v.nbytes = t.nbytes;
  v.scale = t.scale;
  v.zero_point = t.zero_point;
  return v;
}

TensorView Method::input(uint32_t i) const {
  return i < num_inputs_ ? view(inputs_[i]) : TensorView();
}

TensorView Method::output(uint32_t i) const {
  return i < num_outputs_ ? view(outputs_[i]) : TensorView();
}

}  // namespace torchmcu
