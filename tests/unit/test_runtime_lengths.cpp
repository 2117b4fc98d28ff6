// Runtime lengths (docs/ir.md, "Runtime extents" and "Stated ranges"; docs/kernels.md, "KV
// caches"): one compiled kernel for every length. A domain whose extent comes with the
// launch, against the interpreter over the backend grid; a decode loop over lengths 1..600 on
// one cache that compiles once; varlen batches on dense and paged caches; and the refusals of
// arguments outside their stated ranges, by every layer.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "driver/check.h"
#include "driver/compile.h"
#include "host/data.h"
#include "host_isa.h"
#include "interp/interp.h"
#include "ir/diag.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "jit/object_file.h"
#include "kernels/registry.h"
#include "plan/knobs.h"
#include "runtime/runtime.h"

namespace {

using kiln::driver::CheckMode;

std::unique_ptr<kiln::ir::Kernel> parse(const std::string& text, kiln::ir::DiagEngine& diag) {
  auto k = kiln::ir::parseKernel(text, "t.tile", diag);
  if (k && !kiln::ir::verify(*k, diag)) return nullptr;
  return k;
}

std::unique_ptr<kiln::ir::Kernel> rowsKernel() {
  kiln::ir::DiagEngine diag;
  auto k = kiln::ir::parseFile(std::string(KILN_SOURCE_DIR) + "/tests/ir/runtime_extents.tile", diag);
  EXPECT_TRUE(k && kiln::ir::verify(*k, diag)) << diag.str();
  return k;
}

std::unique_ptr<kiln::ir::Kernel> library(const kiln::kernels::LibraryRequest& r) {
  std::unique_ptr<kiln::ir::Kernel> k;
  auto e = kiln::kernels::buildLibraryKernel(r, k);
  EXPECT_FALSE(e.has_value()) << *e;
  return k;
}

kiln::plan::Knobs knobsOf(const std::vector<std::string>& sets) {
  kiln::plan::Knobs knobs;
  for (const std::string& s : sets) EXPECT_FALSE(knobs.setAssignment(s).has_value()) << s;
  return knobs;
}

// "SHAPE --option value ... knob=value ...": what a failure names.
std::string labelOf(const kiln::kernels::LibraryRequest& request, const std::vector<std::string>& point) {
  std::string label = request.name + " " + request.shape;
  for (const auto& [n, v] : request.options) label += " --" + n + " " + v;
  for (const std::string& s : point) label += " " + s;
  return label;
}

// check() of a library kernel in `mode` on the given integer views; f64 against its plain FP64
// reference.
void checkLibrary(const kiln::kernels::LibraryRequest& request, const kiln::ir::Kernel& k,
                  const kiln::plan::Knobs& knobs, CheckMode mode, std::map<std::string, std::vector<int64_t>> ints,
                  kiln::driver::CheckResult& r, const std::string& label) {
  kiln::driver::CheckOptions o;
  o.mode = mode;
  o.int_views = std::move(ints);
  o.f64_reference = [&](const std::vector<kiln::host::ParamData>& in, std::vector<std::vector<double>>& out) {
    return kiln::kernels::libraryReference(request, in, out);
  };
  ASSERT_FALSE(kiln::driver::check(k, knobs, o, r).has_value()) << label;
  EXPECT_TRUE(r.pass) << label << (mode == CheckMode::Bitexact ? " bitexact" : " f64");
  EXPECT_EQ(r.plan_vs_code, "") << label;
}

// Every request at every point of `points` this host runs, bitexact (checkLibrary), and f64 at
// the first point that runs: the bits are the interpreter's at every point, so the first point's
// f64 verdict holds for all of them. The integer views are `ints`, plus `table` as a paged
// request's block table; `each` (optional) sees every result. In the sanitizer tree each request
// runs at one point that runs here, the requests taking the points in turn (host_isa.h).
void checkGrid(const std::vector<kiln::kernels::LibraryRequest>& requests,
               const std::vector<std::vector<std::string>>& points,
               const std::map<std::string, std::vector<int64_t>>& ints, const std::vector<int64_t>& table,
               const std::function<void(const kiln::driver::CheckResult&, const std::string&)>& each = {}) {
  static size_t turn = 0;  // over every request of every call: a grid of one request rotates too
  for (const auto& request : requests) {
    auto k = library(request);
    ASSERT_TRUE(k);
    std::map<std::string, std::vector<int64_t>> views = ints;
    if (request.options.at("kv-cache") == "paged") views["block_table"] = table;
    bool f64Checked = false;
    const size_t first = kiln::testhost::kSanitized ? turn++ % points.size() : 0;
    for (size_t p = 0; p < points.size(); ++p) {
      const std::vector<std::string>& point = points[(first + p) % points.size()];
      const kiln::plan::Knobs knobs = knobsOf(point);
      const std::string label = labelOf(request, point);
      if (!kiln::testhost::runsHere(knobs.isa, "RuntimeLengths " + label)) continue;
      for (CheckMode mode : {CheckMode::Bitexact, CheckMode::F64}) {
        if (mode == CheckMode::F64 && std::exchange(f64Checked, true)) continue;
        kiln::driver::CheckResult r;
        checkLibrary(request, *k, knobs, mode, views, r, label);
        if (each) each(r, label);
      }
      if (kiln::testhost::kSanitized) break;
    }
  }
}

// tests/ir/runtime_extents.tile's y, from its definition.
std::vector<float> expectedRows(const std::vector<float>& x, const std::vector<int64_t>& lens, int64_t n) {
  std::vector<float> y(64 * 40, 0.0f);
  const int64_t rows = (n + 7) / 8 * 8;
  for (int64_t r = 0; r < rows; ++r) {
    float sum = 0.0f;
    for (int64_t c = 0; c < 40; ++c)
      if (c < lens[r]) sum = sum + x[r * 40 + c];
    const float scale = sum + static_cast<float>(r / 8);
    for (int64_t c = 0; c < 40; ++c) y[r * 40 + c] = (c < lens[r] ? x[r * 40 + c] : 0.0f) * scale;
  }
  return y;
}

TEST(RuntimeLengths, TheTextFormRoundTripsRangesAndRuntimeExtents) {
  auto k = rowsKernel();
  ASSERT_TRUE(k);
  const std::string text = kiln::ir::print(*k);
  EXPECT_NE(text.find("%lens: view<i32>[64] in [0, 40]"), std::string::npos) << text;
  EXPECT_NE(text.find("%n: i64 in [0, 64]"), std::string::npos) << text;
  EXPECT_NE(text.find("parallel (%rb, %j) in (cdiv(%n, 8), 8)"), std::string::npos) << text;
  kiln::ir::DiagEngine diag;
  auto again = parse(text, diag);
  ASSERT_TRUE(again) << diag.str();
  EXPECT_EQ(kiln::ir::print(*again), text);
  EXPECT_EQ(k->root()->extents, (std::vector<int64_t>{8, 8}));  // the maximum: ceil(64 / 8)
  EXPECT_TRUE(k->runtimeExtents());
}

TEST(RuntimeLengths, TheInterpreterRunsTheDomainOfTheLaunch) {
  auto k = rowsKernel();
  ASSERT_TRUE(k);
  for (int64_t n : {0, 1, 8, 9, 45, 64}) {
    std::vector<kiln::host::ParamData> p;
    ASSERT_FALSE(kiln::host::makeInputs(*k, 5, {{"n", std::to_string(n)}}, p).has_value());
    for (int64_t v : p[1].ints) EXPECT_TRUE(v >= 0 && v <= 40) << v;  // within the stated range
    kiln::interp::Options o;
    o.mode = kiln::interp::Mode::StrictF32;
    ASSERT_FALSE(kiln::interp::evaluate(*k, p, o).has_value());
    EXPECT_EQ(p[3].data, expectedRows(p[0].data, p[1].ints, n)) << "n=" << n;
  }
}

TEST(RuntimeLengths, OneObjectRunsEveryExtentOnEveryRealization) {
  auto k = rowsKernel();
  ASSERT_TRUE(k);
  const std::vector<std::vector<std::string>> points = {
      {"local_lanes=1", "packet_width=8", "isa=avx2", "threads=1"},
      {"local_lanes=1", "packet_width=16", "isa=avx512", "threads=2"},
      {"local_lanes=1", "packet_width=4", "isa=avx2", "max_unrolled_tile_elements=1", "threads=2"},
      {"local_lanes=16", "packet_width=16", "isa=avx2", "threads=2"},
      {"local_lanes=8", "packet_width=8", "isa=avx512", "threads=1", "block_size=3"},
      {"local_lanes=1", "packet_width=8", "isa=avx2", "root_axis_order=j,rb", "threads=2"}};
  for (const auto& point : points) {
    const kiln::plan::Knobs knobs = knobsOf(point);
    std::string label;
    for (const std::string& s : point) label += s + " ";
    kiln::driver::Compilation c;
    ASSERT_FALSE(kiln::driver::compile(*k, knobs, c).has_value()) << label;
    EXPECT_EQ(kiln::driver::planDisagreesWithCode(c.report), std::nullopt) << label;
    EXPECT_EQ(c.report["domain"]["runtime"], true);
    EXPECT_EQ(c.report["phases"][0]["domain"]["runtime_extents"][0]["param"], "%n");
    if (!kiln::testhost::runsHere(knobs.isa, "RuntimeLengths " + label)) continue;
    std::unique_ptr<kiln::runtime::LoadedKernel> loaded;
    ASSERT_FALSE(kiln::driver::load(c.object, *k, knobs.isa, knobs.threads, loaded).has_value()) << label;
    for (int64_t n : {0, 1, 7, 8, 17, 45, 63, 64}) {
      std::vector<kiln::host::ParamData> p;
      ASSERT_FALSE(kiln::host::makeInputs(*k, 11, {{"n", std::to_string(n)}}, p).has_value());
      std::vector<kiln::host::ParamData> interp = p;
      kiln::interp::Options o;
      o.mode = kiln::interp::Mode::StrictF32;
      ASSERT_FALSE(kiln::interp::evaluate(*k, interp, o).has_value());
      kiln::runtime::KilnLaunchRecord record;
      ASSERT_FALSE(kiln::driver::run(*loaded, p, true, &record).has_value()) << label << " n=" << n;
      EXPECT_EQ(p[3].data, interp[3].data) << label << " n=" << n;
      EXPECT_EQ(p[3].data, expectedRows(p[0].data, p[1].ints, n)) << label << " n=" << n;
      // Only the launch's programs ran: cdiv(n, 8) x 8 of them, in packets or one by one.
      const int64_t programs = (n + 7) / 8 * 8, ran = record.packets_full + record.packets_masked;
      if (knobs.local_lanes == 1)
        EXPECT_EQ(ran, (programs + knobs.packet_width - 1) / knobs.packet_width) << label << " n=" << n;
      else
        EXPECT_EQ(ran, programs) << label << " n=" << n;
    }
  }
}

// Every layer refuses an argument outside its stated range, naming the parameter and value;
// the IR refuses ranges and runtime extents it cannot honour.
TEST(RuntimeLengths, ArgumentsOutsideTheirRangesAreRefused) {
  auto k = rowsKernel();
  ASSERT_TRUE(k);
  kiln::driver::Compilation c;
  ASSERT_FALSE(kiln::driver::compile(*k, kiln::plan::Knobs{}, c).has_value());
  if (kiln::testhost::runsHere("native", "RuntimeLengths refusals")) {
    std::unique_ptr<kiln::runtime::LoadedKernel> loaded;
    ASSERT_FALSE(kiln::driver::load(c.object, *k, "native", 1, loaded).has_value());
    std::vector<float> x(64 * 40, 1.0f), y(64 * 40, 7.0f);
    std::vector<int32_t> lens(64, 3);
    auto launch = [&](int64_t n) {
      std::vector<kiln::runtime::Arg> args = {kiln::runtime::Arg::view(x), kiln::runtime::Arg::i32s(lens),
                                              kiln::runtime::Arg::i64(n), kiln::runtime::Arg::view(y)};
      return loaded->launch(args);
    };
    EXPECT_EQ(launch(65).value_or(""), "parameter 'n' (#2) is 65, outside its stated range [0, 64]");
    EXPECT_EQ(launch(-1).value_or(""), "parameter 'n' (#2) is -1, outside its stated range [0, 64]");
    lens[17] = 41;
    EXPECT_EQ(launch(8).value_or(""), "parameter 'lens' (#1): element 17 is 41, outside its stated range [0, 40]");
    lens[17] = -2;
    EXPECT_EQ(launch(8).value_or(""), "parameter 'lens' (#1): element 17 is -2, outside its stated range [0, 40]");
    for (float v : y) ASSERT_EQ(v, 7.0f);  // nothing ran
    lens[17] = 40;
    EXPECT_FALSE(launch(8).has_value());
  }
  std::vector<kiln::host::ParamData> p;
  ASSERT_FALSE(kiln::host::makeInputs(*k, 1, {{"n", "70"}}, p).has_value());
  EXPECT_EQ(kiln::interp::evaluate(*k, p, {}).value_or(""),
            "parameter 'n' (#2) is 70, outside its stated range [0, 64]");

  const char* bad[][2] = {
      {"%n: i64, %y: view<f32>[8]) {\n  parallel (%p) in (%n) {", "which states no range"},
      {"%n: i64 in [-1, 8], %y: view<f32>[8]) {\n  parallel (%p) in (%n) {", "is not within [0, ..]"},
      {"%n: i64 in [0, 0], %y: view<f32>[8]) {\n  parallel (%p) in (%n) {", "upper end of at least 1"},
      {"%n: i64 in [0, 8], %y: view<f32>[8]) {\n  parallel (%p) in (cdiv(%n, 0)) {", "divisor is 0"},
      {"%n: f32 in [0, 8], %y: view<f32>[8]) {\n  parallel (%p) in (8) {", "only an i64 scalar or an integer view"},
      {"%n: i64 in [5, 4], %y: view<f32>[8]) {\n  parallel (%p) in (8) {", "lower end is above its upper end"},
      {"%n: view<i32>[2] in [0, 4294967296], %y: view<f32>[8]) {\n  parallel (%p) in (8) {", "does not fit in i32"},
      {"%n: view<f32>[8], %y: view<f32>[8]) {\n  parallel (%p) in (%n) {", "not an i64 scalar parameter"},
  };
  for (const auto& [head, message] : bad) {
    kiln::ir::DiagEngine diag;
    const std::string text =
        std::string("kernel @k(") + head + "\n    %v = const 1 : f32[n:8]\n" + "    store %v, %y[0] as [n:8]\n  }\n}\n";
    EXPECT_FALSE(parse(text, diag)) << text;
    EXPECT_NE(diag.str().find(message), std::string::npos) << diag.str();
  }
}

// An ascending stated range (`in [lo, hi] ascending`, FlashAttention's cu_seqlens): printed
// back as written; every layer refuses an element below the one before it, naming both; the
// generated inputs draw ascending values, so a varlen attention's generated batch has queries;
// only an integer view may state it.
TEST(RuntimeLengths, AscendingRangesAreCheckedAndDrawnInOrder) {
  const std::string text = R"(kernel @cum(%cu: view<i32>[5] in [0, 8] ascending, %y: view<f32>[8]) {
  parallel (%p) in (4) {
    %a = load %cu[%p] as [_] fill 0
    %f = cast %a : f32
    store %f, %y[%p] as [_]
  }
}
)";
  kiln::ir::DiagEngine diag;
  auto k = parse(text, diag);
  ASSERT_TRUE(k) << diag.str();
  EXPECT_NE(kiln::ir::print(*k).find("%cu: view<i32>[5] in [0, 8] ascending"), std::string::npos)
      << kiln::ir::print(*k);
  std::vector<float> y(8, 7.0f);
  std::vector<int32_t> cu = {0, 3, 3, 6, 8};
  auto args = [&] {
    return std::vector<kiln::runtime::Arg>{kiln::runtime::Arg::i32s(cu), kiln::runtime::Arg::view(y)};
  };
  if (kiln::testhost::runsHere("native", "RuntimeLengths ascending refusals")) {
    kiln::driver::Compilation c;
    ASSERT_FALSE(kiln::driver::compile(*k, kiln::plan::Knobs{}, c).has_value());
    std::unique_ptr<kiln::runtime::LoadedKernel> loaded;
    ASSERT_FALSE(kiln::driver::load(c.object, *k, "native", 1, loaded).has_value());
    EXPECT_FALSE(loaded->launch(args()).has_value());
    EXPECT_EQ(y[3], 6.0f);
    cu[2] = 2;
    y.assign(8, 7.0f);
    EXPECT_EQ(loaded->launch(args()).value_or(""),
              "parameter 'cu' (#0): element 2 is 2, below element 1 (3); its stated range is ascending");
    EXPECT_EQ(y[0], 7.0f);  // nothing ran
  }
  std::vector<kiln::host::ParamData> p;
  EXPECT_EQ(kiln::host::makeInputs(*k, 1, {{"cu", "0,3,2,6,8"}}, p).value_or(""),
            "override 'cu': 2 follows 3, but %cu's stated range is ascending");
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    ASSERT_FALSE(kiln::host::makeInputs(*k, seed, {}, p).has_value());
    EXPECT_TRUE(std::is_sorted(p[0].ints.begin(), p[0].ints.end())) << seed;
    EXPECT_TRUE(std::all_of(p[0].ints.begin(), p[0].ints.end(), [](int64_t v) { return v >= 0 && v <= 8; }));
    ASSERT_FALSE(kiln::interp::evaluate(*k, p, {}).has_value());
  }
  p[0].ints = {0, 5, 4, 6, 8};
  EXPECT_EQ(kiln::interp::evaluate(*k, p, {}).value_or(""),
            "parameter 'cu' (#0): element 2 is 4, below element 1 (5); its stated range is ascending");

  // The varlen attention states it, and its generated batch has queries (outputs not all zero).
  auto att =
      library({"attention", "2,4,2,16,64,32,32", {{"kv-cache", "dense"}, {"varlen", "true"}, {"mask", "causal"}}});
  ASSERT_TRUE(att);
  EXPECT_NE(kiln::ir::print(*att).find("%cu_seqlens: view<i32>[3] in [0, 16] ascending"), std::string::npos);
  ASSERT_FALSE(kiln::host::makeInputs(*att, 1, {}, p).has_value());
  kiln::interp::Options o;
  o.mode = kiln::interp::Mode::StrictF32;
  ASSERT_FALSE(kiln::interp::evaluate(*att, p, o).has_value());
  const auto& out = p.back().data;
  EXPECT_TRUE(std::any_of(out.begin(), out.end(), [](float v) { return v != 0.0f; }));

  const char* bad = R"(kernel @k(%n: i64 in [0, 4] ascending, %y: view<f32>[8]) {
  parallel (%p) in (8) {
    %v = const 1 : f32[n:8]
    store %v, %y[0] as [n:8]
  }
}
)";
  kiln::ir::DiagEngine d2;
  EXPECT_FALSE(parse(bad, d2));
  EXPECT_NE(d2.str().find("only an integer view states 'ascending'"), std::string::npos) << d2.str();
}

// The object cache's directory for one test: every compile of the request after the first is
// a hit, so "compiled once" is counted, not assumed.
struct CacheDir {
  std::filesystem::path dir;
  explicit CacheDir(const std::string& name)
      : dir(std::filesystem::temp_directory_path() / ("kiln-test-" + name + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(dir);
    kiln::driver::setObjectCache(std::make_shared<kiln::jit::DiskObjectCache>(dir.string(), int64_t{256} << 20));
  }
  ~CacheDir() {
    kiln::driver::setObjectCache(nullptr);
    std::filesystem::remove_all(dir);
  }
};

// A decode loop: the cache grows by one position per step, lengths 1..600 on one compiled
// attention kernel; each step bit-identical to the interpreter and within the FP64 reference.
TEST(RuntimeLengths, ADecodeLoopCompilesTheAttentionOnce) {
  CacheDir cache("decode-loop");
  const kiln::kernels::LibraryRequest request{"attention", "1,8,2,1,600,32,32", {{"kv-cache", "dense"}}};
  auto k = library(request);
  ASSERT_TRUE(k);
  const kiln::plan::Knobs knobs;
  int misses = 0, hits = 0, steps = 0;
  // The sanitizer tree takes every 7th length (host_isa.h): the same paths, fewer runs.
  for (int64_t len = 1; len <= 600; len += kiln::testhost::kSanitized ? 7 : 1, ++steps) {
    kiln::driver::CheckOptions o;
    o.mode = len % 2 ? CheckMode::Bitexact : CheckMode::F64;
    o.seed = 3;  // the same q, k, v at every step: only the length changes
    o.int_views = {{"lens", {len}}};
    o.f64_reference = [&](const std::vector<kiln::host::ParamData>& in, std::vector<std::vector<double>>& out) {
      return kiln::kernels::libraryReference(request, in, out);
    };
    kiln::driver::CheckResult r;
    ASSERT_FALSE(kiln::driver::check(*library(request), knobs, o, r).has_value()) << "len " << len;
    ASSERT_TRUE(r.pass) << "len " << len << " (" << (len % 2 ? "bitexact" : "f64") << ")";
    (r.cache == "miss" ? misses : hits) += 1;
  }
  EXPECT_EQ(misses, 1);
  EXPECT_EQ(hits, steps - 1);
}

// A varlen batch (every sequence its own length) on a dense cache and on a paged one whose
// pages are shuffled, over the backend grid: bit-identical to the interpreter, FP64-checked.
TEST(RuntimeLengths, VarlenBatchesOnDenseAndPagedCaches) {
  const std::vector<int64_t> lens = {1, 17, 300, 301, 1024};
  const int64_t page = 64, maxPages = 1024 / page, pages = 5 * maxPages + 3;
  std::vector<int64_t> table(5 * maxPages);
  std::vector<int64_t> order(pages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  std::copy_n(order.begin(), table.size(), table.begin());  // distinct pages, in no order
  const std::vector<kiln::kernels::LibraryRequest> requests = {
      {"attention", "5,8,2,1,1024,64,64", {{"kv-cache", "dense"}}},
      {"attention", "5,8,2,1,1024,64,64", {{"kv-cache", "dense"}, {"split", "4"}}},
      {"attention", "5,8,2,3,1024,64,64", {{"kv-cache", "dense"}, {"mask", "causal"}}},
      {"attention",
       "5,8,2,1,1024,64,64",
       {{"kv-cache", "paged"}, {"page", std::to_string(page)}, {"pages", std::to_string(pages)}}},
      {"attention",
       "5,8,2,1,1024,64,64",
       {{"kv-cache", "paged"}, {"page", std::to_string(page)}, {"pages", std::to_string(pages)}, {"split", "3"}}}};
  const std::vector<std::vector<std::string>> points = {{"isa=avx2", "threads=1"},
                                                        {"isa=avx512", "threads=2"},
                                                        {"isa=avx2", "packet_width=8", "threads=2"},
                                                        {"isa=avx512", "local_lanes=1", "packet_width=16"}};
  checkGrid(requests, points, {{"lens", lens}}, table);
}

// Packed (varlen) queries, FlashAttention's convention: sequences of 1, 5, 20, 1 and 37 new
// queries (rows cu[b] .. cu[b+1]-1 of q) at the ends of caches of lengths {1, 17, 300, 301,
// 1024}; rows past cu[B] belong to no sequence (zeros). Dense and paged, causal and not.
TEST(RuntimeLengths, PackedQueriesOfEverySequenceLength) {
  const std::vector<int64_t> lens = {1, 17, 300, 301, 1024}, cu = {0, 1, 6, 26, 27, 64};
  std::vector<int64_t> table(5 * 16);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(3));
  const std::vector<kiln::kernels::LibraryRequest> requests = {
      {"attention", "5,8,2,80,1024,64,64", {{"kv-cache", "dense"}, {"varlen", "true"}}},
      {"attention", "5,8,2,80,1024,64,64", {{"kv-cache", "dense"}, {"varlen", "true"}, {"mask", "none"}}},
      {"attention",
       "5,8,2,80,1024,64,64",
       {{"kv-cache", "paged"}, {"page", "64"}, {"pages", "80"}, {"varlen", "true"}}}};
  const std::vector<std::vector<std::string>> points = {
      {"isa=avx2", "threads=2"}, {"isa=avx512", "threads=1"}, {"isa=avx2", "local_lanes=1", "packet_width=8"}};
  checkGrid(requests, points, {{"lens", lens}, {"cu_seqlens", cu}}, table,
            [](const kiln::driver::CheckResult& r, const std::string& label) {
              ASSERT_FALSE(r.native.empty()) << label;
              const std::vector<float>& out = r.native.back().data;  // o [80, 8, 64]
              for (size_t i = 64 * 8 * 64; i < out.size(); ++i) ASSERT_EQ(out[i], 0.0f) << label << " row past cu[B]";
            });
  // Blocks of queries of one sequence (the GPU's default; two phases) compute each row as one
  // token per program does: the same bits, on every backend point; checked against the FP64
  // reference too. Offsets that decrease are refused (cu_seqlens' range is ascending).
  for (const char* cache : {"dense", "paged"}) {
    std::map<std::string, std::string> opts = {{"kv-cache", cache}, {"varlen", "true"}};
    if (std::string(cache) == "paged") opts.insert({{"page", "64"}, {"pages", "80"}});
    std::vector<float> tokens;
    for (const char* block : {"1x64", "16x64"}) {
      opts["block"] = block;
      const bool wide = std::string(block) == "16x64" && std::string(cache) == "dense";  // every point
      const kiln::kernels::LibraryRequest request{"attention", "5,8,2,80,1024,64,64", opts};
      checkGrid({request}, wide ? points : std::vector<std::vector<std::string>>{points[0]},
                {{"lens", lens}, {"cu_seqlens", cu}}, table,
                [&](const kiln::driver::CheckResult& r, const std::string& label) {
                  if (tokens.empty()) tokens = r.native.back().data;
                  EXPECT_EQ(r.native.back().data, tokens) << label << ": not the bits of one token per program";
                });
      if (wide) {  // offsets that decrease break cu_seqlens' ascending range: refused before anything runs
        kiln::driver::CheckOptions o;
        o.int_views = {{"lens", lens}, {"cu_seqlens", {0, 1, 6, 5, 27, 64}}};
        kiln::driver::CheckResult r;
        EXPECT_NE(kiln::driver::check(*library(request), kiln::plan::Knobs{}, o, r)
                      .value_or("")
                      .find("element 3 is 5, below element 2 (6); its stated range is ascending"),
                  std::string::npos);
      }
    }
    EXPECT_FALSE(std::all_of(tokens.begin(), tokens.end(), [](float x) { return x == 0.0f; }));
  }
  // The causal rows differ from the unmasked ones (the mask is applied per sequence).
  std::vector<std::vector<float>> outs;
  for (const char* mask : {"causal", "none"}) {
    const kiln::kernels::LibraryRequest request{
        "attention", "5,8,2,80,1024,64,64", {{"kv-cache", "dense"}, {"varlen", "true"}, {"mask", mask}}};
    kiln::driver::CheckOptions o;
    o.int_views = {{"lens", lens}, {"cu_seqlens", cu}};
    kiln::driver::CheckResult r;
    ASSERT_FALSE(kiln::driver::check(*library(request), kiln::plan::Knobs{}, o, r).has_value());
    outs.push_back(r.native.back().data);
  }
  EXPECT_NE(outs[0], outs[1]);
}

// Row kernels and GEMM with the row count at launch (--runtime-rows) and RoPE at positions from a view:
// every count on one object, bit-identical to the interpreter, FP64-checked, rows past the
// count untouched.
TEST(RuntimeLengths, RowKernelsTakeTheirRowCountAndPositionsAtLaunch) {
  const std::vector<kiln::kernels::LibraryRequest> requests = {
      {"rmsnorm", "40,300", {{"runtime-rows", "true"}}},
      {"softmax", "40,1500", {{"runtime-rows", "true"}}},
      {"rope", "40,4,32", {{"runtime-rows", "true"}, {"positions", "8192"}}},
      {"rope", "40,4,32", {{"style", "interleaved"}, {"positions", "100000"}}},
      {"gemm", "40,70,33", {{"runtime-rows", "true"}}},
      {"gemm", "40,70,33", {{"runtime-rows", "true"}, {"trans-b", "true"}}},
      {"gemm", "40,70,33", {{"runtime-rows", "true"}, {"tile", "16x32x8"}}},
      {"gemm", "40,70,33", {{"runtime-rows", "true"}, {"trans-b", "true"}, {"b-dtype", "bf16"}, {"tile", "3x64x16"}}}};
  for (const auto& request : requests) {
    auto k = library(request);
    ASSERT_TRUE(k);
    const bool runtime = request.options.count("runtime-rows") > 0;
    bool f64Checked = false;  // f64 at the first point that runs (checkGrid says why)
    for (const auto& point : std::vector<std::vector<std::string>>{{"isa=avx2", "threads=2"},
                                                                   {"isa=avx512", "local_lanes=1", "threads=1"}}) {
      const kiln::plan::Knobs knobs = knobsOf(point);
      std::string label = request.name + " " + request.shape + " " + point[0] + " " + point[1];
      if (!kiln::testhost::runsHere(knobs.isa, "RuntimeLengths " + label)) continue;
      const bool f64 = !std::exchange(f64Checked, true);
      for (int64_t rows : runtime ? std::vector<int64_t>{0, 1, 17, 40} : std::vector<int64_t>{40}) {
        for (CheckMode mode : {CheckMode::Bitexact, CheckMode::F64}) {
          if (mode == CheckMode::F64 && !f64) continue;
          kiln::driver::CheckOptions o;
          o.mode = mode;
          if (runtime) o.scalar_args = {{"rows", std::to_string(rows)}};
          o.f64_reference = [&](const std::vector<kiln::host::ParamData>& in, std::vector<std::vector<double>>& out) {
            return kiln::kernels::libraryReference(request, in, out);
          };
          kiln::driver::CheckResult r;
          ASSERT_FALSE(kiln::driver::check(*k, knobs, o, r).has_value()) << label << " rows " << rows;
          EXPECT_TRUE(r.pass) << label << " rows " << rows;
          const std::vector<float>& y = r.native[request.name == "rmsnorm" || request.name == "gemm" ? 2 : 1].data;
          const size_t rowElems = y.size() / 40;
          for (size_t i = static_cast<size_t>(rows) * rowElems; i < y.size(); ++i)
            ASSERT_EQ(y[i], 0.0f) << label << " row " << i / rowElems << " past " << rows;
        }
      }
      if (kiln::testhost::kSanitized) break;  // one point there (host_isa.h)
    }
  }
}

// GEMM tiles (--tile) change the programs, never the bits: K is accumulated in ascending order
// whatever the tile. With rows at launch, a partial last row tile is computed whole (it reads
// A's rows past the count, here NaN) and only its rows below the count reach C.
TEST(RuntimeLengths, GemmTilesDoNotChangeTheBitsAndRowsPastTheCountDoNotMatter) {
  if (!kiln::testhost::runsHere("native", "RuntimeLengths gemm tiles")) return;
  for (const bool trans : {false, true}) {
    for (const bool runtime : {false, true}) {
      std::vector<float> first;
      for (const char* tile : {"", "1x16x1", "3x7x5", "8x64x16", "64x32x256", "4x512x8"}) {
        kiln::kernels::LibraryRequest request{"gemm", "29,70,45", {}};
        if (trans) request.options["trans-b"] = "true";
        if (runtime) request.options["runtime-rows"] = "true";
        if (*tile) request.options["tile"] = tile;
        const std::string label = std::string(trans ? "trans-b " : "") + (runtime ? "runtime-rows " : "") + tile;
        auto k = library(request);
        ASSERT_TRUE(k) << label;
        kiln::driver::Compilation c;
        ASSERT_FALSE(kiln::driver::compile(*k, kiln::plan::Knobs{}, c).has_value()) << label;
        std::unique_ptr<kiln::runtime::LoadedKernel> loaded;
        ASSERT_FALSE(kiln::driver::load(c.object, *k, "native", 1, loaded).has_value()) << label;
        std::vector<kiln::host::ParamData> p;
        const std::map<std::string, std::string> count =
            runtime ? std::map<std::string, std::string>{{"rows", "23"}} : std::map<std::string, std::string>{};
        ASSERT_FALSE(kiln::host::makeInputs(*k, 5, count, p).has_value()) << label;
        const int64_t rows = runtime ? 23 : 29;
        for (size_t i = static_cast<size_t>(rows) * 45; i < p[0].data.size(); ++i)
          p[0].data[i] = std::numeric_limits<float>::quiet_NaN();  // A's rows past the count
        std::fill(p[2].data.begin(), p[2].data.end(), -7.0f);
        ASSERT_FALSE(kiln::driver::run(*loaded, p, false).has_value()) << label;
        const std::vector<float>& out = p[2].data;
        for (size_t i = static_cast<size_t>(rows) * 70; i < out.size(); ++i)
          ASSERT_EQ(out[i], -7.0f) << label << ": C written past row " << rows;
        for (size_t i = 0; i < static_cast<size_t>(rows) * 70; ++i)
          ASSERT_FALSE(std::isnan(out[i])) << label << ": NaN from a row past the count at " << i;
        if (first.empty())
          first = out;
        else
          EXPECT_EQ(std::memcmp(first.data(), out.data(), out.size() * sizeof(float)), 0) << label;
      }
    }
  }
}

// The positions past a sequence's length are not the kernel's: NaN there changes nothing.
TEST(RuntimeLengths, WhatTheCacheHoldsPastALengthDoesNotMatter) {
  const kiln::kernels::LibraryRequest request{"attention", "2,4,2,1,100,16,16", {{"kv-cache", "dense"}}};
  auto k = library(request);
  ASSERT_TRUE(k);
  kiln::driver::Compilation c;
  ASSERT_FALSE(kiln::driver::compile(*k, kiln::plan::Knobs{}, c).has_value());
  if (!kiln::testhost::runsHere("native", "RuntimeLengths NaN past the length")) return;
  std::unique_ptr<kiln::runtime::LoadedKernel> loaded;
  ASSERT_FALSE(kiln::driver::load(c.object, *k, "native", 1, loaded).has_value());
  std::vector<kiln::host::ParamData> p;
  ASSERT_FALSE(kiln::host::makeInputs(*k, 2, {}, p).has_value());
  p[3].ints = {37, 64};
  std::vector<kiln::host::ParamData> poisoned = p;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t j = p[3].ints[b]; j < 100; ++j)
        for (int64_t d = 0; d < 16; ++d) {
          poisoned[1].data[((b * 2 + h) * 100 + j) * 16 + d] = std::numeric_limits<float>::quiet_NaN();
          poisoned[2].data[((b * 2 + h) * 100 + j) * 16 + d] = std::numeric_limits<float>::infinity();
        }
  ASSERT_FALSE(kiln::driver::run(*loaded, p, false).has_value());
  ASSERT_FALSE(kiln::driver::run(*loaded, poisoned, false).has_value());
  EXPECT_EQ(p[4].data, poisoned[4].data);
  for (float v : p[4].data) EXPECT_TRUE(std::isfinite(v));
}

// A library cache kernel refuses lengths past its capacity and pages past its pool.
TEST(RuntimeLengths, TheLibraryStatesItsRanges) {
  auto k = library({"attention", "2,4,2,1,100,16,16", {{"kv-cache", "paged"}, {"page", "32"}, {"pages", "5"}}});
  ASSERT_TRUE(k);
  const std::string text = kiln::ir::print(*k);
  EXPECT_NE(text.find("%lens: view<i32>[2] in [0, 100]"), std::string::npos) << text;
  EXPECT_NE(text.find("%block_table: view<i32>[2, 4] in [0, 4]"), std::string::npos) << text;
  EXPECT_NE(text.find("%k: view<f32>[5, 2, 32, 16]"), std::string::npos) << text;
  std::vector<kiln::host::ParamData> p;
  ASSERT_FALSE(kiln::host::makeInputs(*k, 1, {}, p).has_value());
  p[3].ints = {101, 3};
  EXPECT_EQ(kiln::interp::evaluate(*k, p, {}).value_or(""),
            "parameter 'lens' (#3): element 0 is 101, outside its stated range [0, 100]");
  p[3].ints = {100, 3};
  p[4].ints[5] = 5;
  EXPECT_EQ(kiln::interp::evaluate(*k, p, {}).value_or(""),
            "parameter 'block_table' (#4): element 5 is 5, outside its stated range [0, 4]");
  std::unique_ptr<kiln::ir::Kernel> none;
  EXPECT_EQ(kiln::kernels::buildLibraryKernel({"attention", "1,4,2,1,64,16,16", {{"page", "16"}}}, none).value_or(""),
            "attention: --page needs --kv-cache dense|paged");
  EXPECT_EQ(kiln::kernels::buildLibraryKernel(
                {"attention", "1,4,2,1,64,16,16", {{"kv-cache", "paged"}, {"page", "24"}, {"block", "1x16"}}}, none)
                .value_or(""),
            "attention: --block BK=16 does not divide --page 24 (a KV block lies within one page)");
}

}  // namespace
