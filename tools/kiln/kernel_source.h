// Where a subcommand's kernel comes from: a .tile FILE, or a library kernel
// (`--kernel NAME --shape S` plus its options, src/kernels/registry.h).
#pragma once

#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "command.h"
#include "driver/check.h"
#include "driver/library_target.h"
#include "kernels/registry.h"
#include "plan/knobs.h"
#include "tune/tune.h"

namespace kiln::cli {

struct KernelSource {
  std::string file;
  std::string kernel;
  std::string shape;
  // Library kernel options: name (without --) -> the CLI option that holds it.
  std::vector<std::pair<std::string, CLI::Option*>> kernel_options;
  std::vector<std::string> values;  // one per option; sized before CLI11 holds references into it
  bool trans_b = false;
  bool varlen = false;
  bool runtime_rows = false;

  void add(CLI::App* app) {
    app->add_option("FILE", file, "The .tile kernel (\"-\" reads stdin); or use --kernel");
    app->add_option("--kernel", kernel, "A library kernel instead of FILE (see `kiln kernels`)");
    app->add_option("--shape", shape,
                    "The library kernel's shape, comma-separated (e.g. attention: B,Hq,Hkv,Q,K,D,Dv)");
    const std::pair<const char*, const char*> opts[] = {
        {"block", "attention: BQxBK, query rows x keys per KV block"},
        {"mask", "attention: causal | none"},
        {"scale", "attention: score scale (default 1/sqrt(D))"},
        {"eps", "rmsnorm, layernorm: epsilon"},
        {"style", "rope: neox | interleaved"},
        {"base", "rope: frequency base"},
        {"approx", "gelu: erf | tanh"},
        {"heads", "attention: stacked (query heads of a KV head as rows) | separate"},
        {"fma", "attention, gemm: fused (mma steps rounded once) | unfused (MUL then ADD)"},
        {"order",
         "gemm: ascending | bf16_dot (the mma in AMX's bf16 order: operands rounded to bf16; AMX tiles on an "
         "AMX host) | bf16_pairs (the mma in VDPBF16PS's order: AVX512-BF16 on a CPU with it); attention: "
         "ascending | bf16_pairs (both mmas in that order: q, k, p and v rounded to bf16)"},
        {"split", "attention: N (KV chunks merged by a second phase) | auto | off"},
        {"merge-columns", "attention with a split: N (value columns per merge program; the same bits) | auto | off"},
        {"lanes", "attention: keys | queries | auto (what lies along the vector lanes)"},
        {"qk",
         "attention: outer | dot | auto (q.k^T as an outer product in ascending D, or a dot product over D "
         "in the partitions(16) order)"},
        {"kv-cache",
         "attention: none | dense | paged (a KV cache of capacity K; lengths at launch: --arg/--input lens)"},
        {"capacity", "attention --kv-cache: positions per sequence (default K of --shape)"},
        {"page", "attention --kv-cache paged: positions per page (default 16)"},
        {"pages", "attention --kv-cache paged: pages in the pool (default B * ceil(K/page))"},
        {"positions", "rope: positions from a view positions: view<i32>[tokens] in [0, N-1] given at launch"},
        {"kv-dtype", "attention: f32 | f16 | bf16, the storage of k and v"},
        {"a-dtype", "gemm: f32 | f16 | bf16, the storage of A"},
        {"b-dtype", "gemm: f32 | f16 | bf16, the storage of B (weights)"},
        {"tile", "gemm: TMxTNxTK, outputs per program and K per step (the bits do not depend on it)"},
        {"split-k", "gemm: N | auto | off, K chunks summed in order by a second phase (a different result)"},
        {"parts",
         "softmax: N | auto | off, each row in N parts of whole column chunks over programs, two phases (a "
         "different result)"},
        {"passes",
         "softmax: 2 | 3 | auto, rows of several column chunks in two passes or three (max, sum of exps, "
         "write: an exp fewer per element; a different result)"},
        {"dtype",
         "softmax, rmsnorm, layernorm, swiglu, rope, gelu: f32 | f16 | bf16, the storage of inputs and outputs"},
        {"out-dtype",
         "rmsnorm, swiglu, attention: f32 | f16 | bf16, the storage of the output alone (default: --dtype; attention: "
         "f32)"},
    };
    values.assign(std::size(opts), std::string());
    for (size_t i = 0; i < std::size(opts); ++i)
      kernel_options.emplace_back(opts[i].first,
                                  app->add_option(std::string("--") + opts[i].first, values[i], opts[i].second));
    kernel_options.emplace_back("trans-b", app->add_flag("--trans-b", trans_b, "gemm: B is given as N x K"));
    kernel_options.emplace_back(
        "varlen", app->add_flag("--varlen", varlen, "attention --kv-cache: packed queries q [Q,Hq,D] with cu_seqlens"));
    kernel_options.emplace_back(
        "runtime-rows", app->add_flag("--runtime-rows", runtime_rows,
                                      "softmax, rmsnorm, swiglu, rope: the row count at launch (--arg rows=N)"));
  }

  bool isLibrary() const { return !kernel.empty(); }

  // Options and knobs from the tuning database (docs/tune.md), filled by applyTuning().
  std::map<std::string, std::string> tuned_options;
  std::string tuning = "default";  // default | tuned | user: where the tuned dimensions came from
  std::string tuned_label;         // the database's choice, when there is an entry

  // What the library sizes programs for: the target knob's model (set before load()).
  void setTarget(const plan::Knobs& knobs) { target = driver::libraryTarget(knobs); }
  kernels::LibraryTarget target;

  kernels::LibraryRequest request() const {
    kernels::LibraryRequest r{kernel, shape, {}, target};
    for (size_t i = 0; i < kernel_options.size(); ++i)
      if (kernel_options[i].second->count() > 0)
        r.options[kernel_options[i].first] = i >= values.size() ? "true" : values[i];  // a flag: trans-b, varlen
    for (const auto& [k, v] : tuned_options) r.options.emplace(k, v);                  // the user's own win
    return r;
  }

  // A library kernel: use the tuning database's choice for this request and knobs where the
  // user chose nothing (options not given, knobs not --set). Call after the knobs are applied.
  void applyTuning(plan::Knobs& knobs, const std::vector<std::string>& user_sets) {
    if (!isLibrary()) return;
    kernels::LibraryRequest given = request(), r = given;
    std::optional<tune::Entry> entry;
    tuning = tune::applyTuned(r, knobs, user_sets, &entry);
    for (const auto& [k, v] : r.options)
      if (!given.options.count(k)) tuned_options[k] = v;
    if (entry) tuned_label = entry->choice.label();
  }

  // A .tile kernel: its tuned knobs (docs/tune.md), where the user did not --set them.
  void applyTuning(const ir::Kernel& k, plan::Knobs& knobs, const std::vector<std::string>& user_sets) {
    if (isLibrary()) return;
    std::optional<tune::Entry> entry;
    tuning = tune::applyTuned(k, knobs, user_sets, &entry);
    if (entry) tuned_label = entry->choice.label();
  }

  // The verified kernel, or nullptr after printing the error.
  std::unique_ptr<ir::Kernel> load(const char* command) const {
    auto fail = [&](const std::string& message) {
      std::cerr << "kiln " << command << ": error: " << message << (message.back() == '\n' ? "" : "\n");
      return nullptr;
    };
    if (!isLibrary()) {
      if (!shape.empty()) return fail("--shape needs --kernel NAME");
      for (const auto& [name, option] : kernel_options)
        if (option->count() > 0) return fail("--" + name + " is an option of library kernels; it needs --kernel NAME");
      if (file.empty()) return fail("no kernel: give a .tile FILE, or --kernel NAME --shape S");
      return loadKernel(file);
    }
    if (!file.empty()) return fail("give either FILE ('" + file + "') or --kernel " + kernel + ", not both");
    if (shape.empty()) {
      for (const kernels::LibraryKernelInfo& k : kernels::libraryKernels())
        if (k.name == kernel) return fail("--kernel " + kernel + " needs --shape " + k.shape_fields);
    }
    std::unique_ptr<ir::Kernel> out;
    if (auto e = kernels::buildLibraryKernel(request(), out)) return fail(*e);
    return out;
  }

  // More to say about a failed compilation of a library kernel: its tile sizes come from the
  // request (attention: --block), so the fix is usually there rather than in a knob.
  std::string hint(const std::string& error) const {
    if (kernel != "attention" || error.find("max_local_bytes") == std::string::npos) return "";
    return "kiln: note: attention's tiles are set by --block BQxBK (BK rows of k and v, BQ rows of q and o); a "
           "smaller block needs less memory per worker\n";
  }

  // A library kernel is checked in f64 against its own FP64 reference (plain C++).
  void configure(driver::CheckOptions& options) const {
    if (!isLibrary()) return;
    options.f64_reference = [r = request()](const std::vector<host::ParamData>& inputs,
                                            std::vector<std::vector<double>>& outputs) {
      return kernels::libraryReference(r, inputs, outputs);
    };
    options.f64_allowance = [r = request()](const std::vector<host::ParamData>& inputs,
                                            std::vector<std::vector<double>>& allowances) {
      return kernels::libraryAllowance(r, inputs, allowances);
    };
  }
};

}  // namespace kiln::cli
