// Errors as values: what every function of Kiln's public API returns instead of throwing or
// aborting. A kiln::Error is one sentence naming what is wrong and where (the parameter, the
// knob, the FILE:LINE:COL of a kernel's text).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace kiln {

class Error {
 public:
  explicit Error(std::string message) : message_(std::move(message)) {}
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

// Thrown only by Result::value() / Status::check() called on an error: a programming mistake
// (test ok() first); no other function of the API throws.
class BadResultAccess : public std::logic_error {
 public:
  explicit BadResultAccess(const Error& e) : std::logic_error("kiln: value() of an error: " + e.message()) {}
};

// Success, or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;  // success
  Status(Error error) : error_(std::move(error)) {}
  bool ok() const { return !error_; }
  explicit operator bool() const { return ok(); }
  // Precondition: !ok().
  const Error& error() const {
    if (!error_) throw std::logic_error("kiln: error() of a success");
    return *error_;
  }
  // The message of the error, or "" on success.
  std::string message() const { return error_ ? error_->message() : std::string(); }
  // Throws BadResultAccess on an error (for callers that prefer exceptions).
  void check() const {
    if (error_) throw BadResultAccess(*error_);
  }

 private:
  std::optional<Error> error_;
};

// A value of type T, or an Error.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // Precondition: ok(); otherwise throws BadResultAccess.
  T& value() & { return ok() ? std::get<0>(v_) : fail(); }
  const T& value() const& { return ok() ? std::get<0>(v_) : fail(); }
  T&& value() && { return std::move(ok() ? std::get<0>(v_) : fail()); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  // Precondition: !ok().
  const Error& error() const {
    if (ok()) throw std::logic_error("kiln: error() of a value");
    return std::get<1>(v_);
  }
  std::string message() const { return ok() ? std::string() : std::get<1>(v_).message(); }
  Status status() const { return ok() ? Status() : Status(std::get<1>(v_)); }

 private:
  [[noreturn]] T& fail() const { throw BadResultAccess(std::get<1>(v_)); }
  std::variant<T, Error> v_;
};

}  // namespace kiln
