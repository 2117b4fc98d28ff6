// What `kiln peers` prints and writes: one table per shape, the JSON record, the SVG chart of
// % of roofline, and the README section.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "peers/peers.h"

namespace kiln::peers {
namespace {

std::string us(double s) {
  return fmt::format("{:.1f}", s * 1e6);
}

// "K/V bf16, " with 16-bit K/V, else nothing.
std::string kvNote(const PeersResult& run) {
  return run.options.kv_elem == KvElem::F32 ? "" : fmt::format("K/V {}, ", kvElemName(run.options.kv_elem));
}

std::string header(const PeersResult& run, const ShapeResult& s) {
  if (s.spec.workload == Workload::Gemm)
    return fmt::format("gemm {} (M,N,K), {}{} thread(s)", s.spec.text(),
                       run.options.b_elem == KvElem::F32 ? "" : fmt::format("B {}, ", kvElemName(run.options.b_elem)),
                       run.options.threads);
  return fmt::format("{} (B,Hq,Hkv,Q,K,D,Dv), mask {}, {}{} thread(s)", s.spec.text(),
                     run.options.causal ? "causal" : "none", kvNote(run), run.options.threads);
}

const char* bytesName(const ShapeResult& s) {
  return s.spec.workload == Workload::Gemm ? "A+B" : "K/V";
}

std::string rooflineLine(const PeersResult& run, const ShapeResult& s) {
  return fmt::format(
      "{:.2f} MFLOP, {} {:.2f} MB; roofline {} µs = max(compute {} µs at {:.1f} GFLOP/s, {} read {} µs at {:.1f} "
      "GB/s)",
      s.flops / 1e6, bytesName(s), s.kv_bytes / 1e6, us(s.roofline_s), us(s.compute_s), run.peak.gflops(), bytesName(s),
      us(s.memory_s), s.bandwidth_gbs);
}

std::string ratioText(const Measured& m) {
  return m.has_ratio ? fmt::format("{:.3f} ({:.3f}–{:.3f})", m.ratio, m.ratio_min, m.ratio_max) : "—";
}

std::string statusText(const RowResult& r) {
  if (r.status == "wrong") return "WRONG: " + r.error;
  if (r.status == "unavailable") return "not available: " + r.error;
  return "FAILED: " + r.error;
}

}  // namespace

void printShape(const PeersResult& run, const ShapeResult& s, std::ostream& out) {
  out << "\n== " << header(run, s) << '\n';
  out << "   " << rooflineLine(run, s) << '\n';
  out << fmt::format(
      "   protocol: {} rounds (estimate {:.1f} s, took {:.1f} s); FP64 reference {:.2f} s; inputs {}{}\n",
      s.protocol.visits, s.protocol.estimated_s, s.protocol.elapsed_s, s.reference_s, s.input_check,
      run.options.protocol.cold_caches ? fmt::format("; caches cold ({} MiB read before every call, {:.1f} ms)",
                                                     s.protocol.evict_bytes >> 20, s.protocol.evict_s * 1e3)
                                       : std::string());
  out << fmt::format("   {:<18} {:>11} {:>23} {:>26} {:>10} {:>9}\n", "impl", "median µs", "min–max µs",
                     "vs kiln, paired (min–max)", "% roofline", "samples");
  for (const RowResult& r : s.rows) {
    const Measured& m = r.measured;
    if (r.status != "ok" || !m.timed) {
      out << fmt::format("   {:<18} {}\n", r.impl, statusText(r));
      continue;
    }
    out << fmt::format("   {:<18} {:>11} {:>23} {:>26} {:>9.1f}% {:>9}\n", r.impl, us(m.median_s),
                       us(m.min_s) + "–" + us(m.max_s), ratioText(m), r.pct_roofline,
                       fmt::format("{}x{}", m.samples, m.reps));
  }
  out << "   ratio = time / kiln's time in the same round (below 1: faster than kiln); samples = per visit x calls "
         "per sample\n";
}

nlohmann::ordered_json toJson(const PeersResult& run) {
  using json = nlohmann::ordered_json;
  const ProtocolOptions& p = run.options.protocol;
  json j;
  j["tool"] = "kiln peers";
  j["date"] = run.machine.date;
  j["command"] = run.options.command;
  j["kernel"] = workloadName(run.options.workload);
  j["machine"] = {{"cpu", run.machine.cpu_model},
                  {"logical_cpus", run.machine.logical_cpus},
                  {"loadavg_start", run.machine.loadavg},
                  {"loadavg_end", run.loadavg_end},
                  {"peak_gflops", run.peak.gflops()},
                  {"peak_avx512_gflops", run.peak.avx512_gflops},
                  {"peak_avx2_gflops", run.peak.avx2_gflops}};
  j["isa"] = run.options.isa;
  nlohmann::ordered_json env = nlohmann::ordered_json::object();
  for (const char* v : {"KILN_HOST_WITHOUT_AVX512", "ONEDNN_MAX_CPU_ISA", "OPENBLAS_CORETYPE"})
    if (const char* x = std::getenv(v)) env[v] = x;
  j["isa_environment"] = env;
  j["threads"] = run.options.threads;
  if (!run.options.impl.knob_sets.empty()) j["knob_sets"] = run.options.impl.knob_sets;
  j["mask"] = run.options.causal ? "causal" : "none";
  j["kv_dtype"] = kvElemName(run.options.kv_elem);
  if (run.options.workload == Workload::Gemm) j["b_dtype"] = kvElemName(run.options.b_elem);
  j["seed"] = run.options.seed;
  j["protocol"] = {
      {"name", run.options.protocol_name},
      {"warmup_ms", p.warmup_s * 1e3},
      {"sample_target_ms", p.target_s * 1e3},
      {"samples", p.samples},
      {"visits", p.visits},
      {"min_samples", p.min_samples},
      {"min_visits", p.min_visits},
      {"budget_s", p.budget_s},
      {"gap_ms", (run.options.threads > 1 && p.gap_s == 0 ? 0.15 : p.gap_s) * 1e3},
      {"caches", p.cold_caches ? "cold: caches emptied before every timed call (untimed), one call a sample"
                               : "warm: calls follow each other"},
      {"time", "median of visit medians; min/max over all samples"},
      {"ratio", "median of per-round ratios of visit medians to kiln's"},
      {"tolerance", "t + t*|ref| against FP64, t = 5e-5 unless an entry's tolerance says otherwise"}};
  json shapes = json::array(), entries = json::array();
  auto num = [](bool ok, double v) { return ok && std::isfinite(v) ? json(v) : json(nullptr); };
  for (const ShapeResult& s : run.shapes) {
    const std::string label = s.spec.text();
    shapes.push_back({{"shape", label},
                      {"flops", s.flops},
                      {"kv_bytes", s.kv_bytes},
                      {"bandwidth_gbs", s.bandwidth_gbs},
                      {"compute_us", s.compute_s * 1e6},
                      {"memory_us", s.memory_s * 1e6},
                      {"roofline_us", s.roofline_s * 1e6},
                      {"rounds", s.protocol.visits},
                      {"evict_ms", s.protocol.evict_s * 1e3},
                      {"reference_s", s.reference_s},
                      {"inputs", s.input_check}});
    for (const RowResult& r : s.rows) {
      const Measured& m = r.measured;
      const bool t = r.status == "ok" && m.timed;
      entries.push_back({{"shape", label},
                         {"impl", r.impl},
                         {"threads", r.impl == "kiln-1t" ? 1 : run.options.threads},
                         {"median_us", num(t, m.median_s * 1e6)},
                         {"min_us", num(t, m.min_s * 1e6)},
                         {"max_us", num(t, m.max_s * 1e6)},
                         {"ratio_vs_kiln", num(t && m.has_ratio, m.ratio)},
                         {"ratio_min", num(t && m.has_ratio, m.ratio_min)},
                         {"ratio_max", num(t && m.has_ratio, m.ratio_max)},
                         {"pct_roofline", num(t, r.pct_roofline)},
                         {"correct", r.status == "ok"},
                         {"status", r.status},
                         {"error", r.error.empty() ? json(nullptr) : json(r.error)},
                         {"max_abs_err", r.max_abs_err},
                         {"max_rel_err", r.max_rel_err},
                         {"tolerance", r.tolerance},
                         {"samples", t ? m.samples : 0},
                         {"reps", t ? m.reps : 0},
                         {"detail", r.detail}});
    }
  }
  j["shapes"] = shapes;
  j["entries"] = entries;
  return j;
}

std::string toSvg(const PeersResult& run) {
  static const char* colors[] = {"#d62728", "#ff9896", "#1f77b4", "#2ca02c", "#98df8a", "#9467bd", "#8c564b"};
  auto color = [&](const std::string& impl) {
    const auto& names = implNames();
    const size_t i = std::find(names.begin(), names.end(), impl) - names.begin();
    return colors[i % 7];
  };
  auto esc = [](std::string s) {
    std::string o;
    for (char c : s) o += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
    return o;
  };
  double top = 100.0;
  for (const ShapeResult& s : run.shapes)
    for (const RowResult& r : s.rows)
      if (r.status == "ok" && r.measured.timed) top = std::max(top, r.pct_roofline);
  const int left = 150, width = 560, bar = 14, gap = 3, title = 34;
  int height = 60;
  for (const ShapeResult& s : run.shapes) height += title + static_cast<int>(s.rows.size()) * (bar + gap) + 10;
  std::ostringstream o;
  o << fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"11\">\n",
      left + width + 80, height);
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << fmt::format(
      "<text x=\"10\" y=\"20\" font-size=\"14\" font-weight=\"bold\">kiln peers: % of roofline "
      "(higher is better), {} thread(s), mask {}, {} code</text>\n",
      run.options.threads, run.options.causal ? "causal" : "none", run.options.isa == "avx2" ? "AVX2" : "AVX-512");
  o << fmt::format("<text x=\"10\" y=\"36\" fill=\"#555\">{} — {}</text>\n", esc(run.machine.cpu_model),
                   run.machine.date);
  int y = 50;
  for (const ShapeResult& s : run.shapes) {
    o << fmt::format("<text x=\"10\" y=\"{}\" font-weight=\"bold\">{}  (roofline {} µs)</text>\n", y + 18,
                     s.spec.text(), us(s.roofline_s));
    y += title;
    for (double g : {25.0, 50.0, 75.0, 100.0})
      if (g <= top) {
        const double x = left + width * g / top;
        o << fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#ddd\"/>\n", x, y - 4, x,
                         y + static_cast<int>(s.rows.size()) * (bar + gap));
        o << fmt::format(
            "<text x=\"{:.1f}\" y=\"{}\" fill=\"#999\" text-anchor=\"middle\" font-size=\"9\">{:.0f}%"
            "</text>\n",
            x, y - 6, g);
      }
    for (const RowResult& r : s.rows) {
      o << fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", left - 6, y + bar - 3, r.impl);
      if (r.status == "ok" && r.measured.timed) {
        const double w = std::max(1.0, width * r.pct_roofline / top);
        o << fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>\n", left, y, w, bar,
                         color(r.impl));
        o << fmt::format("<text x=\"{:.1f}\" y=\"{}\">{:.1f}% ({} µs)</text>\n", left + w + 4, y + bar - 3,
                         r.pct_roofline, us(r.measured.median_s));
      } else {
        o << fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#c00\">{}</text>\n", left + 4, y + bar - 3,
                         r.status == "wrong"         ? "wrong (not timed)"
                         : r.status == "unavailable" ? "not available"
                                                     : "failed");
      }
      y += bar + gap;
    }
    y += 10;
  }
  o << "</svg>\n";
  return o.str();
}

std::string toMarkdown(const PeersResult& run, const std::string& chart) {
  std::ostringstream o;
  o << "## How fast is it?\n\n";
  o << "Generated by `kiln peers` (see [docs/peers.md](docs/peers.md)) on " << run.machine.date << ", "
    << run.machine.cpu_model << " (" << run.machine.logical_cpus << " logical CPUs; load average "
    << run.machine.loadavg << " at the start, " << run.loadavg_end << " at the end), with:\n\n";
  o << "```sh\n" << run.options.command << "\n```\n\n";
  o << fmt::format(
      "{} thread(s), {}, mask {}, {} code. Peak FMA throughput measured at run time: {:.1f} GFLOP/s (AVX-512 "
      "{:.1f}, AVX2 "
      "{:.1f}). Roofline per shape = max(FLOPs / peak, K/V bytes / read bandwidth measured at that working-set "
      "size); % of roofline = roofline time / measured time. Ratio = time / Kiln default's time, paired per round "
      "(below 1: faster than Kiln). Every implementation was checked against an FP64 reference before and after "
      "timing.\n\n",
      run.options.threads,
      run.options.kv_elem == KvElem::F32
          ? std::string("FP32")
          : fmt::format("FP32 arithmetic, K and V stored as {} (peers that round other values to 16 bits are "
                        "checked at their own tolerance, shown in their detail)",
                        kvElemName(run.options.kv_elem)),
      run.options.causal ? "causal" : "none", run.options.isa == "avx2" ? "AVX2" : "AVX-512", run.peak.gflops(),
      run.peak.avx512_gflops, run.peak.avx2_gflops);
  if (!chart.empty()) o << "![% of roofline per implementation and shape](" << chart << ")\n\n";
  for (const ShapeResult& s : run.shapes) {
    o << "**" << s.spec.text() << "** (" << s.spec.fields() << ") — " << rooflineLine(run, s) << "\n\n";
    o << "| implementation | median µs | min–max µs | vs Kiln (paired, min–max) | % roofline |\n";
    o << "|---|---:|---:|---:|---:|\n";
    for (const RowResult& r : s.rows) {
      const Measured& m = r.measured;
      if (r.status != "ok" || !m.timed) {
        o << "| " << r.impl << " | "
          << (r.status == "wrong"         ? "wrong"
              : r.status == "unavailable" ? "not available"
                                          : "failed")
          << " | | | |\n";
        continue;
      }
      o << fmt::format("| {} | {} | {}–{} | {} | {:.1f}% |\n", r.impl, us(m.median_s), us(m.min_s), us(m.max_s),
                       ratioText(m), r.pct_roofline);
    }
    o << "\n";
  }
  if (!run.shapes.empty()) {
    o << "Implementations (as the last shape ran them):\n\n";
    for (const RowResult& r : run.shapes.back().rows) o << "- `" << r.impl << "`: " << r.detail << "\n";
  }
  return o.str();
}

}  // namespace kiln::peers
