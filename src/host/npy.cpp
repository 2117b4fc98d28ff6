// The .npy format: magic "\x93NUMPY", major and minor version bytes, the header length (2 bytes
// little-endian in 1.0, 4 in 2.0/3.0), then an ASCII (3.0: UTF-8) Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces and a
// newline, then the raw data.
#include "host/npy.h"

#include "host/data.h"

#include <fmt/format.h>

#include <cctype>
#include <cstring>
#include <limits>

namespace kiln::host {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr int64_t kMaxElements = int64_t{1} << 34;

// The value of `key` in the header dict: the text after "'key':" up to the next top-level ',' or
// '}' (a tuple's commas are inside parentheses).
std::optional<std::string> field(const std::string& header, const std::string& key) {
  for (const char q : {'\'', '"'}) {
    const std::string k = std::string(1, q) + key + std::string(1, q);
    size_t p = header.find(k);
    if (p == std::string::npos) continue;
    p = header.find(':', p + k.size());
    if (p == std::string::npos) return std::nullopt;
    ++p;
    int depth = 0;
    size_t e = p;
    for (; e < header.size(); ++e) {
      const char c = header[e];
      if (c == '(') ++depth;
      if (c == ')') --depth;
      if (depth == 0 && (c == ',' || c == '}')) break;
    }
    std::string v = header.substr(p, e - p);
    const size_t b = v.find_first_not_of(" \t");
    const size_t l = v.find_last_not_of(" \t");
    return b == std::string::npos ? std::string() : v.substr(b, l - b + 1);
  }
  return std::nullopt;
}

std::string unquote(const std::string& s) {
  if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front())
    return s.substr(1, s.size() - 2);
  return s;
}

std::optional<std::string> parseShape(const std::string& text, std::vector<int64_t>& shape) {
  shape.clear();
  if (text.size() < 2 || text.front() != '(' || text.back() != ')')
    return fmt::format("the header's shape '{}' is not a tuple", text);
  std::string inner = text.substr(1, text.size() - 2);
  size_t i = 0;
  while (i < inner.size()) {
    while (i < inner.size() && (inner[i] == ' ' || inner[i] == ',')) ++i;
    if (i >= inner.size()) break;
    size_t j = i;
    while (j < inner.size() && std::isdigit(static_cast<unsigned char>(inner[j]))) ++j;
    if (j == i || j - i > 12) return fmt::format("the header's shape '{}' is not a tuple of sizes", text);
    shape.push_back(std::stoll(inner.substr(i, j - i)));
    i = j;
    while (i < inner.size() && inner[i] == ' ') ++i;
    if (i < inner.size() && inner[i] != ',')
      return fmt::format("the header's shape '{}' is not a tuple of sizes", text);
  }
  return std::nullopt;
}

}  // namespace

int64_t NpyArray::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string npyShapeText(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) s += ",";
  return s + ")";
}

std::optional<std::string> parseNpy(const std::string& bytes, NpyArray& out) {
  out = NpyArray{};
  if (bytes.size() < kMagicSize || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0)
    return "not an .npy file (it does not start with the \\x93NUMPY magic)";
  if (bytes.size() < 10) return "truncated: the file ends inside the .npy preamble";
  const auto major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, header_at = 0;
  if (major == 1) {
    header_len =
        static_cast<unsigned char>(bytes[8]) | (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    header_at = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return "truncated: the file ends inside the .npy preamble";
    for (int i = 3; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[8 + i]);
    header_at = 12;
  } else {
    return fmt::format(".npy format version {} is not supported (1, 2 and 3 are)", major);
  }
  if (header_len > bytes.size() - header_at)
    return fmt::format("truncated: the header is {} bytes, the file has {} after the preamble", header_len,
                       bytes.size() - header_at);
  const std::string header = bytes.substr(header_at, header_len);
  const auto descr = field(header, "descr");
  const auto fortran = field(header, "fortran_order");
  const auto shape = field(header, "shape");
  if (!descr || !fortran || !shape) return "the .npy header lacks 'descr', 'fortran_order' or 'shape'";
  if (*fortran != "False") return "the array is in Fortran order; Kiln reads C order (numpy.ascontiguousarray)";
  const std::string d = unquote(*descr);
  size_t item = 0;
  if (d == "<f4") {
    out.dtype = "float32";
    item = 4;
  } else if (d == "<i8") {
    out.dtype = "int64";
    item = 8;
  } else if (d == "<i4") {
    out.dtype = "int32";
    item = 4;
  } else if (d == "<f2") {
    out.dtype = "float16";
    item = 2;
  } else if (d == "<u2" || d == "|V2" || d == "<V2") {
    out.dtype = "uint16";  // bfloat16 bits, as NumPy holds them (no bfloat16 dtype of its own)
    item = 2;
  } else {
    return fmt::format(
        "dtype '{}' is not supported; Kiln reads little-endian float32 ('<f4'), float16 ('<f2'), bfloat16 bits "
        "('<u2' or 'V2'), int32 ('<i4') or int64 ('<i8')",
        d);
  }
  if (auto e = parseShape(*shape, out.shape)) return e;
  int64_t n = 1;
  for (int64_t s : out.shape) {
    if (s != 0 && n > kMaxElements / s) return fmt::format("the shape {} is too large", *shape);
    n *= s;
  }
  const size_t data_at = header_at + header_len;
  const size_t want = static_cast<size_t>(n) * item;
  const size_t have = bytes.size() - data_at;
  if (have < want)
    return fmt::format("truncated: the shape {} needs {} bytes of data, the file has {}", *shape, want, have);
  if (have > want) return fmt::format("the file has {} bytes of data after the array's {}", have - want, want);
  if (out.dtype == "float32") {
    out.f32.resize(static_cast<size_t>(n));
    std::memcpy(out.f32.data(), bytes.data() + data_at, want);
  } else if (out.dtype == "int32") {
    integersFromBytes(bytes.data() + data_at, want, /*int32=*/true, out.i64);
  } else if (item == 2) {
    out.u16.resize(static_cast<size_t>(n));
    std::memcpy(out.u16.data(), bytes.data() + data_at, want);
  } else {
    out.i64.resize(static_cast<size_t>(n));
    std::memcpy(out.i64.data(), bytes.data() + data_at, want);
  }
  return std::nullopt;
}

namespace {

// A version 1.0 .npy header (preamble included) for `descr` and `shape`.
std::string npyHeader(const char* descr, const std::vector<int64_t>& shape) {
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + npyShapeText(shape) + ", }";
  // Preamble (10 bytes) + header + '\n' padded to a multiple of 64.
  const size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string out(kMagic, kMagicSize);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  return out;
}

}  // namespace

std::string npyF32(const std::vector<int64_t>& shape, const std::vector<float>& data) {
  std::string out = npyHeader("<f4", shape);
  out.append(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float));
  return out;
}

std::string npyHalves(const std::vector<int64_t>& shape, const std::vector<uint16_t>& bits, bool bf16) {
  std::string out = npyHeader(bf16 ? "<u2" : "<f2", shape);
  out.append(reinterpret_cast<const char*>(bits.data()), bits.size() * 2);
  return out;
}

std::string npyInts(const std::vector<int64_t>& shape, const std::vector<int64_t>& data, bool int32) {
  return npyHeader(int32 ? "<i4" : "<i8", shape) + integerBytes(data, int32);
}

}  // namespace kiln::host
