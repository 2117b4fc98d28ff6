// The runtime: one loaded kernel (its ABI entry points and parameter signature), argument
// checks, and dispatch of its blocks over a oneTBB pool. No LLVM here: whoever loads the
// code (src/jit, or a test with a plain C++ function) hands over function pointers and an
// owner that keeps the code mapped.
//
// Stack: generated code keeps per-worker snapshots on the stack (up to 256 KiB per worker x
// 16 lanes, i.e. up to 4 MiB per call of kiln_blocks), so pool workers are created with
// kWorkerStackBytes of stack (tbb::global_control(thread_stack_size), set once, before the
// runtime's first pool exists). The calling thread runs blocks too (always with threads == 1,
// and as one of the arena's slots otherwise): it must have that much stack itself (the main
// thread's default 8 MiB does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/abi.h"

namespace kiln::runtime {

inline constexpr size_t kWorkerStackBytes = size_t{64} << 20;

enum class ParamKind { View, I64, F32 };

// "view", "i64 scalar", "f32 scalar"
const char* paramKindName(ParamKind kind);

// The element type of a view's memory: f32, a 16-bit float's bits (uint16_t: IEEE binary16 or
// bfloat16), or an integer view's int32_t / int64_t.
enum class ViewElem { F32, I32, I64, F16, BF16 };
const char* viewElemName(ViewElem e);  // "f32" | "i32" | "i64" | "f16" | "bf16"
int64_t viewElemBytes(ViewElem e);     // 4 | 4 | 8 | 2 | 2

// One kernel parameter as the generated code expects it; filled by whoever builds the
// kernel from the IR. Views are row-major.
struct ParamSpec {
  std::string name;
  ParamKind kind = ParamKind::View;
  std::vector<int64_t> shape;     // views: extents; scalars: empty
  int64_t byte_size = 0;          // views: element bytes * product(shape); i64: 8; f32: 4
  ViewElem elem = ViewElem::F32;  // views
  // i64 scalars and integer views: the stated range (docs/ir.md) every argument (element) is
  // checked against; unset: any value.
  std::optional<std::pair<int64_t, int64_t>> range;
  bool ascending = false;  // an integer view whose stated range is ascending: no element below the one before

  static ParamSpec view(std::string name, std::vector<int64_t> shape, ViewElem elem = ViewElem::F32);
  static ParamSpec i64(std::string name);
  static ParamSpec f32(std::string name);
};

// "f32[4,16]", "i32[8]", "i64", "f32"
std::string describe(const ParamSpec& param);

// One launch argument: a buffer for a view, a value for a scalar. The same buffer may be
// passed for several views (an input aliasing an output).
struct Arg {
  ParamKind kind = ParamKind::View;
  void* data = nullptr;   // view: the first element
  int64_t byte_size = 0;  // view: bytes available at data
  int64_t i64_value = 0;
  float f32_value = 0.0f;
  // view: the element type the buffer holds, when the caller said (a typed span); checked
  // against the view's. Unset for untyped bytes.
  std::optional<ViewElem> elem;

  static Arg view(void* data, int64_t byte_size);
  static Arg view(std::span<float> data);
  static Arg i32s(std::span<int32_t> data);                    // a view<i32>
  static Arg i64s(std::span<int64_t> data);                    // a view<i64>
  static Arg halves(std::span<uint16_t> data, ViewElem elem);  // a view<f16> or view<bf16>
  static Arg i64(int64_t value);
  static Arg f32(float value);
};

// The code of one kernel.
struct KernelEntry {
  BlocksFn blocks = nullptr;  // required
  LaunchFn launch = nullptr;  // optional (single-thread replay); launch() uses blocks
  int64_t num_blocks = 0;
  // End block of each phase (ascending, the last = num_blocks); empty: one phase. The blocks
  // of phase i start after every block of phase i-1 has returned.
  std::vector<int64_t> phase_ends;
  // Optional: the blocks of each phase these arguments run (runtime extents); null: all.
  PhaseBlocksFn phase_blocks = nullptr;
  std::shared_ptr<void> owner;  // keeps the code mapped (the JIT session); null for code
                                // linked into the process
};

class LoadedKernel {
 public:
  // threads >= 1; an entry without blocks or a malformed signature is a bug (aborts).
  // `workspaces` (views): buffers the launch allocates, zero-filled, and passes after the
  // parameters (the kernel's IR workspaces); the caller never sees them.
  LoadedKernel(KernelEntry entry, std::vector<ParamSpec> params, int threads = 1,
               std::vector<ParamSpec> workspaces = {});
  ~LoadedKernel();
  LoadedKernel(LoadedKernel&&) noexcept;
  LoadedKernel& operator=(LoadedKernel&&) noexcept;

  // nullopt when `args` match the signature: count, kind, non-null buffers, byte sizes, and
  // stated ranges (every element of a ranged integer view is read). Otherwise one sentence
  // naming the parameter and both sizes or kinds, or the value and the range.
  std::optional<std::string> checkArgs(std::span<const Arg> args) const;

  // Checks `args`, then runs every block, phase after phase. `record` (optional) receives the sum of the
  // per-task launch records. Returns the check's error; never aborts on bad arguments.
  std::optional<std::string> launch(std::span<const Arg> args, KilnLaunchRecord* record = nullptr) const;

  // Not concurrently with launch().
  void setThreads(int threads);
  int threads() const { return threads_; }
  // The threads a launch can run on (BlockPool::concurrency): threads() unless oneTBB refused.
  int concurrency() const;
  int64_t numBlocks() const { return entry_.num_blocks; }
  const std::vector<ParamSpec>& params() const { return params_; }
  const std::vector<ParamSpec>& workspaces() const { return workspaces_; }
  const KernelEntry& entry() const { return entry_; }

 private:
  struct Pool;
  KernelEntry entry_;
  std::vector<ParamSpec> params_;
  std::vector<ParamSpec> workspaces_;
  int threads_ = 1;
  std::unique_ptr<Pool> pool_;  // null when threads_ == 1
};

}  // namespace kiln::runtime
