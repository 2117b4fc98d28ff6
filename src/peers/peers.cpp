// The `kiln peers` run, shape by shape; see peers.h.
#include "peers/peers.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>

#include "host/data.h"
#include "host/isa.h"
#include "kernels/registry.h"
#include "plan/knobs.h"
#include "tune/tune.h"

namespace kiln::peers {

std::optional<std::string> useIsa(const std::string& isa, PeersOptions& options) {
  const bool avx512 = host::cpuHasAvx512();
  if (isa == "avx512" && !avx512)
    return std::string("--isa avx512: this CPU has no AVX-512") +
           (host::pretendingNoAvx512() ? " (KILN_HOST_WITHOUT_AVX512 is set)" : "");
  if (isa == "avx2" && avx512) {
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::string> args;
    for (size_t p = 0, q; p < all.size(); p = q + 1) {
      q = all.find('\0', p);
      if (q == std::string::npos) q = all.size();
      args.push_back(all.substr(p, q - p));
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    setenv("KILN_HOST_WITHOUT_AVX512", "1", 1);
    setenv("ONEDNN_MAX_CPU_ISA", "AVX2", 1);
    setenv("OPENBLAS_CORETYPE", "Haswell", 1);
    std::cout << std::flush;
    execv("/proc/self/exe", argv.data());
    return std::string("--isa avx2: cannot restart /proc/self/exe: ") + std::strerror(errno);
  }
  options.isa = avx512 && isa != "avx2" ? "avx512" : "avx2";
  // Kiln compiles as a user's kiln does: isa=native (this CPU's features, scheduled as the knob
  // tune_cpu says) unless --isa names the instruction set (then x86-64-v3 or -v4).
  options.impl.isa = isa == "native" ? "native" : options.isa;
  return std::nullopt;
}

std::optional<std::string> checkOptions(const PeersOptions& o, std::vector<ShapeSpec>& shapes) {
  shapes.clear();
  const bool gemm = o.workload == Workload::Gemm;
  std::vector<std::string> texts =
      o.only_shapes ? std::vector<std::string>{} : (gemm ? defaultGemmShapes() : defaultShapes());
  texts.insert(texts.end(), o.shapes.begin(), o.shapes.end());
  if (texts.empty()) return "no shapes: --only-shapes needs at least one --shape";
  for (const std::string& t : texts) {
    ShapeSpec s;
    if (auto e = parseShapeSpec(o.workload, t, s)) return e;
    shapes.push_back(s);
  }
  const std::vector<std::string>& names = implNames(o.workload);
  for (const std::string& name : o.impls)
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      std::string all;
      for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
      const bool other = std::find(implNames().begin(), implNames().end(), name) != implNames().end();
      return other ? "implementation '" + name + "' does not compute " + workloadName(o.workload) + "; for " +
                         workloadName(o.workload) + " there are: " + all
                   : "no implementation named '" + name + "'; there are: " + all;
    }
  if (gemm && o.causal) return "--mask applies to attention only, not to --kernel gemm";
  if (gemm && o.kv_elem != KvElem::F32) return "--kv-dtype applies to attention only, not to --kernel gemm";
  if (!gemm && o.b_elem != KvElem::F32) return "--b-dtype applies to --kernel gemm only (attention: --kv-dtype)";
  if (o.b_elem != KvElem::F32)
    for (const std::string& name : o.impls)
      if (!takesHalfB(name))
        return "implementation '" + name + "' reads f32 B only; with --b-dtype " + kvElemName(o.b_elem) +
               " there are the kiln ones and onednn";
  if (o.kv_elem != KvElem::F32)
    for (const std::string& name : o.impls)
      if (!takesHalfKv(name))
        return "implementation '" + name + "' reads f32 K/V only; with --kv-dtype " + kvElemName(o.kv_elem) +
               " there are the kiln ones, onednn and native";
  if (o.threads < 1) return "--threads must be at least 1";
  const bool set_named = std::find(o.impls.begin(), o.impls.end(), "kiln-set") != o.impls.end();
  if (set_named && o.impl.knob_sets.empty()) return "implementation 'kiln-set' needs --set NAME=VALUE (its knobs)";
  if (!o.impl.knob_sets.empty() && !o.impls.empty() && !set_named)
    return "--set gives kiln-set's knobs: add kiln-set to --impl";
  for (const std::string& a : o.impl.knob_sets) {
    const std::string name = a.substr(0, a.find('='));
    if (name == "threads") return "--set " + a + ": every implementation's threads are kiln peers' --threads";
    plan::Knobs k;
    if (auto e = k.setAssignment(a)) return "--set " + a + ": " + *e;
  }
  return std::nullopt;
}

namespace {

using Clock = std::chrono::steady_clock;

// The library request the Kiln implementations build for a shape (the tuning database's key).
kernels::LibraryRequest libraryRequest(const ShapeSpec& s, bool causal, KvElem kv, KvElem b_elem) {
  if (s.workload == Workload::Gemm) {
    kernels::LibraryRequest r{"gemm", s.text(), {}};
    if (b_elem != KvElem::F32) r.options["b-dtype"] = kvElemName(b_elem);
    return r;
  }
  kernels::LibraryRequest r{"attention", s.text(), {{"mask", causal ? "causal" : "none"}}};
  if (kv != KvElem::F32) r.options["kv-dtype"] = kvElemName(kv);
  return r;
}

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string inputDigest(const Problem& p) {
  return host::sha256Hex(p.q.data(), 4 * p.q.size()) + host::sha256Hex(p.k.data(), 4 * p.k.size()) +
         host::sha256Hex(p.v.data(), 4 * p.v.size()) + host::sha256Hex(p.a.data(), 4 * p.a.size()) +
         host::sha256Hex(p.b.data(), 4 * p.b.size()) + host::sha256Hex(p.k16.data(), 2 * p.k16.size()) +
         host::sha256Hex(p.v16.data(), 2 * p.v16.size()) + host::sha256Hex(p.b16.data(), 2 * p.b16.size());
}

// Compares one call's output with the reference; fills the row's errors, returns pass.
bool check(Impl& impl, const Problem& p, RowResult& row, const char* when) {
  std::vector<float> out;
  if (auto e = impl.compute(out)) {
    row.status = "failed";
    row.error = std::string(when) + ": " + *e;
    return false;
  }
  const double t = impl.tolerance();
  // GEMM: every element is also allowed its K-term rounding bound 2 sqrt(K) u (|A||B|)[i,j] (as
  // `kiln run` allows: docs/kernels.md), plus the rounding of A where a peer rounds it.
  std::vector<double> allowance;
  if (p.workload == Workload::Gemm && !p.abs_product.empty()) {
    const double bound = 2.0 * std::sqrt(double(p.gemm.K)) * 0x1p-24 + impl.roundsA();
    for (double x : p.abs_product) allowance.push_back(bound * x);
  }
  const host::CompareResult c =
      host::compareF64(out, p.reference, t, t, ir::Elem::F32, allowance.empty() ? nullptr : &allowance);
  row.max_abs_err = std::max(row.max_abs_err, c.max_abs_err);
  row.max_rel_err = std::max(row.max_rel_err, c.max_rel_err);
  if (c.pass) return true;
  row.status = "wrong";
  row.error = std::string(when) + ": first element off the FP64 reference beyond " + fmt::format("{:g} + {:g}", t, t) +
              "*|ref| is " + std::to_string(c.first_bad) +
              (c.first_bad >= 0 && c.first_bad < static_cast<int64_t>(out.size())
                   ? " (got " + std::to_string(out[c.first_bad]) + ", reference " +
                         std::to_string(p.reference[c.first_bad]) + ")"
                   : std::string(" (output size ") + std::to_string(out.size()) + ")");
  return false;
}

}  // namespace

std::optional<std::string> runPeers(const PeersOptions& options, PeersResult& result, std::ostream& out,
                                    std::ostream& log) {
  std::vector<ShapeSpec> shapes;
  if (auto e = checkOptions(options, shapes)) return e;
  // Default: every implementation; kiln-1t only when the run has more than one thread,
  // kiln-untuned only when the tuning database has an entry for one of the shapes.
  bool tuned = false;
  for (const ShapeSpec& s : shapes) {
    kernels::LibraryRequest req = libraryRequest(s, options.causal, options.kv_elem, options.b_elem);
    plan::Knobs k;
    k.threads = options.threads;
    tuned = tuned || tune::lookup(tune::tuningKey(req, k)).has_value();
  }
  // With --kv-dtype: kiln-f32 beside kiln, and only the peers that read 16-bit K/V; with
  // --b-dtype only those that read 16-bit B.
  const bool halfKv = options.kv_elem != KvElem::F32, halfB = options.b_elem != KvElem::F32;
  std::vector<std::string> names = options.impls;
  if (names.empty())
    for (const std::string& n : implNames(options.workload))
      if ((n != "kiln-1t" || options.threads > 1) && (n != "kiln-untuned" || tuned || options.runtime_lengths) &&
          (n != "kiln-lengths" || options.runtime_lengths) && (n != "kiln-f32" || halfKv) &&
          (n != "kiln-set" || !options.impl.knob_sets.empty()) &&
          ((n != "kiln-bf16dot" && n != "kiln-bf16pairs") || options.b_elem == KvElem::BF16 ||
           (n == "kiln-bf16pairs" && options.kv_elem == KvElem::BF16)) &&
          (!halfKv || takesHalfKv(n)) && (!halfB || takesHalfB(n)))
        names.push_back(n);
  ImplOptions io = options.impl;
  io.threads = options.threads;
  io.seed = options.seed;

  result = PeersResult{};
  result.options = options;
  result.machine = machineInfo();
  log << "peers: " << (options.isa == "avx2" ? "AVX2" : "AVX-512") << " code; measuring peak FMA throughput on "
      << options.threads << " thread(s)\n"
      << std::flush;
  result.peak = measurePeak(options.threads);

  for (const ShapeSpec& shape : shapes) {
    ShapeResult sr;
    sr.spec = shape;
    const std::string label = shape.text();
    Problem p;
    if (auto e = makeProblem(shape, options.causal, options.seed, p, options.kv_elem, options.b_elem))
      return label + ": " + *e;
    auto t0 = Clock::now();
    computeReference(p);
    sr.reference_s = since(t0);
    sr.flops = p.flops();
    sr.kv_bytes = p.kvBytes();
    sr.bandwidth_gbs = measureReadBandwidth(static_cast<int64_t>(sr.kv_bytes), options.threads);
    sr.compute_s = sr.flops / (result.peak.gflops() * 1e9);
    sr.memory_s = sr.kv_bytes / (sr.bandwidth_gbs * 1e9);
    sr.roofline_s = std::max(sr.compute_s, sr.memory_s);
    const std::string digest = inputDigest(p);

    std::vector<std::unique_ptr<Impl>> impls;
    std::vector<Impl*> timed;
    std::vector<size_t> timed_rows;
    int baseline = -1;
    for (const std::string& name : names) {
      log << "peers: " << label << ": preparing " << name << '\n' << std::flush;
      RowResult row;
      row.impl = name;
      row.status = "ok";
      std::unique_ptr<Impl> impl = makeImpl(name, io);
      if (auto e = impl->prepare(p)) {
        row.tolerance = impl->tolerance();
        row.status = impl->unavailable() ? "unavailable" : "failed";
        row.error = "prepare: " + *e;
      } else if (row.tolerance = impl->tolerance(); check(*impl, p, row, "before timing")) {
        if (name == "kiln") baseline = static_cast<int>(timed.size());
        timed.push_back(impl.get());
        timed_rows.push_back(sr.rows.size());
      }
      row.detail = impl->detail();
      sr.rows.push_back(row);
      impls.push_back(std::move(impl));
    }

    std::vector<Measured> measured;
    ProtocolOptions protocol = options.protocol;
    if (options.threads > 1 && protocol.gap_s == 0) protocol.gap_s = 0.15;
    sr.protocol = runProtocol(timed, baseline, protocol, measured, [&](const std::string& s) {
      log << "peers: " << label << ": " << s << '\n' << std::flush;
    });
    for (size_t k = 0; k < timed.size(); ++k) {
      RowResult& row = sr.rows[timed_rows[k]];
      row.measured = measured[k];
      if (!row.measured.timed) {
        row.status = "failed";
        row.error = "timing: " + row.measured.error;
      } else if (check(*timed[k], p, row, "after timing")) {
        row.pct_roofline = 100.0 * sr.roofline_s / row.measured.median_s;
      } else {
        row.measured.timed = false;
      }
    }
    impls.clear();  // ends child processes
    sr.input_check = inputDigest(p) == digest ? "unchanged" : "CHANGED during the run";
    result.shapes.push_back(sr);
    printShape(result, result.shapes.back(), out);
    out << std::flush;
  }
  result.loadavg_end = loadAverage();
  return std::nullopt;
}

}  // namespace kiln::peers
