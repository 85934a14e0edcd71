#pragma once
// The one error mechanism of Compass: functions that can fail on user input return
// Result<T> (a value or an Error with a message naming the offending field or value).
// Internal invariants use COMPASS_CHECK, which throws InternalError; the CLI maps both to a
// single line on stderr and exit code 2.

#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace compass {

/// A failure caused by input: the message names the field, value or file at fault.
struct Error {
  std::string message;
};

/// Builds an Error from a fmt format string.
template <typename... Args>
Error make_error(fmt::format_string<Args...> f, Args&&... args) {
  return Error{fmt::format(f, std::forward<Args>(args)...)};
}

/// A value of type T, or an Error.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  /// The value; calling it on an error is a programming bug and throws InternalError.
  const T& value() const&;
  T& value() &;
  T&& value() &&;
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  /// The error; calling it on a value is a programming bug.
  const Error& error() const;

 private:
  std::variant<T, Error> v_;
};

/// Success, or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  static Status success() { return Status(); }
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

/// Thrown by COMPASS_CHECK when an internal invariant is broken (a bug, not bad input).
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] void check_failed(const char* expr, const char* file, int line, const std::string& msg);

#define COMPASS_CHECK(cond, ...)                                                          \
  do {                                                                                    \
    if (!(cond)) ::compass::check_failed(#cond, __FILE__, __LINE__, fmt::format("" __VA_ARGS__)); \
  } while (0)

template <typename T>
const T& Result<T>::value() const& {
  COMPASS_CHECK(ok(), "Result::value() on error: {}", std::get<1>(v_).message);
  return std::get<0>(v_);
}
template <typename T>
T& Result<T>::value() & {
  COMPASS_CHECK(ok(), "Result::value() on error: {}", std::get<1>(v_).message);
  return std::get<0>(v_);
}
template <typename T>
T&& Result<T>::value() && {
  COMPASS_CHECK(ok(), "Result::value() on error: {}", std::get<1>(v_).message);
  return std::get<0>(std::move(v_));
}
template <typename T>
const Error& Result<T>::error() const {
  COMPASS_CHECK(!ok(), "Result::error() on a value");
  return std::get<1>(v_);
}

}  // namespace compass

/// Returns early from the enclosing function with the error of `expr` (a Status or Result).
#define COMPASS_TRY(expr)                                 \
  do {                                                    \
    auto&& compass_try_r_ = (expr);                       \
    if (!compass_try_r_.ok()) return compass_try_r_.error(); \
  } while (0)

#define COMPASS_CONCAT_INNER_(a, b) a##b
#define COMPASS_CONCAT_(a, b) COMPASS_CONCAT_INNER_(a, b)
/// `COMPASS_ASSIGN(auto x, f());` binds the value of a Result or returns its error.
#define COMPASS_ASSIGN(decl, expr) COMPASS_ASSIGN_IMPL_(COMPASS_CONCAT_(compass_r_, __LINE__), decl, expr)
#define COMPASS_ASSIGN_IMPL_(tmp, decl, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.error();          \
  decl = std::move(tmp).value()
