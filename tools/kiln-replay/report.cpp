// replay.json, gpu-acceptance.json and the table on stdout.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "json.h"
#include "replay.h"

namespace kiln::replay {
namespace {

constexpr const char* kTimingNote =
    "kernel time from CUDA events around each launch sequence; host wall time (steady_clock, first launch to "
    "after the event synchronize) separately; views re-uploaded and workspaces zeroed once per visit, not "
    "between timed sequences (not needed for timing)";
constexpr const char* kAcceptanceNote =
    "kernel time from CUDA events; host wall time separately; refused sets are kept, never mixed with CPU results";
constexpr size_t kMaxLogChars = 8192;

float bitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// IEEE binary16 bits as a float (exact).
float halfToFloat(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return bitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  float magnitude = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -24)
                                  : std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
  return sign ? -magnitude : magnitude;
}

// An output element's bits as a float, by the view's storage.
float elementValue(uint32_t bits, Storage storage) {
  switch (storage) {
    case Storage::kF16: return halfToFloat(bits & 0xffffu);
    case Storage::kBF16: return bitsToFloat((bits & 0xffffu) << 16);
    case Storage::k32: break;
  }
  return bitsToFloat(bits);
}

// An output element's bits in hex: 4 digits for 16-bit storage, else 8.
std::string elementHex(uint32_t bits, Storage storage) {
  return storage == Storage::k32 ? hex32(bits) : hex32(bits).substr(4);
}

// A float as a JSON number, or "nan" / "inf" / "-inf" as a string.
void floatValue(JsonWriter& j, float f) {
  if (std::isnan(f)) {
    j.string("nan");
  } else if (std::isinf(f)) {
    j.string(f > 0 ? "inf" : "-inf");
  } else {
    j.number(static_cast<double>(f));
  }
}

std::string fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits, value);
  return buffer;
}

void writeHealth(JsonWriter& j, const Health& h) {
  j.beginObject().field("pass", h.pass).key("steps").beginArray();
  for (const HealthStep& s : h.steps) {
    j.beginObject().field("name", s.name).field("pass", s.pass).field("us", s.us).field("limit_us", s.limit_us);
    j.key("samples_us").beginArray();
    for (double v : s.samples_us) j.number(v);
    j.endArray().field("message", s.message).endObject();
  }
  j.endArray().endObject();
}

void writeTiming(JsonWriter& j, const CaseResult& r) {
  const CaseTiming& t = *r.timing;
  j.beginObject().field("accepted", t.accepted).field("reps", t.reps).key("visits").beginArray();
  for (const VisitStats& v : t.visits) {
    j.beginObject()
        .field("kernel_ms_median", v.kernel_ms_median)
        .field("kernel_ms_min", v.kernel_ms_min)
        .field("kernel_ms_max", v.kernel_ms_max)
        .field("wall_ms_median", v.wall_ms_median)
        .endObject();
  }
  j.endArray();
  j.field("kernel_us_median", t.kernel_us_median)
      .field("kernel_us_min", t.kernel_us_min)
      .field("kernel_us_max", t.kernel_us_max)
      .field("wall_us_median", t.wall_us_median)
      .field("hysteresis_ratio", t.hysteresis_ratio)
      .field("flagged", t.flagged);
  j.key("phase_us_median").beginArray();
  for (double us : t.phase_us_median) j.number(us);
  j.endArray();
  j.key("work").beginObject().field("flops", r.flops).field("bytes", r.bytes).endObject();
  const double seconds = 1e-6 * t.kernel_us_median;
  j.key("gflops").numberOrNull(r.flops > 0 && seconds > 0, r.flops / seconds / 1e9);
  j.key("gbytes_per_s").numberOrNull(r.bytes > 0 && seconds > 0, r.bytes / seconds / 1e9);
  j.field("note", kTimingNote).endObject();
}

void writeCase(JsonWriter& j, const CaseResult& r) {
  j.beginObject().field("case", r.name).field("status", r.status).field("message", r.message);
  j.field("source", r.source);
  j.key("phases").beginArray();
  for (const PhaseResult& p : r.phases) {
    j.beginObject()
        .field("entry", p.entry)
        .field("programs", p.programs)
        .field("threads_per_block", p.threads_per_block)
        .field("grid", p.grid)
        .field("dynamic_shared_bytes", p.dynamic_shared_bytes);
    if (p.have_attributes) {
      j.field("registers", p.attributes.registers)
          .field("local_bytes", p.attributes.local_bytes)
          .field("shared_bytes", p.attributes.shared_bytes)
          .field("max_threads_per_block", p.attributes.max_threads_per_block)
          .field("const_bytes", p.attributes.const_bytes)
          .field("ptx_version", p.attributes.ptx_version)
          .field("binary_version", p.attributes.binary_version);
    } else {
      for (const char* k : {"registers", "local_bytes", "shared_bytes", "max_threads_per_block"}) j.key(k).null();
    }
    j.endObject();
  }
  j.endArray();
  j.key("outputs").beginArray();
  for (const OutputResult& o : r.outputs) {
    j.beginObject().field("name", o.name).field("elements", o.elements);
    j.field("storage", storageName(o.storage)).field("digest_only", o.digest_only);
    j.key("mismatches").unsignedOrNull(o.downloaded, o.mismatches);
    j.key("first_mismatch");
    if (o.first_mismatch >= 0) {
      j.beginObject()
          .field("index", o.first_mismatch)
          .field("got_bits", elementHex(o.got_bits, o.storage))
          .field("expected_bits", elementHex(o.expected_bits, o.storage));
      j.key("got");
      floatValue(j, elementValue(o.got_bits, o.storage));
      j.key("expected");
      floatValue(j, elementValue(o.expected_bits, o.storage));
      j.endObject();
    } else {
      j.null();
    }
    j.key("gpu_digest").stringOrNull(o.downloaded, hex64(o.gpu_digest));
    j.field("expected_digest", hex64(o.expected_digest));
    j.field("digest_match", o.downloaded && o.gpu_digest == o.expected_digest);
    j.field("message", o.message);  // a digest-only output's mismatch, else empty
    j.endObject();
  }
  j.endArray();
  j.key("jit_ms").numberOrNull(r.jit_ms >= 0, r.jit_ms);
  j.field("jit_info_log", r.jit_log.size() > kMaxLogChars ? r.jit_log.substr(0, kMaxLogChars) + "..." : r.jit_log);
  j.key("timing");
  if (r.timing) {
    writeTiming(j, r);
  } else {
    j.null();
  }
  if (!r.timing_error.empty()) j.field("timing_error", r.timing_error);
  j.endObject();
}

std::string replayJson(const Report& report) {
  JsonWriter j;
  j.beginObject().field("format", "kiln-gpu-replay 1");
  const gpu::DeviceInfo& d = report.device;
  j.key("device")
      .beginObject()
      .field("name", d.name)
      .field("compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor))
      .field("multiprocessors", d.multiprocessors)
      .field("driver_version", d.driver_version)
      .field("driver_version_text",
             std::to_string(d.driver_version / 1000) + "." + std::to_string(d.driver_version % 1000 / 10))
      .endObject();
  j.field("archive", report.archive);
  j.key("cases").beginArray();
  for (const CaseResult& r : report.cases) writeCase(j, r);
  j.endArray();
  int pass = 0, mismatch = 0, error = 0, digest = 0, not_run = 0;
  for (const CaseResult& r : report.cases) {
    pass += r.status == "pass";
    mismatch += r.status == "mismatch";
    error += r.status == "error";
    digest += r.status == "input_digest_mismatch";
    not_run += r.status == "not_run";
  }
  j.key("summary")
      .beginObject()
      .field("cases", static_cast<int>(report.cases.size()))
      .field("pass", pass)
      .field("mismatch", mismatch)
      .field("error", error)
      .field("input_digest_mismatch", digest)
      .field("not_run", not_run)
      .field("context_lost", report.context_lost)
      .field("timing_accepted", report.timing.accepted)
      .endObject();
  j.endObject();
  return j.str();
}

std::string acceptanceJson(const Report& report) {
  const TimingSet& t = report.timing;
  JsonWriter j;
  j.beginObject().field("format", "kiln-gpu-acceptance 1").key("sets").beginArray();
  j.beginObject().field("name", "kiln").field("accepted", t.accepted);
  j.key("reasons").beginArray();
  for (const std::string& r : t.reasons) j.string(r);
  j.endArray();
  if (t.ran) {
    writeHealth(j.key("health_before"), t.before);
    writeHealth(j.key("health_after"), t.after);
  } else {
    j.key("health_before").null().key("health_after").null();
  }
  j.field("hysteresis_limit", t.hysteresis_limit);
  j.key("visit_medians_us").beginObject();
  for (const CaseResult& r : report.cases) {
    if (!r.timing) continue;
    j.key(r.name).beginArray();
    for (const VisitStats& v : r.timing->visits) j.number(1e3 * v.kernel_ms_median);
    j.endArray();
  }
  j.endObject();
  j.key("cases").beginArray();
  for (const std::string& c : t.cases) j.string(c);
  j.endArray();
  j.field("device", report.device.name);
  j.field("note", kAcceptanceNote).endObject();
  j.endArray().endObject();
  return j.str();
}

bool writeText(const std::string& path, const std::string& text, std::string& error) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    error = "cannot write " + path;
    return false;
  }
  return true;
}

}  // namespace

bool writeReports(const Report& report, const Options& options, std::string& error) {
  std::error_code ec;
  std::filesystem::create_directories(options.out, ec);
  if (ec) {
    error = "cannot create " + options.out + ": " + ec.message();
    return false;
  }
  return writeText(options.out + "/replay.json", replayJson(report), error) &&
         writeText(options.out + "/gpu-acceptance.json", acceptanceJson(report), error);
}

void printTable(const Report& report) {
  size_t width = 4;
  for (const CaseResult& r : report.cases) width = std::max(width, r.name.size());
  std::printf("\n%-*s  %-10s  %-28s  %10s  %-9s  %-11s  %s\n", static_cast<int>(width), "case", "status",
              "kernel us median [min-max]", "wall us", "regs", "local bytes", "phases us");
  for (const CaseResult& r : report.cases) {
    std::string kernel = "-", wall = "-", regs, local, phases;
    if (r.timing) {
      kernel = fixed(r.timing->kernel_us_median, 1) + " [" + fixed(r.timing->kernel_us_min, 1) + "-" +
               fixed(r.timing->kernel_us_max, 1) + "]" + (r.timing->flagged ? " !" : "");
      wall = fixed(r.timing->wall_us_median, 1);
      for (double us : r.timing->phase_us_median) phases += (phases.empty() ? "" : "/") + fixed(us, 1);
    }
    for (const PhaseResult& p : r.phases) {
      regs += (regs.empty() ? "" : "/") + (p.have_attributes ? std::to_string(p.attributes.registers) : "?");
      local += (local.empty() ? "" : "/") + (p.have_attributes ? std::to_string(p.attributes.local_bytes) : "?");
    }
    std::printf("%-*s  %-10s  %-28s  %10s  %-9s  %-11s  %s\n", static_cast<int>(width), r.name.c_str(),
                r.status.c_str(), kernel.c_str(), wall.c_str(), regs.c_str(), local.c_str(), phases.c_str());
  }

  // Details of what went wrong.
  for (const CaseResult& r : report.cases) {
    if (r.status == "pass") continue;
    std::printf("\n%s: %s: %s\n", r.name.c_str(), r.status.c_str(), r.message.c_str());
    for (const OutputResult& o : r.outputs) {
      if (!o.message.empty()) std::printf("  output %s: %s\n", o.name.c_str(), o.message.c_str());
      if (o.first_mismatch < 0) continue;
      const bool halves = o.storage != Storage::k32;
      std::printf("  output %s: %llu of %llu %s elements differ; first at %lld: got %s (%.9g), expected %s (%.9g)\n",
                  o.name.c_str(), static_cast<unsigned long long>(o.mismatches),
                  static_cast<unsigned long long>(halves ? 2 * o.elements : o.elements),
                  halves ? storageName(o.storage) : "32-bit", static_cast<long long>(o.first_mismatch),
                  elementHex(o.got_bits, o.storage).c_str(), static_cast<double>(elementValue(o.got_bits, o.storage)),
                  elementHex(o.expected_bits, o.storage).c_str(),
                  static_cast<double>(elementValue(o.expected_bits, o.storage)));
    }
  }

  const TimingSet& t = report.timing;
  if (t.accepted) {
    std::printf("\ntiming set ACCEPTED (health before and after passed, no case over the hysteresis limit %.2f)\n",
                t.hysteresis_limit);
  } else {
    std::printf("\n!!!!!!!! TIMING SET REFUSED (its numbers are kept in the reports, marked refused) !!!!!!!!\n");
    for (const std::string& r : t.reasons) std::printf("  - %s\n", r.c_str());
  }
  std::fflush(stdout);
}

}  // namespace kiln::replay
