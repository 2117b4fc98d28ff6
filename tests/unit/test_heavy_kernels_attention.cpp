// The attention correctness matrix (label "heavy"): the library attention kernel, compiled and
// run natively, against the FP64 reference (tolerance 5e-5 + 5e-5·|ref|) and bit for bit
// against the strict-f32 interpreter, for the seed's shapes and more, both masks, blocks
// 1x16, 4x16 and 8x32 where BQ <= Q, under the default knobs and each of the seed's eight knob
// combinations (packet_width=8 block_size=32 local_lanes=1 max_unrolled_tile_elements=64
// max_unrolled_region_work=4096; R in {1,4}, max_unrolled_mma_terms in {0,8}, full_packet
// on/off). Inputs and the FP64 reference are made once per (shape, mask), the strict-f32
// result once per (shape, mask, block); the knob sets reuse them. scripts/sweep-kernels.sh
// goes further (more blocks, threads, seeds) through the CLI.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "driver/compile.h"
#include "host/data.h"
#include "interp/interp.h"
#include "kernels/registry.h"
#include "plan/knobs.h"

namespace kiln::kernels {
namespace {

struct KnobSet {
  std::string name;
  std::vector<std::string> sets;
};

// The seed's eight combinations; index = R4 * 4 + cap8 * 2 + full_packet.
std::vector<KnobSet> seedKnobSets() {
  std::vector<KnobSet> v;
  for (int r : {1, 4})
    for (int cap : {0, 8})
      for (const char* p : {"off", "on"})
        v.push_back({"R" + std::to_string(r) + "_cap" + std::to_string(cap) + "_P" + p,
                     {"packet_width=8", "block_size=32", "local_lanes=1", "max_unrolled_tile_elements=64",
                      "max_unrolled_region_work=4096", "mma_output_block=" + std::to_string(r),
                      "max_unrolled_mma_terms=" + std::to_string(cap), std::string("full_packet=") + p}});
  return v;
}

std::vector<int64_t> fields(const std::string& shape) {
  std::vector<int64_t> v;
  size_t start = 0;
  while (true) {
    size_t c = shape.find(',', start);
    v.push_back(std::stoll(shape.substr(start, c - start)));
    if (c == std::string::npos) return v;
    start = c + 1;
  }
}

struct Case {
  std::string shape;
  std::string mask;
};

class AttentionMatrix : public testing::TestWithParam<Case> {};

TEST_P(AttentionMatrix, NativeMatchesReferenceAndStrictF32) {
  const Case& sh = GetParam();
  const std::string& mask = sh.mask;
  const int64_t Q = fields(sh.shape)[3];
  const std::vector<KnobSet> seed = seedKnobSets();
  auto t0 = std::chrono::steady_clock::now();
  int runs = 0;
  std::vector<host::ParamData> inputs;
  std::vector<std::vector<double>> ref;
  for (const char* block : {"1x16", "4x16", "8x32"}) {
    const int64_t bq = std::stoll(block);
    if (bq > Q) continue;  // the block does not fit the query rows
    LibraryRequest req{"attention", sh.shape, {{"mask", mask}, {"block", block}}};
    SCOPED_TRACE(testing::Message() << "--shape " << sh.shape << " --mask " << mask << " --block " << block);
    std::unique_ptr<ir::Kernel> kernel;
    auto err = buildLibraryKernel(req, kernel);
    ASSERT_FALSE(err) << *err;
    if (inputs.empty()) {
      ASSERT_FALSE(host::makeInputs(*kernel, 0, {}, inputs));
      err = libraryReference(req, inputs, ref);
      ASSERT_FALSE(err) << *err;
    }
    std::vector<host::ParamData> strict = inputs;
    err = interp::evaluate(*kernel, strict, {interp::Mode::StrictF32});
    ASSERT_FALSE(err) << *err;
    std::vector<KnobSet> sets = {{"default", {}}};
    sets.insert(sets.end(), seed.begin(), seed.end());
    for (const KnobSet& ks : sets) {
      SCOPED_TRACE("knobs " + ks.name);
      plan::Knobs knobs;
      for (const std::string& s : ks.sets) ASSERT_FALSE(knobs.setAssignment(s)) << s;
      driver::Compilation c;
      err = driver::compile(*kernel, knobs, c, driver::Stage::Obj);
      ASSERT_FALSE(err) << *err;
      std::unique_ptr<runtime::LoadedKernel> loaded;
      err = driver::load(c.object, *kernel, knobs.isa, static_cast<int>(knobs.threads), loaded);
      ASSERT_FALSE(err) << *err;
      std::vector<host::ParamData> got = inputs;
      err = driver::run(*loaded, got, /*guarded=*/true);
      ASSERT_FALSE(err) << *err;
      host::CompareResult f64 = host::compareF64(got[3].data, ref[3]);
      EXPECT_TRUE(f64.pass) << "f64: first bad element " << f64.first_bad << ", max_abs_err " << f64.max_abs_err;
      host::BitexactResult bits = host::compareBitexact(got[3].data, strict[3].data);
      EXPECT_TRUE(bits.pass) << "bitexact: " << bits.mismatches << " elements differ, first " << bits.first_bad;
      for (size_t i = 0; i < 3; ++i) EXPECT_EQ(got[i].data, inputs[i].data) << "input " << i << " changed";
      ++runs;
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[ matrix   ] " << sh.shape << " --mask " << mask << ": " << runs << " compiled runs in " << s << " s\n";
}

std::string caseName(const testing::TestParamInfo<Case>& info) {
  std::string n = info.param.shape;
  for (char& ch : n)
    if (ch == ',') ch = '_';
  return "s" + n + "_" + info.param.mask;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (const char* shape : {"1,8,2,1,2053,80,96",  // the seed's decode D80
                            "1,8,8,1,2048,64,64",  // the seed's MHA D64
                            "1,4,2,32,65,32,32",   // the seed's prefill
                            "1,6,2,1,2053,80,96",  // the seed's decode tail-only
                            "1,4,2,65,131,64,64", "1,8,2,256,1024,64,64", "1,8,2,3,67,80,96", "2,8,1,1,2053,80,96",
                            "1,16,4,1,8193,128,128", "1,4,1,64,128,32,32"})
    for (const char* mask : {"causal", "none"}) v.push_back({shape, mask});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionMatrix, testing::ValuesIn(cases()), caseName);

}  // namespace
}  // namespace kiln::kernels
