// Result<T>: a value or an error, never both. Built from an error it refuses
// Error::Ok (that would be a result without a value) and holds Internal.
// T must be default-constructible and cheap to copy (views, handles).
#ifndef TORCHMCU_CORE_RESULT_H_
#define TORCHMCU_CORE_RESULT_H_

#include "core/error.h"

namespace torchmcu {

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(const T& value) : value_(value), error_(Error::Ok) {}  // NOLINT: implicit by design
  Result(Error error) : error_(error == Error::Ok ? Error::Internal : error) {}  // NOLINT

  bool ok() const { return error_ == Error::Ok; }
  Error error() const { return error_; }
  /// The value; only meaningful when ok().
  const T& get() const { return value_; }
  T& get() { return value_; }

 private:
  T value_{};
  Error error_;
};

}  // namespace torchmcu

/// Declares `var` from a Result expression, or returns its error.
#define TMCU_TRY_ASSIGN(var, expr)                       \
  auto var##_result_ = (expr);                           \
  if (!var##_result_.ok()) return var##_result_.error(); \
  auto var = var##_result_.get()

#endif  // TORCHMCU_CORE_RESULT_H_
