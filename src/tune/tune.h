// kiln tune: for a library kernel and shape (or a .tile kernel: knobs only), the legal candidates the library and
// planner offer (attention: query/key blocks, the KV split and the lanes layout; every kernel: the vector width), each
// checked against the FP64 reference before it is timed, each timed against the current default with the bench's paired
// protocol (A,B,B,A cycles; ratio = median of the paired ratios). A candidate is kept only when its whole ratio range
// is below 1 — a winner is never picked from noise — and the best kept one goes into the tuning database
// (docs/tune.md), which `kiln run`, `kiln compile`, `kiln peers` and the library then use for that key.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/ir.h"
#include "kernels/registry.h"
#include "plan/knobs.h"

namespace kiln::tune {

// Library options and knob assignments that tuning may choose (the rest of a request is the
// user's: shape, mask, scale, heads, fma).
struct Choice {
  std::map<std::string, std::string> options;  // e.g. {"block", "1x128"}, {"split", "off"}
  std::vector<std::string> knobs;              // e.g. "packet_width=8"
  std::string label() const;                   // "block 1x128, split off, packet_width=8" or "default"
  nlohmann::json toJson() const;
  static std::optional<Choice> fromJson(const nlohmann::json& j);
};

struct CandidateResult {
  Choice choice;
  // default | kept | not faster (range reaches 1) | slower | wrong (failed the f64 check) |
  // failed (does not build or compile) | skipped (budget)
  std::string status;
  std::string detail;                              // the error, for wrong / failed
  double ratio = 0, ratio_min = 0, ratio_max = 0;  // candidate time / default time, paired
  int pairs = 0;                                   // paired ratios behind them
  int measurements = 0;  // paired measurements made (more than 1: re-measured, the range reached 1)
};

struct TuneOptions {
  kernels::LibraryRequest request;  // the user's request; tuning varies block / split itself
  // Or a kernel from a .tile file (not null: `request` is ignored): knobs only (packet_width=8,
  // local_lanes=1), each candidate checked bitexact against the interpreter.
  const ir::Kernel* file = nullptr;
  plan::Knobs knobs;  // the user's knobs (threads included)
  double budget_s = 60.0;
  int cycles = 3;          // A,B,B,A cycles per candidate
  double sample_ms = 5.0;  // target time of one sample batch
  int samples = 3;         // samples per visit
  uint64_t seed = 0;
};

struct TuneResult {
  std::string key;
  std::vector<CandidateResult> candidates;  // [0] is the default
  std::optional<size_t> chosen;             // index of the kept candidate with the lowest ratio
  double seconds = 0;
  bool budget_exhausted = false;
};

// The candidates for a request (the default first). Error: the request itself is bad.
std::optional<std::string> candidates(const kernels::LibraryRequest& request, const plan::Knobs& knobs,
                                      std::vector<Choice>& out);

// Runs the search. `progress(done, total, label)` after each step (the CLI draws a bar).
std::optional<std::string> run(const TuneOptions& options, TuneResult& out,
                               const std::function<void(int, int, const std::string&)>& progress = {});

// ---- the tuning database (docs/tune.md) ----

// SHA-256 over: kernel name, shape, the user's options other than the tuned ones (sorted), the
// threads knob, the target CPU name and features, LLVM's version and Kiln's version.
std::string tuningKey(const kernels::LibraryRequest& request, const plan::Knobs& knobs);

// A .tile kernel's key: its canonical text instead of the request, then the same fields.
std::string tuningKey(const ir::Kernel& kernel, const plan::Knobs& knobs);

// $KILN_TUNE_DB, else tuning.json in the cache directory (docs/cache.md); "" when there is none.
std::string databasePath();

struct Entry {
  Choice choice;
  nlohmann::json record;  // ratio, range, pairs, machine, date, request
};

// The tuned choice for this key, if the database has one. A database that cannot be read is a
// warning (on stderr) and no entry.
std::optional<Entry> lookup(const std::string& key);

// Stores (or replaces) the entry for `key`; written atomically (temporary file, rename).
std::optional<std::string> store(const std::string& key, const Entry& entry);

// Applies a tuned choice to a request and knobs where the user did not choose: options the
// request does not have and knobs not in `user_knobs`. Returns "tuned" when something was
// applied, "user" when the user set every tuned dimension, "default" when there is no entry.
std::string applyTuned(kernels::LibraryRequest& request, plan::Knobs& knobs, const std::vector<std::string>& user_knobs,
                       std::optional<Entry>* found = nullptr);
// The same for a .tile kernel (its tuned knobs).
std::string applyTuned(const ir::Kernel& kernel, plan::Knobs& knobs, const std::vector<std::string>& user_knobs,
                       std::optional<Entry>* found = nullptr);

}  // namespace kiln::tune
