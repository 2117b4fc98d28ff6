// The GPU archive: parsing, validation, inputs (docs/gpu/archive-format.md).
#include "archive.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace kiln::replay {
namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;
constexpr uint64_t kMaxElements = uint64_t{1} << 36;  // 256 GiB of floats: a sanity bound
constexpr uint64_t kMaxThreadsPerBlock = 1024;
constexpr uint64_t kMaxDynamicSharedBytes = 227 * 1024;  // an H100/H200 block's most
constexpr uint64_t kMaxGrid = 0x7fffffffull;

// ---- the generator (archive-format.md, "Inputs") ----

uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The bits of `elements` draws from the stream of parameter `index`.
std::vector<uint32_t> drawView(uint64_t seed, int index, uint64_t elements) {
  std::vector<uint32_t> bits(elements);
  uint64_t state = seed ^ mix(static_cast<uint64_t>(index) + 1);
  for (uint64_t e = 0; e < elements; ++e) {
    state += 0x9E3779B97F4A7C15ull;
    const int64_t u = static_cast<int64_t>(mix(state) >> 40);
    const float value = static_cast<float>(u - (int64_t{1} << 23)) * 0x1p-23f;  // exact
    std::memcpy(&bits[e], &value, sizeof(value));
  }
  return bits;
}

// FNV-1a 64 of words stored little-endian.
uint64_t fnvWords(const std::vector<uint32_t>& words) {
  uint64_t h = kFnvOffset;
  for (uint32_t w : words) {
    for (int b = 0; b < 4; ++b) {
      h ^= (w >> (8 * b)) & 0xffu;
      h *= kFnvPrime;
    }
  }
  return h;
}

// ---- tokens ----

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::vector<std::string> splitSpaces(const std::string& line) {
  std::vector<std::string> tokens;
  size_t start = 0;
  while (true) {
    const size_t end = line.find(' ', start);
    tokens.push_back(line.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return tokens;
}

bool parseU64(const std::string& s, uint64_t& out) {
  if (s.empty() || s.size() > 20) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  out = v;
  return true;
}

bool parseI64(const std::string& s, int64_t& out) {
  const bool negative = !s.empty() && s[0] == '-';
  uint64_t magnitude = 0;
  if (!parseU64(negative ? s.substr(1) : s, magnitude)) return false;
  if (negative) {
    if (magnitude > uint64_t{1} << 63) return false;
    out = magnitude == uint64_t{1} << 63 ? INT64_MIN : -static_cast<int64_t>(magnitude);
  } else {
    if (magnitude > static_cast<uint64_t>(INT64_MAX)) return false;
    out = static_cast<int64_t>(magnitude);
  }
  return true;
}

// Exactly `digits` lowercase hex digits.
bool parseHex(const std::string& s, size_t digits, uint64_t& out) {
  if (s.size() != digits) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    if (d < 0) return false;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  out = v;
  return true;
}

bool parseDouble(const std::string& s, double& out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v)) return false;
  out = v;
  return true;
}

// A name usable as a file name: no '/', not "." or "..", printable, non-empty.
bool validName(const std::string& s) {
  if (s.empty() || s == "." || s == "..") return false;
  for (char c : s) {
    if (c == '/' || static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return false;
  }
  return true;
}

// The .entry names of a PTX module.
std::set<std::string> ptxEntries(const std::string& ptx) {
  std::set<std::string> entries;
  size_t pos = 0;
  while ((pos = ptx.find(".entry", pos)) != std::string::npos) {
    pos += 6;
    if (pos >= ptx.size() || (ptx[pos] != ' ' && ptx[pos] != '\t' && ptx[pos] != '\n')) continue;
    while (pos < ptx.size() && (ptx[pos] == ' ' || ptx[pos] == '\t' || ptx[pos] == '\n')) ++pos;
    size_t end = pos;
    while (end < ptx.size() && (std::isalnum(static_cast<unsigned char>(ptx[end])) || ptx[end] == '_' ||
                                ptx[end] == '$' || ptx[end] == '%')) {
      ++end;
    }
    if (end > pos) entries.insert(ptx.substr(pos, end - pos));
    pos = end;
  }
  return entries;
}

// A record with an index (param I, workspace J, phase K) and its line.
template <typename T>
struct Indexed {
  uint64_t index;
  T value;
  int line;
};

// Checks that the records' indices are exactly 0..n-1; `what` names the record kind.
template <typename T>
std::optional<std::string> checkIndices(const std::vector<Indexed<T>>& records, const std::string& file,
                                        const char* what) {
  std::map<uint64_t, int> seen;
  for (const Indexed<T>& r : records) {
    const uint64_t index = r.index;
    const int line = r.line;
    if (index >= records.size()) {
      return file + ":" + std::to_string(line) + ": " + what + " index " + std::to_string(index) + " out of range (" +
             std::to_string(records.size()) + " " + what + " records: indices must be 0.." +
             std::to_string(records.size() - 1) + ")";
    }
    auto [it, inserted] = seen.emplace(index, line);
    if (!inserted) {
      return file + ":" + std::to_string(line) + ": " + what + " index " + std::to_string(index) +
             " given twice (first at line " + std::to_string(it->second) + ")";
    }
  }
  return std::nullopt;
}

// Parses one manifest; `expected_name`, when non-empty, must equal the case record's name.
std::optional<std::string> parseManifestImpl(const std::string& text, const std::string& file,
                                             const std::string& expected_name, CaseSpec& out,
                                             std::vector<int>& phase_lines) {
  std::vector<std::string> lines = splitLines(text);
  auto at = [&](int line, const std::string& message) -> std::optional<std::string> {
    return file + ":" + std::to_string(line) + ": " + message;
  };
  if (lines.empty()) return file + ":1: empty manifest (expected 'kiln-gpu-archive 1')";

  std::map<std::string, int> seen_once;  // record kind -> line, for records allowed once
  std::vector<Indexed<Param>> params;
  std::vector<Indexed<uint64_t>> workspaces;  // element counts
  std::vector<Indexed<Phase>> phases;
  std::vector<Indexed<bool>> dependents;        // `dependent K` lines
  std::vector<std::pair<Output, int>> outputs;  // with their lines
  bool ended = false;

  for (size_t i = 0; i < lines.size(); ++i) {
    const int ln = static_cast<int>(i) + 1;
    const std::string& line = lines[i];
    if (ended) return at(ln, "text after 'end'");
    if (line.empty()) return at(ln, "empty line (one record per line)");
    if (i == 0) {
      if (line.rfind("kiln-gpu-archive ", 0) != 0) {
        return at(ln, "not a Kiln GPU archive manifest: expected 'kiln-gpu-archive 1', got '" + line + "'");
      }
      if (line != "kiln-gpu-archive 1") {
        return at(ln, "unsupported archive version '" + line.substr(17) + "' (this replay reads version 1)");
      }
      continue;
    }
    const std::vector<std::string> t = splitSpaces(line);
    const std::string& kind = t[0];
    if (kind == "source") {  // free text: no token checks
      if (seen_once.count(kind))
        return at(ln, "second 'source' record (first at line " + std::to_string(seen_once[kind]) + ")");
      seen_once[kind] = ln;
      out.source = line.size() > 7 ? line.substr(7) : "";
      continue;
    }
    for (const std::string& token : t) {
      if (token.empty()) return at(ln, "empty token (tokens are separated by single spaces)");
    }
    // n tokens, or n .. n_max when n_max > n (trailing optional fields).
    auto arity = [&](size_t n, const char* form, size_t n_max = 0) -> std::optional<std::string> {
      if (t.size() == n || (t.size() > n && t.size() <= n_max)) return std::nullopt;
      const std::string fields =
          n_max > n ? std::to_string(n - 1) + " to " + std::to_string(n_max - 1) : std::to_string(n - 1);
      return at(ln, "'" + kind + "' takes " + fields + " fields (" + form + "), got " + std::to_string(t.size() - 1));
    };
    auto once = [&]() -> std::optional<std::string> {
      auto [it, inserted] = seen_once.emplace(kind, ln);
      if (inserted) return std::nullopt;
      return at(ln, "second '" + kind + "' record (first at line " + std::to_string(it->second) + ")");
    };
    auto elementCount = [&](const std::string& s, uint64_t& v) -> std::optional<std::string> {
      if (!parseU64(s, v)) return at(ln, "ELEMENTS '" + s + "' is not an unsigned decimal integer");
      if (v > kMaxElements) return at(ln, "ELEMENTS " + s + " is too large");
      return std::nullopt;
    };

    if (kind == "case") {
      if (auto e = arity(2, "case NAME")) return e;
      if (auto e = once()) return e;
      if (!validName(t[1])) return at(ln, "case name '" + t[1] + "' is not a valid directory name");
      if (!expected_name.empty() && t[1] != expected_name) {
        return at(ln, "case '" + t[1] + "' does not match its directory '" + expected_name + "'");
      }
      out.name = t[1];
    } else if (kind == "seed") {
      if (auto e = arity(2, "seed S")) return e;
      if (auto e = once()) return e;
      if (!parseU64(t[1], out.seed)) return at(ln, "seed '" + t[1] + "' is not a uint64 decimal");
    } else if (kind == "param") {
      if (t.size() < 3) return at(ln, "'param' needs an index and a kind (view, i64 or f32)");
      Param p;
      uint64_t index = 0;
      if (!parseU64(t[1], index) || index > 1u << 20)
        return at(ln, "param index '" + t[1] + "' is not a small integer");
      p.index = static_cast<int>(index);
      if (t[2] == "view") {
        if (auto e = arity(8, "param I view NAME ELEMENTS INIT OUT DIGEST [STORAGE]", 9)) return e;
        p.kind = ParamKind::kView;
        if (auto e = elementCount(t[4], p.elements)) return e;
        if (t[5].rfind("bits:", 0) == 0) {
          uint64_t base = 0;
          if (!parseHex(t[5].substr(5), 8, base))
            return at(ln, "INIT '" + t[5] + "': B of bits:B is not 8 lowercase hex digits");
          p.bits_init = true;
          p.bits_base = static_cast<uint32_t>(base);
        } else if (t[5] != "random" && t[5] != "zero" && t[5] != "file") {
          return at(ln, "INIT '" + t[5] + "' is not 'random', 'zero', 'file' or 'bits:HHHHHHHH'");
        }
        p.random_init = t[5] == "random";
        p.from_file = t[5] == "file";
        if (t[6] != "0" && t[6] != "1") return at(ln, "OUT '" + t[6] + "' is neither 0 nor 1");
        p.written = t[6] == "1";
        if (!parseHex(t[7], 16, p.digest)) return at(ln, "DIGEST '" + t[7] + "' is not 16 lowercase hex digits");
        if (t.size() == 9) {
          if (t[8] == "f16") {
            p.storage = Storage::kF16;
          } else if (t[8] == "bf16") {
            p.storage = Storage::kBF16;
          } else {
            return at(ln, "STORAGE '" + t[8] + "' is not 'f16' or 'bf16' (omit it for 32-bit words)");
          }
        }
      } else if (t[2] == "i64") {
        if (auto e = arity(5, "param I i64 NAME VALUE")) return e;
        p.kind = ParamKind::kI64;
        if (!parseI64(t[4], p.i64)) return at(ln, "i64 VALUE '" + t[4] + "' is not a signed 64-bit decimal");
      } else if (t[2] == "f32") {
        if (auto e = arity(5, "param I f32 NAME BITS")) return e;
        p.kind = ParamKind::kF32;
        uint64_t bits = 0;
        if (!parseHex(t[4], 8, bits)) return at(ln, "f32 BITS '" + t[4] + "' is not 8 lowercase hex digits");
        p.f32_bits = static_cast<uint32_t>(bits);
      } else {
        return at(ln, "param kind '" + t[2] + "' is not view, i64 or f32");
      }
      p.name = t[3];
      if (!validName(p.name)) return at(ln, "param name '" + p.name + "' is not a valid file name");
      params.push_back({index, p, ln});
    } else if (kind == "workspace") {
      if (auto e = arity(3, "workspace J ELEMENTS")) return e;
      uint64_t index = 0, elements = 0;
      if (!parseU64(t[1], index)) return at(ln, "workspace index '" + t[1] + "' is not an unsigned integer");
      if (auto e = elementCount(t[2], elements)) return e;
      workspaces.push_back({index, elements, ln});
    } else if (kind == "phase") {
      if (auto e = arity(6, "phase K ENTRY PROGRAMS THREADS_PER_BLOCK GRID [DYNAMIC_SHARED_BYTES]", 7)) return e;
      uint64_t index = 0;
      Phase ph;
      if (!parseU64(t[1], index)) return at(ln, "phase index '" + t[1] + "' is not an unsigned integer");
      ph.entry = t[2];
      if (!parseU64(t[3], ph.programs)) return at(ln, "PROGRAMS '" + t[3] + "' is not an unsigned integer");
      if (!parseU64(t[4], ph.threads_per_block) || ph.threads_per_block == 0 ||
          ph.threads_per_block > kMaxThreadsPerBlock) {
        return at(ln, "THREADS_PER_BLOCK '" + t[4] + "' is not in 1..1024");
      }
      if (!parseU64(t[5], ph.grid) || ph.grid == 0 || ph.grid > kMaxGrid) {
        return at(ln, "GRID '" + t[5] + "' is not in 1..2^31-1");
      }
      if (t.size() == 7 && (!parseU64(t[6], ph.dynamic_shared_bytes) || ph.dynamic_shared_bytes == 0 ||
                            ph.dynamic_shared_bytes > kMaxDynamicSharedBytes)) {
        return at(ln, "DYNAMIC_SHARED_BYTES '" + t[6] + "' is not in 1.." + std::to_string(kMaxDynamicSharedBytes));
      }
      if (ph.programs > ph.grid * ph.threads_per_block) {
        return at(ln, "PROGRAMS " + t[3] + " exceed the launched threads (GRID " + t[5] + " x THREADS_PER_BLOCK " +
                          t[4] + ")");
      }
      phases.push_back({index, ph, ln});
    } else if (kind == "dependent") {
      if (auto e = arity(2, "dependent K")) return e;
      uint64_t index = 0;
      if (!parseU64(t[1], index) || index == 0) return at(ln, "dependent phase '" + t[1] + "' is not an index >= 1");
      dependents.push_back({index, true, ln});
    } else if (kind == "output") {
      if (auto e = arity(4, "output NAME ELEMENTS DIGEST [digest]", 5)) return e;
      Output o;
      o.name = t[1];
      if (auto e = elementCount(t[2], o.elements)) return e;
      if (!parseHex(t[3], 16, o.digest)) return at(ln, "DIGEST '" + t[3] + "' is not 16 lowercase hex digits");
      if (t.size() == 5) {
        if (t[4] != "digest")
          return at(ln,
                    "output mode '" + t[4] + "' is not 'digest' (omit it to compare with expected/" + o.name + ".f32)");
        o.digest_only = true;
      }
      outputs.emplace_back(o, ln);
    } else if (kind == "work") {
      if (auto e = arity(3, "work FLOPS BYTES")) return e;
      if (auto e = once()) return e;
      if (!parseDouble(t[1], out.flops) || out.flops < 0) return at(ln, "FLOPS '" + t[1] + "' is not a number >= 0");
      if (!parseDouble(t[2], out.bytes) || out.bytes < 0) return at(ln, "BYTES '" + t[2] + "' is not a number >= 0");
    } else if (kind == "end") {
      if (auto e = arity(1, "end")) return e;
      ended = true;
    } else {
      return at(ln, "unknown record '" + kind + "'");
    }
  }
  const int last = static_cast<int>(lines.size());
  if (!ended) return at(last, "missing 'end' (truncated manifest?)");
  if (!seen_once.count("case")) return at(last, "no 'case' record");
  if (!seen_once.count("seed")) return at(last, "no 'seed' record");
  if (phases.empty()) return at(last, "no 'phase' record");
  if (outputs.empty()) return at(last, "no 'output' record");

  // Indices: each kind must be exactly 0..n-1.
  if (auto e = checkIndices(params, file, "param")) return e;
  if (auto e = checkIndices(workspaces, file, "workspace")) return e;
  if (auto e = checkIndices(phases, file, "phase")) return e;
  out.params.assign(params.size(), Param());
  std::map<std::string, int> names;  // param name -> line
  for (const Indexed<Param>& p : params) {
    auto [it, inserted] = names.emplace(p.value.name, p.line);
    if (!inserted) {
      return at(p.line,
                "param name '" + p.value.name + "' used twice (first at line " + std::to_string(it->second) + ")");
    }
    out.params[p.index] = p.value;
  }
  out.workspaces.assign(workspaces.size(), 0);
  for (const Indexed<uint64_t>& w : workspaces) out.workspaces[w.index] = w.value;
  out.phases.assign(phases.size(), Phase());
  phase_lines.assign(phases.size(), 0);
  for (const Indexed<Phase>& ph : phases) {
    out.phases[ph.index] = ph.value;
    phase_lines[ph.index] = ph.line;
  }
  for (const Indexed<bool>& d : dependents) {
    if (d.index >= out.phases.size())
      return at(d.line, "dependent phase " + std::to_string(d.index) + " is not a phase of this case");
    if (out.phases[d.index].dependent) return at(d.line, "phase " + std::to_string(d.index) + " is dependent twice");
    out.phases[d.index].dependent = true;
  }

  // Outputs name written view params of the same size, once each.
  std::set<std::string> output_names;
  for (auto& [o, ln] : outputs) {
    if (!output_names.insert(o.name).second) return at(ln, "output '" + o.name + "' listed twice");
    auto it = names.find(o.name);
    if (it == names.end()) return at(ln, "output '" + o.name + "' is not a param");
    const Param* p = nullptr;
    for (size_t k = 0; k < out.params.size(); ++k) {
      if (out.params[k].name == o.name) {
        p = &out.params[k];
        o.param = k;
      }
    }
    if (p->kind != ParamKind::kView) return at(ln, "output '" + o.name + "' is a scalar param, not a view");
    if (p->elements != o.elements) {
      return at(ln, "output '" + o.name + "' has " + std::to_string(o.elements) + " elements, its param (line " +
                        std::to_string(it->second) + ") " + std::to_string(p->elements));
    }
    if (!p->written)
      return at(ln, "output '" + o.name + "' is a view the kernel does not write (OUT 0, line " +
                        std::to_string(it->second) + ")");
    out.outputs.push_back(o);
  }
  return std::nullopt;
}

}  // namespace

const char* storageName(Storage storage) {
  switch (storage) {
    case Storage::kF16: return "f16";
    case Storage::kBF16: return "bf16";
    case Storage::k32: break;
  }
  return "32";
}

uint64_t fnv1a64(const void* data, size_t bytes) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = kFnvOffset;
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= kFnvPrime;
  }
  return h;
}

std::string hex64(uint64_t value) {
  char buffer[17];
  std::snprintf(buffer, sizeof(buffer), "%016llx", static_cast<unsigned long long>(value));
  return buffer;
}

std::string hex32(uint32_t value) {
  char buffer[9];
  std::snprintf(buffer, sizeof(buffer), "%08x", static_cast<unsigned>(value));
  return buffer;
}

bool readFile(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return false;
  out = buffer.str();
  return true;
}

std::optional<std::string> parseManifest(const std::string& text, const std::string& file, CaseSpec& out) {
  std::vector<int> phase_lines;
  return parseManifestImpl(text, file, "", out, phase_lines);
}

std::optional<std::string> loadArchive(const std::string& path, Archive& out) {
  out = Archive();
  out.path = path;
  const std::string index_path = path + "/index.txt";
  std::string index;
  if (!readFile(index_path, index)) return index_path + ": cannot read (is " + path + " a Kiln GPU archive?)";
  const std::vector<std::string> names = splitLines(index);
  std::map<std::string, int> seen;
  for (size_t i = 0; i < names.size(); ++i) {
    const int ln = static_cast<int>(i) + 1;
    const std::string& name = names[i];
    if (name.empty()) continue;
    if (!validName(name))
      return index_path + ":" + std::to_string(ln) + ": '" + name + "' is not a case directory name";
    auto [it, inserted] = seen.emplace(name, ln);
    if (!inserted) {
      return index_path + ":" + std::to_string(ln) + ": case '" + name + "' listed twice (first at line " +
             std::to_string(it->second) + ")";
    }

    CaseSpec spec;
    spec.dir = path + "/" + name;
    const std::string manifest_path = spec.dir + "/manifest.txt";
    std::string text;
    if (!readFile(manifest_path, text)) {
      return manifest_path + ": cannot read (case '" + name + "', " + index_path + ":" + std::to_string(ln) + ")";
    }
    std::vector<int> phase_lines;
    if (auto e = parseManifestImpl(text, manifest_path, name, spec, phase_lines)) return e;

    const std::string ptx_path = spec.dir + "/kernel.ptx";
    if (!readFile(ptx_path, spec.ptx)) return ptx_path + ": cannot read";
    if (spec.ptx.empty()) return ptx_path + ": empty";
    const std::set<std::string> entries = ptxEntries(spec.ptx);
    for (size_t k = 0; k < spec.phases.size(); ++k) {
      if (!entries.count(spec.phases[k].entry)) {
        return manifest_path + ":" + std::to_string(phase_lines[k]) + ": phase " + std::to_string(k) + " entry '" +
               spec.phases[k].entry + "' is not an .entry of " + ptx_path;
      }
    }

    for (Param& p : spec.params) {
      if (!p.from_file) continue;
      const std::string path = spec.dir + "/inputs/" + p.name + ".bin";
      std::string bytes;
      if (!readFile(path, bytes)) return path + ": cannot read";
      if (bytes.size() != p.elements * 4)
        return path + ": " + std::to_string(bytes.size()) + " bytes, expected " + std::to_string(p.elements * 4) +
               " (" + manifest_path + ")";
      p.file_words.resize(p.elements);
      for (uint64_t e = 0; e < p.elements; ++e) {
        const unsigned char* b = reinterpret_cast<const unsigned char*>(bytes.data()) + 4 * e;
        p.file_words[e] = uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
      }
    }

    for (Output& o : spec.outputs) {
      if (o.digest_only) continue;  // no expected file: the replay compares the GPU bytes' digest
      const std::string expected_path = spec.dir + "/expected/" + o.name + ".f32";
      std::string bytes;
      if (!readFile(expected_path, bytes)) return expected_path + ": cannot read";
      if (bytes.size() != o.elements * 4) {
        return expected_path + ": " + std::to_string(bytes.size()) + " bytes, expected " +
               std::to_string(o.elements * 4) + " (" + std::to_string(o.elements) + " floats, " + manifest_path + ")";
      }
      const uint64_t digest = fnv1a64(bytes.data(), bytes.size());
      if (digest != o.digest) {
        return expected_path + ": FNV-1a 64 " + hex64(digest) + " differs from the manifest's " + hex64(o.digest) +
               " (" + manifest_path + ")";
      }
      o.expected.resize(o.elements);
      for (uint64_t e = 0; e < o.elements; ++e) {
        const unsigned char* b = reinterpret_cast<const unsigned char*>(bytes.data()) + 4 * e;
        o.expected[e] = uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
      }
    }
    out.cases.push_back(std::move(spec));
  }
  if (out.cases.empty()) return index_path + ": no cases";
  return std::nullopt;
}

std::vector<std::string> makeInputs(const CaseSpec& spec, std::vector<std::vector<uint32_t>>& views) {
  std::vector<std::string> problems;
  views.assign(spec.params.size(), {});
  for (size_t i = 0; i < spec.params.size(); ++i) {
    const Param& p = spec.params[i];
    if (p.kind != ParamKind::kView) continue;
    if (p.from_file) {
      views[i] = p.file_words;
    } else if (p.random_init) {
      views[i] = drawView(spec.seed, p.index, p.elements);
    } else if (p.bits_init) {
      views[i].resize(p.elements);
      for (uint64_t e = 0; e < p.elements; ++e) views[i][e] = p.bits_base + static_cast<uint32_t>(e);  // mod 2^32
    } else {
      views[i].assign(p.elements, 0u);
    }
    const uint64_t digest = fnvWords(views[i]);
    if (digest != p.digest) {
      const std::string init = p.from_file     ? "file"
                               : p.random_init ? "random"
                               : p.bits_init   ? "bits:" + hex32(p.bits_base)
                                               : "zero";
      problems.push_back("param " + std::to_string(p.index) + " " + p.name + " (" + init + ", " +
                         std::to_string(p.elements) + " elements): generated digest " + hex64(digest) +
                         " != manifest " + hex64(p.digest));
    }
  }
  return problems;
}

}  // namespace kiln::replay
