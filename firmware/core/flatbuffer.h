// A small flatbuffer reader and verifier, written from the public wire-format
// specification so the runtime depends on nothing outside this repo.
//
// Wire format in brief: the buffer starts with a uint32 offset to the root
// table. A table starts with an int32 soffset back to its vtable; the vtable
// holds uint16 {vtable bytes, table bytes, field offset per slot}; an absent
// field has offset 0. Offsets to tables, vectors and strings are uint32,
// relative to where they are stored. A vector is a uint32 length followed by
// its elements; a string is a byte vector followed by a NUL.
//
// Accessors trust the buffer: run Verifier over it first (Program::load does).
// Every load goes through memcpy, so no access is misaligned whatever the
// buffer's alignment.
#ifndef TORCHMCU_CORE_FLATBUFFER_H_
#define TORCHMCU_CORE_FLATBUFFER_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace torchmcu {
namespace fb {

template <typename T>
inline T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

/// A vector of scalars (or enums stored as their base type).
template <typename T>
class Vector {
 public:
  Vector() = default;
  explicit Vector(const uint8_t* p) : p_(p) {}
  uint32_t size() const { return p_ ? load<uint32_t>(p_) : 0; }
  T operator[](uint32_t i) const { return load<T>(p_ + 4 + i * sizeof(T)); }
  /// Elements in place; aligned to sizeof(T) in buffers the builder wrote.
  const uint8_t* data() const { return p_ ? p_ + 4 : nullptr; }

 private:
  const uint8_t* p_ = nullptr;
};

class String {
 public:
  String() = default;
  explicit String(const uint8_t* p) : p_(p) {}
  uint32_t size() const { return p_ ? load<uint32_t>(p_) : 0; }
  /// NUL-terminated (checked by the verifier); "" when absent.
  const char* c_str() const {
    return p_ ? reinterpret_cast<const char*>(p_ + 4) : "";
  }

 private:
  const uint8_t* p_ = nullptr;
};

class Table {
 public:
  Table() = default;
  explicit Table(const uint8_t* p) : p_(p) {}
  bool valid() const { return p_ != nullptr; }
  const uint8_t* address() const { return p_; }

 protected:
  /// Offset of the field at vtable offset `vo` from the table start; 0 when
  /// absent (including slots past the end of an older writer's vtable).
  uint16_t field(uint16_t vo) const {
    const uint8_t* vt = p_ - load<int32_t>(p_);
    return vo < load<uint16_t>(vt) ? load<uint16_t>(vt + vo) : 0;
  }
  template <typename T>
  T scalar(uint16_t vo, T def) const {
    const uint16_t off = field(vo);
    return off ? load<T>(p_ + off) : def;
  }
  const uint8_t* deref(uint16_t vo) const {
    const uint16_t off = field(vo);
    return off ? p_ + off + load<uint32_t>(p_ + off) : nullptr;
  }
  template <typename T>
  Vector<T> vector(uint16_t vo) const {
    return Vector<T>(deref(vo));
  }
  String string(uint16_t vo) const { return String(deref(vo)); }
  template <typename T>
  T table(uint16_t vo) const {
    return T(deref(vo));
  }

  friend class Verifier;
  const uint8_t* p_ = nullptr;
};

/// A vector of tables.
template <typename T>
class TableVector {
 public:
  TableVector() = default;
  explicit TableVector(const uint8_t* p) : p_(p) {}
  uint32_t size() const { return p_ ? load<uint32_t>(p_) : 0; }
  T operator[](uint32_t i) const {
    const uint8_t* e = p_ + 4 + 4 * i;
    return T(e + load<uint32_t>(e));
  }

 private:
  const uint8_t* p_ = nullptr;
};

/// Checks that every byte an accessor may read lies inside the buffer.
/// Limits on depth and table count bound the work a hostile buffer can cause.
class Verifier {
 public:
  Verifier(const uint8_t* buf, size_t size) : buf_(buf), size_(size) {}

  /// The root table offset and identifier; returns the root or an invalid table.
  template <typename T>
  T root(const char* identifier) {
    if (size_ < 8 || size_ > 0x7fffffffu) return T();
    if (std::memcmp(buf_ + 4, identifier, 4) != 0) return T();
    const uint32_t off = load<uint32_t>(buf_);
    return T(check_table_at(off) ? buf_ + off : nullptr);
  }

  /// A table field; an absent one is valid.
  template <typename T>
  bool table_field(const Table& parent, uint16_t vo) {
    const uint8_t* p = offset_field(parent, vo);
    if (p == nullptr) return ok_;
    return enter(T(p));
  }

  template <typename T>
  bool table(const T& t) {
    return t.valid() ? enter(t) : false;
  }

  template <typename S>
  bool scalar_field(const Table& t, uint16_t vo) {
    const uint16_t off = t.field(vo);
    if (off == 0) return true;
    return fail_unless(off + sizeof(S) <= table_size(t) &&
                       in_range(t.p_ - buf_ + off, sizeof(S)));
  }

  template <typename S>
  bool vector_field(const Table& t, uint16_t vo) {
    const uint8_t* p = offset_field(t, vo);
    if (p == nullptr) return ok_;
    return vector_at(p, sizeof(S)) != UINT32_MAX;
  }

  bool string_field(const Table& t, uint16_t vo) {
    const uint8_t* p = offset_field(t, vo);
    if (p == nullptr) return ok_;
    const uint32_t n = vector_at(p, 1);
    if (n == UINT32_MAX) return false;
    // The terminating NUL lies just past the bytes.
    return fail_unless(in_range(p - buf_ + 4 + size_t(n), 1) && p[4 + n] == 0);
  }

  template <typename T>
  bool table_vector_field(const Table& t, uint16_t vo) {
    const uint8_t* p = offset_field(t, vo);
    if (p == nullptr) return ok_;
    const uint32_t n = vector_at(p, 4);
    if (n == UINT32_MAX) return false;
    const TableVector<T> v(p);
    for (uint32_t i = 0; i < n; ++i) {
      const uint64_t e = uint64_t(p - buf_) + 4 + 4 * uint64_t(i);
      if (!check_table_at(e + load<uint32_t>(buf_ + e))) return false;
      if (!enter(v[i])) return false;
    }
    return true;
  }

  bool ok() const { return ok_; }

 private:
  static constexpr uint32_t kMaxDepth = 16;
  static constexpr uint32_t kMaxTables = 1u << 16;

  bool fail() { return ok_ = false; }
  bool fail_unless(bool c) { return c ? true : fail(); }
  bool in_range(size_t pos, size_t len) const {
    return pos <= size_ && len <= size_ - pos;
  }

  /// Table at absolute position `pos`: soffset and vtable in bounds.
  bool check_table_at(uint64_t pos) {
    if ((pos & 3) != 0 || pos > size_ || !in_range(size_t(pos), 4)) return fail();
    const int64_t vt = int64_t(pos) - load<int32_t>(buf_ + pos);
    if (vt < 0 || (vt & 1) != 0 || !in_range(size_t(vt), 4)) return fail();
    const uint16_t vsize = load<uint16_t>(buf_ + vt);
    const uint16_t tsize = load<uint16_t>(buf_ + vt + 2);
    if (vsize < 4 || (vsize & 1) != 0 || !in_range(size_t(vt), vsize)) return fail();
    return fail_unless(tsize >= 4 && in_range(pos, tsize));
  }

  size_t table_size(const Table& t) const {
    return load<uint16_t>(t.p_ - load<int32_t>(t.p_) + 2);
  }

  /// The target of an offset field, checked to hold at least 4 bytes.
  const uint8_t* offset_field(const Table& t, uint16_t vo) {
    const uint16_t off = t.field(vo);
    if (off == 0) return nullptr;
    const size_t at = size_t(t.p_ - buf_) + off;
    if (off + 4u > table_size(t) || !in_range(at, 4)) {
      fail();
      return nullptr;
    }
    // 64-bit sum: on a 32-bit target a hostile offset must not wrap around.
    const uint64_t target = uint64_t(at) + load<uint32_t>(buf_ + at);
    if ((target & 3) != 0 || target > size_ || !in_range(size_t(target), 4)) {
      fail();
      return nullptr;
    }
    return buf_ + target;
  }

  /// Length of the vector at p with elements of elem_size, or UINT32_MAX.
  uint32_t vector_at(const uint8_t* p, size_t elem_size) {
    const uint32_t n = load<uint32_t>(p);
    const size_t start = size_t(p - buf_) + 4;
    if (uint64_t(n) * elem_size > size_ || !in_range(start, size_t(n) * elem_size)) {
      fail();
      return UINT32_MAX;
    }
    return n;
  }

  template <typename T>
  bool enter(const T& t) {
    if (!ok_ || depth_ >= kMaxDepth || ++tables_ > kMaxTables) return fail();
    if (!check_table_at(size_t(t.address() - buf_))) return false;
    ++depth_;
    const bool r = t.verify(*this);
    --depth_;
    return r ? ok_ : fail();
  }

  const uint8_t* buf_;
  size_t size_;
  uint32_t depth_ = 0;
  uint32_t tables_ = 0;
  bool ok_ = true;
};

}  // namespace fb
}  // namespace torchmcu

#endif  // TORCHMCU_CORE_FLATBUFFER_H_
