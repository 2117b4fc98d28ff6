// Test mode for launches: every view lives in its own allocation between two guard zones of
// canary bytes (a fixed, position-dependent pattern); after a launch, checkGuards() reports
// every guard byte that changed, naming the parameter, the side and the offset. Used by the
// tests and the bench harness ("guard bytes around every buffer intact").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace kiln::runtime {

inline constexpr int64_t kGuardBytes = 1024;

class GuardedArgs {
 public:
  // One guarded buffer per view of `params` (zero-filled, 64-byte aligned), guard zones of at
  // least max(guard_bytes, kGuardBytes) bytes on each side; scalars start at 0.
  explicit GuardedArgs(std::span<const ParamSpec> params, int64_t guard_bytes = kGuardBytes);

  // Copy in a view's data (its size must be the view's) or set a scalar; an error names the
  // parameter when the index, kind or size is wrong.
  std::optional<std::string> setView(size_t i, std::span<const float> data);
  std::optional<std::string> setViewBytes(size_t i, std::span<const std::byte> bytes);  // any element type
  std::optional<std::string> setI64(size_t i, int64_t value);
  std::optional<std::string> setF32(size_t i, float value);

  // The view's payload (read outputs here after a launch). Empty for a scalar.
  std::span<float> view(size_t i);
  std::span<const float> view(size_t i) const;
  std::span<const std::byte> viewBytes(size_t i) const;

  // The arguments to pass to LoadedKernel::launch.
  std::span<const Arg> args() const { return args_; }

  // nullopt when every guard byte is intact; otherwise one clause per corrupted zone.
  std::optional<std::string> checkGuards() const;

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  struct Buffer {
    std::unique_ptr<std::byte[], Free> memory;  // whole allocation, guards included
    int64_t lead = 0;                           // bytes before the payload
    int64_t payload = 0;                        // the view's bytes
    int64_t total = 0;                          // allocation size
  };
  std::vector<ParamSpec> params_;
  std::vector<Buffer> buffers_;  // one per parameter; empty for scalars
  std::vector<Arg> args_;
};

}  // namespace kiln::runtime
