// `kiln peers`: the same attention workloads through Kiln and its peers, interleaved in one
// process, against the machine's measured limits. For each shape: inputs and the FP64
// reference, read bandwidth at the K/V working set, every peer prepared and checked against
// the reference (a wrong one is reported, not timed), the protocol (protocol.h), a re-check
// of every output and of the inputs after timing, and one table. See docs/peers.md.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "peers/impl.h"
#include "peers/machine.h"
#include "peers/problem.h"
#include "peers/protocol.h"

namespace kiln::peers {

struct PeersOptions {
  Workload workload = Workload::Attention;  // --kernel attention|gemm
  std::vector<std::string> shapes;          // added to the defaults (or replacing them: only_shapes)
  bool only_shapes = false;
  bool causal = false;
  int threads = 1;
  std::vector<std::string> impls;  // empty: all of implNames()
  // --runtime-lengths: add kiln-lengths (attention over a dense KV cache of capacity K with
  // every length K at launch) beside kiln and kiln-untuned, paired in the same rounds.
  bool runtime_lengths = false;
  // --kv-dtype: K and V stored as f16 or bf16 (values of that type); adds kiln-f32 (the same
  // values as f32) and leaves out the peers that read f32 K/V only.
  KvElem kv_elem = KvElem::F32;
  // --b-dtype (gemm): B, the weights, stored as f16 or bf16 (values of that type), A and C f32;
  // leaves out the peers that read f32 B only.
  KvElem b_elem = KvElem::F32;
  ProtocolOptions protocol;
  std::string protocol_name = "default";  // or "quick"
  ImplOptions impl;                       // threads and seed are copied in from above
  uint64_t seed = 0;
  std::string command;         // as typed, for the report
  std::string isa = "native";  // what the code of every implementation is (useIsa): avx2 | avx512
};

struct RowResult {
  std::string impl;
  std::string detail;
  // ok | wrong | failed | unavailable (the library has no implementation of the problem here,
  // e.g. oneDNN 2.6's bf16 matmul without AVX-512; not a failure of the run)
  std::string status;
  std::string error;  // for wrong / failed: what and where
  double max_abs_err = 0.0, max_rel_err = 0.0;
  double tolerance = 5e-5;  // the check's t: |got - ref| <= t + t*|ref| (Impl::tolerance)
  Measured measured;
  double pct_roofline = 0.0;  // roofline time / median time * 100, when timed
};

struct ShapeResult {
  ShapeSpec spec;
  double flops = 0.0, kv_bytes = 0.0;
  double bandwidth_gbs = 0.0;
  double compute_s = 0.0, memory_s = 0.0, roofline_s = 0.0;
  double reference_s = 0.0;
  ProtocolRun protocol;
  std::string input_check;  // "unchanged" or what changed
  std::vector<RowResult> rows;
};

struct PeersResult {
  MachineInfo machine;
  std::string loadavg_end;
  Peak peak;
  PeersOptions options;
  std::vector<ShapeResult> shapes;
};

// --isa: what every implementation runs. native: this CPU's ISA (avx2 without AVX-512). avx2
// on a CPU with AVX-512: restarts this process (execv of /proc/self/exe, the same arguments)
// with KILN_HOST_WITHOUT_AVX512=1 (Kiln, the hand-written and the machine-limit code),
// ONEDNN_MAX_CPU_ISA=AVX2 and OPENBLAS_CORETYPE=Haswell, which the libraries read as they load;
// returns only on failure. Sets options.isa (avx2 | avx512) and Kiln's isa knob.
std::optional<std::string> useIsa(const std::string& isa, PeersOptions& options);

// Validates the options (shapes, implementation names) without running anything.
std::optional<std::string> checkOptions(const PeersOptions& options, std::vector<ShapeSpec>& shapes);

// Runs everything; prints each shape's table to `out` as it completes and progress lines to
// `log`. Error: the options are invalid (nothing ran).
std::optional<std::string> runPeers(const PeersOptions& options, PeersResult& result, std::ostream& out,
                                    std::ostream& log);

// Outputs (report.cpp).
void printShape(const PeersResult& run, const ShapeResult& shape, std::ostream& out);
nlohmann::ordered_json toJson(const PeersResult& run);
std::string toSvg(const PeersResult& run);
// The README's "How fast is it?" section; `chart` (optional) is the SVG's path as the page links it.
std::string toMarkdown(const PeersResult& run, const std::string& chart = "");

}  // namespace kiln::peers
