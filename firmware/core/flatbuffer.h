// A small flatbuffer reader and verifier, written from the public wire-format
// specification so the runtime depends on nothing outside this repo.
//
// Wire format in brief: the buffer starts with a uint32 offset to the root
// table. A table starts with an int32 soffset back to its vtable; the vtable
// holds uint16 {vtable bytes, table bytes, field offset per slot}; an absent
// field has offset 0. Offsets to tables, vectors and strings are uint32,
// relative to where they are stored. A vector is a uint32 length followed by
// its elements; a string is a byte vector followed by a NUL. A vector of
// structs holds them in place, each aligned to its largest field.
//
// Accessors trust the buffer: run Verifier over it first (Program::load does).
// Table fields and scalar vector elements are loaded through memcpy, so no
// access is misaligned whatever the buffer's alignment; struct vectors are
// read in place, which the verifier allows only where they are aligned.
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

  const uint8_t* p_ = nullptr;
};

/// A vector of structs, read in place: the verifier checked its bounds and
/// that its elements are aligned for T (relative to the buffer start; the
/// runtime requires 16-byte aligned buffers).
template <typename T>
class StructVector {
 public:
  StructVector() = default;
  explicit StructVector(const uint8_t* p) : p_(p) {}
  uint32_t size() const { return p_ ? load<uint32_t>(p_) : 0; }
  const T* data() const { return p_ ? reinterpret_cast<const T*>(p_ + 4) : nullptr; }
  const T& operator[](uint32_t i) const { return data()[i]; }

 private:
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
///
/// Each table is checked once (its offset to its vtable, the vtable and the
/// table inside the buffer), then each of its fields against the table's
/// size (scalars) or the buffer (what offsets point to), through a Fields
/// view that reads the vtable's header only once. All positions are 32-bit:
/// buffers are under 2 GiB, and each sum below is checked before it could wrap.
class Verifier {
 public:
  Verifier(const uint8_t* buf, size_t size) : buf_(buf), size_(uint32_t(size)) {}

  /// The root table offset and identifier; returns the root or an invalid table.
  template <typename T>
  T root(const char* identifier) {
    if (size_ < 8 || size_ > 0x7fffffffu) return T();
    if (load<uint32_t>(buf_ + 4) != load<uint32_t>(reinterpret_cast<const uint8_t*>(identifier))) {
      return T();
    }
    const uint32_t off = load<uint32_t>(buf_);
    return T(check_table_at(off) ? buf_ + off : nullptr);
  }

  /// Checks table t (whose position check_table_at accepted) and its fields.
  template <typename T>
  bool table(const T& t) {
    if (!t.valid() || depth_ >= kMaxDepth || ++tables_ > kMaxTables) return false;
    ++depth_;
    const bool r = t.verify(*this);
    --depth_;
    return r;
  }

  /// A table's vtable, read once; the checks of its fields.
  class Fields {
   public:
    Fields(Verifier& v, const Table& t)
        : v_(v),
          t_(t.address()),
          vt_(t_ - load<int32_t>(t_)),
          vsize_(load<uint16_t>(vt_)),
          tsize_(load<uint16_t>(vt_ + 2)) {}

    template <typename S>
    bool scalar(uint16_t vo) const {
      const uint32_t off = field(vo);
      return off == 0 || off + sizeof(S) <= tsize_;
    }
    template <typename S>
    bool vector(uint16_t vo) const {
      const uint8_t* p = target(vo);
      return p == nullptr ? ok_ : v_.vector_at(p, sizeof(S), alignof(S)) != kBad;
    }
    template <typename S>
    bool struct_vector(uint16_t vo) const {
      return vector<S>(vo);
    }
    bool string(uint16_t vo) const {
      const uint8_t* p = target(vo);
      if (p == nullptr) return ok_;
      const uint32_t n = v_.vector_at(p, 1, 1);
      // The terminating NUL lies just past the bytes.
      return n != kBad && v_.room(p + 4, n + 1) && p[4 + n] == 0;
    }
    template <typename T>
    bool table(uint16_t vo) const {
      const uint8_t* p = target(vo);
      if (p == nullptr) return ok_;
      return v_.check_table_at(uint32_t(p - v_.buf_)) && v_.table(T(p));
    }
    template <typename T>
    bool table_vector(uint16_t vo) const {
      const uint8_t* p = target(vo);
      if (p == nullptr) return ok_;
      const uint32_t n = v_.vector_at(p, 4, 4);
      if (n == kBad) return false;
      for (uint32_t i = 0; i < n; ++i) {
        const uint8_t* e = p + 4 + 4 * i;
        const uint32_t at = uint32_t(e - v_.buf_);
        const uint32_t rel = load<uint32_t>(e);
        if (rel > v_.size_ - at || !v_.check_table_at(at + rel) || !v_.table(T(e + rel))) return false;
      }
      return true;
    }

   private:
    uint32_t field(uint16_t vo) const { return vo < vsize_ ? load<uint16_t>(vt_ + vo) : 0; }

    /// Where the offset field at vo points (null when absent, or when the
    /// offset or its target is out of bounds: ok_ is then false).
    const uint8_t* target(uint16_t vo) const {
      ok_ = true;
      const uint32_t off = field(vo);
      if (off == 0) return nullptr;
      if (off + 4 > tsize_) return fail();
      const uint32_t at = uint32_t(t_ - v_.buf_) + off;  // inside the table: checked
      const uint32_t rel = load<uint32_t>(t_ + off);
      if (rel > v_.size_ - at) return fail();
      const uint32_t to = at + rel;
      if ((to & 3) != 0 || to > v_.size_ - 4) return fail();
      return v_.buf_ + to;
    }
    const uint8_t* fail() const {
      ok_ = false;
      return nullptr;
    }

    Verifier& v_;
    const uint8_t* t_;
    const uint8_t* vt_;
    uint32_t vsize_;
    uint32_t tsize_;
    mutable bool ok_ = true;
  };

 private:
  static constexpr uint32_t kMaxDepth = 16;
  static constexpr uint32_t kMaxTables = 1u << 16;
  static constexpr uint32_t kBad = UINT32_MAX;

  /// n bytes from p lie inside the buffer (p itself does).
  bool room(const uint8_t* p, uint32_t n) const { return n <= size_ - uint32_t(p - buf_); }

  /// A table at position pos: its soffset, vtable and bytes inside the buffer.
  bool check_table_at(uint32_t pos) const {
    if ((pos & 3) != 0 || pos > size_ - 4) return false;
    const int64_t vt = int64_t(pos) - load<int32_t>(buf_ + pos);
    if (vt < 0 || (vt & 1) != 0 || vt > int64_t(size_) - 4) return false;
    const uint32_t vsize = load<uint16_t>(buf_ + vt);
    const uint32_t tsize = load<uint16_t>(buf_ + vt + 2);
    if (vsize < 4 || (vsize & 1) != 0 || vsize > size_ - uint32_t(vt)) return false;
    return tsize >= 4 && tsize <= size_ - pos;
  }

  /// The length of the vector at p (its length word inside the buffer:
  /// checked by target()), its elements of elem_size inside the buffer and
  /// aligned to `align` from the buffer's start; or kBad.
  uint32_t vector_at(const uint8_t* p, uint32_t elem_size, uint32_t align) const {
    const uint32_t n = load<uint32_t>(p);
    const uint32_t start = uint32_t(p - buf_) + 4;
    if (uint64_t(n) * elem_size > size_ - start || (start & (align - 1)) != 0) return kBad;
    return n;
  }

  const uint8_t* buf_;
  uint32_t size_;
  uint32_t depth_ = 0;
  uint32_t tables_ = 0;
};

}  // namespace fb
}  // namespace torchmcu

#endif  // TORCHMCU_CORE_FLATBUFFER_H_
