// Kiln's public API for running kernels from your own program (docs/api.md): compile a
// kernel — built with the DSL (kiln/dsl.h), written as TileIR text, or taken from the kernel
// library by name and shape — with knobs, then launch it on your own buffers as often as you
// like, from as many threads as you like.
//
//   kiln::Result<kiln::Kernel> k = kiln::Kernel::library("rmsnorm", "512,4096");
//   if (!k) { std::cerr << k.message() << '\n'; return 1; }
//   kiln::Status s = k->launch({kiln::Arg::input(x), kiln::Arg::input(w), kiln::Arg::output(y)});
//
// Every function returns its errors as values (kiln/result.h): a sentence that names what is
// wrong and where. Nothing here aborts or throws on bad input; only Result::value() on an error
// throws (kiln::BadResultAccess). No LLVM, oneTBB or other internal type appears here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/result.h"

namespace kiln {

namespace dsl {
struct BuildResult;
}

// Kiln's version, e.g. "0.5.0".
const char* version();

// Planner knobs by name, as `kiln --set name=value` takes them (docs/backend.md lists every
// knob, its default and its range: e.g. threads, isa, packet_width, fast_math). A name or value
// that is not legal is reported by the compile that uses it.
struct Options {
  std::map<std::string, std::string> knobs;

  Options& set(std::string name, std::string value) {
    knobs[std::move(name)] = std::move(value);
    return *this;
  }
};

// One kernel parameter: a row-major view of a fixed shape (float32; 16-bit floats, IEEE binary16
// or bfloat16, as uint16_t bits for a view<f16>/view<bf16>; int32/int64 for a
// view<i32>/view<i64>: lengths, positions, tables), or a scalar.
struct Param {
  enum class Kind { View, I64, F32 };
  enum class Elem { F32, I32, I64, F16, BF16 };  // a view's element type
  std::string name;                              // as written in the kernel, without '%'
  Kind kind = Kind::View;
  Elem elem = Elem::F32;
  std::vector<int64_t> shape;  // views: extents; scalars: empty
  bool read = false;           // some load reads it (an input)
  bool written = false;        // some store writes it (an output)
  // An i64 scalar or integer view with a stated range (docs/ir.md, "Stated ranges"): the
  // inclusive bounds every value (element) must lie in; launch() and evaluate() check them.
  std::optional<std::pair<int64_t, int64_t>> range;
  // An integer view whose stated range is ascending: no element is below the one before it
  // (launch() and evaluate() check that too).
  bool ascending = false;

  int64_t elements() const;  // views: product of the extents; scalars: 1
  std::string type() const;  // "f32[512,4096]", "bf16[8,64]", "i32[8]", "i64", "f32"
};

// One launch argument, in parameter order. A view is the caller's memory: `elements` floats at
// `data`, row-major; it must hold at least the parameter's element count. input() promises the
// kernel only reads it: passing it for a parameter the kernel writes is an error.
class Arg {
 public:
  static Arg input(const float* data, std::size_t elements);
  static Arg input(std::span<const float> data) { return input(data.data(), data.size()); }
  static Arg output(float* data, std::size_t elements);  // read and/or written
  static Arg output(std::span<float> data) { return output(data.data(), data.size()); }
  // Integer views (view<i32>, view<i64>), read-only or read and/or written.
  static Arg input(std::span<const int32_t> data);
  static Arg input(std::span<const int64_t> data);
  static Arg output(std::span<int32_t> data);
  static Arg output(std::span<int64_t> data);
  // 16-bit float views: the elements' bits (uint16_t), named by their type (docs/ir.md,
  // "16-bit views": IEEE binary16 for view<f16>, bfloat16 for view<bf16>).
  static Arg inputF16(std::span<const uint16_t> bits);
  static Arg outputF16(std::span<uint16_t> bits);
  static Arg inputBF16(std::span<const uint16_t> bits);
  static Arg outputBF16(std::span<uint16_t> bits);
  static Arg i64(int64_t value);
  static Arg f32(float value);

  Param::Kind kind() const { return kind_; }

 private:
  friend class Kernel;
  static Arg typed(Arg a, void* data, std::size_t elements, Param::Elem elem);
  Param::Kind kind_ = Param::Kind::View;
  Param::Elem elem_ = Param::Elem::F32;
  void* data_ = nullptr;
  std::size_t elements_ = 0;
  bool read_only_ = false;
  int64_t i64_ = 0;
  float f32_ = 0.0f;
};

// How evaluate() runs the interpreter (docs/ir.md): StrictF32 does float arithmetic in exactly
// the order the IR defines (precise-mode compiled code gives the same bits); F64 does every
// operation in double (Kiln's FP64 oracle).
enum class EvalMode { F64, StrictF32 };

// A compiled kernel, ready to launch. Copies are cheap and share the compiled code; launch() may
// be called from several threads at once (each launch has its own workspaces). The bits of the
// outputs depend only on the kernel and its inputs (not on threads or ISA) unless the knob
// fast_math is set (docs/backend.md). A moved-from Kernel has no parameters, an empty name and
// report, and its launch() is an error.
class Kernel {
 public:
  // A kernel built with the DSL (kiln/dsl.h). An unsuccessful build returns its diagnostics.
  static Result<Kernel> compile(const dsl::BuildResult& built, const Options& options = {});

  // A kernel written in TileIR text (docs/ir.md). `source_name` names it in diagnostics
  // ("NAME:LINE:COL: error: ...").
  static Result<Kernel> fromText(std::string_view tile_text, const Options& options = {},
                                 std::string_view source_name = "<text>");

  // A kernel of Kiln's library (docs/kernels.md) by name and shape, e.g. ("attention",
  // "1,8,2,1,2053,80,96", {{"mask", "none"}}); `library_options` are the CLI's kernel options
  // without "--" (mask, block, split, eps, ...).
  static Result<Kernel> library(std::string_view name, std::string_view shape,
                                const std::map<std::string, std::string>& library_options = {},
                                const Options& options = {});

  // The names of the library's kernels and, per kernel, the shape fields it takes.
  static std::vector<std::pair<std::string, std::string>> libraryKernels();

  // Runs the kernel on `args` (one per parameter, in order) and returns when every output is
  // written. Checked before anything runs: the count, each argument's kind, non-null buffers
  // of at least the parameter's size, and read-only inputs not written; an error names the
  // parameter.
  Status launch(std::span<const Arg> args) const;
  Status launch(std::initializer_list<Arg> args) const {
    return launch(std::span<const Arg>(args.begin(), args.size()));
  }

  // Runs the kernel's IR on the interpreter instead of the compiled code, on the same arguments
  // with the same checks as launch(); the outputs are written in place. In F64 mode they receive
  // the double results rounded to their element type, and `f64_views` (when not null) receives
  // every parameter's double values after the run (one vector per parameter, row-major; empty
  // for scalars and integer views; a 16-bit view's before rounding to its type). Slow (an
  // interpreter): for checking, not for production.
  Status evaluate(std::span<const Arg> args, EvalMode mode = EvalMode::F64,
                  std::vector<std::vector<double>>* f64_views = nullptr) const;
  Status evaluate(std::initializer_list<Arg> args, EvalMode mode = EvalMode::F64,
                  std::vector<std::vector<double>>* f64_views = nullptr) const {
    return evaluate(std::span<const Arg>(args.begin(), args.size()), mode, f64_views);
  }

  const std::string& name() const;
  const std::vector<Param>& params() const;
  // The parameter called `name` (without '%'), or null.
  const Param* param(std::string_view name) const;
  // The worker threads a launch uses (the knob threads).
  int threads() const;
  // The realization report as JSON text (what `kiln compile --emit report` prints: the plan,
  // the knobs, layouts, resources, compile time, target, cache).
  const std::string& report() const;
  // The kernel's canonical TileIR text.
  const std::string& text() const;

  Kernel(const Kernel&) = default;
  Kernel& operator=(const Kernel&) = default;
  Kernel(Kernel&&) noexcept = default;
  Kernel& operator=(Kernel&&) noexcept = default;
  ~Kernel();

  struct Impl;

 private:
  explicit Kernel(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  static Result<Kernel> fromImpl(Result<std::shared_ptr<const Impl>> impl);
  std::shared_ptr<const Impl> impl_;
};

// The on-disk object cache (docs/cache.md), process-wide: compiles with an equal kernel, knobs,
// CPU, LLVM and Kiln build reuse the stored object. Off until called. `dir` "" takes the
// directory from the environment as the CLI does ($KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln,
// ~/.cache/kiln); "off" turns the cache off. Call before compiling from several threads.
Status useObjectCache(const std::string& dir = "", int64_t max_megabytes = 512);

}  // namespace kiln
