#include "bench/archive.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <system_error>

#include "host/data.h"

namespace kiln::bench {
namespace fs = std::filesystem;

static_assert(std::endian::native == std::endian::little, "archive data files are little-endian");

std::optional<std::string> Archive::create(const fs::path& requested, std::unique_ptr<Archive>& out) {
  fs::path dir = requested.lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();  // "DIR/" names DIR
  if (dir.empty() || dir == "." || dir == "..") return "'" + requested.string() + "' cannot be a new archive folder";
  std::error_code ec;
  if (fs::exists(fs::symlink_status(dir, ec)))
    return "output directory '" + dir.string() +
           "' already exists; an archive is never overwritten (choose a new --out)";
  if (dir.has_parent_path()) {
    fs::create_directories(dir.parent_path(), ec);
    if (ec) return "cannot create '" + dir.parent_path().string() + "': " + ec.message();
  }
  // create_directory reports whether it made the folder: a race with another process that
  // creates it first is still a refusal.
  if (!fs::create_directory(dir, ec)) {
    if (ec) return "cannot create '" + dir.string() + "': " + ec.message();
    return "output directory '" + dir.string() +
           "' already exists; an archive is never overwritten (choose a new --out)";
  }
  out = std::make_unique<Archive>(dir);
  return std::nullopt;
}

std::optional<std::string> Archive::write(const std::string& rel, std::string_view bytes) const {
  const fs::path path = root_ / rel;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return "cannot create '" + path.parent_path().string() + "': " + ec.message();
  if (fs::exists(fs::symlink_status(path, ec))) return "archive file '" + path.string() + "' exists already";
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return "cannot write '" + path.string() + "'";
  return std::nullopt;
}

std::optional<std::string> Archive::read(const std::string& rel, std::string& bytes) const {
  const fs::path path = root_ / rel;
  std::ifstream f(path, std::ios::binary);
  if (!f) return "cannot read '" + rel + "'";
  bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  if (f.bad()) return "cannot read '" + rel + "'";
  return std::nullopt;
}

bool Archive::exists(const std::string& rel) const {
  std::error_code ec;
  return fs::is_regular_file(root_ / rel, ec);
}

std::string f32Bytes(std::span<const float> values) {
  std::string out(values.size_bytes(), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), values.size_bytes());
  return out;
}

std::string f64Bytes(std::span<const double> values) {
  std::string out(values.size_bytes(), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), values.size_bytes());
  return out;
}

std::optional<std::string> parseF32(std::string_view bytes, int64_t count, std::vector<float>& out) {
  if (static_cast<int64_t>(bytes.size()) != count * 4)
    return std::to_string(bytes.size()) + " bytes, expected " + std::to_string(count * 4) + " (" +
           std::to_string(count) + " float32)";
  out.resize(static_cast<size_t>(count));
  if (count) std::memcpy(out.data(), bytes.data(), bytes.size());
  return std::nullopt;
}

std::optional<std::string> parseF64(std::string_view bytes, int64_t count, std::vector<double>& out) {
  if (static_cast<int64_t>(bytes.size()) != count * 8)
    return std::to_string(bytes.size()) + " bytes, expected " + std::to_string(count * 8) + " (" +
           std::to_string(count) + " float64)";
  out.resize(static_cast<size_t>(count));
  if (count) std::memcpy(out.data(), bytes.data(), bytes.size());
  return std::nullopt;
}

std::vector<std::string> listFiles(const fs::path& root, std::vector<std::string>* odd) {
  std::vector<std::string> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string rel = fs::relative(it->path(), root).generic_string();
    if (it->is_symlink()) {
      if (odd) odd->push_back(rel);
      continue;
    }
    if (it->is_directory()) continue;
    if (it->is_regular_file())
      files.push_back(rel);
    else if (odd)
      odd->push_back(rel);
  }
  std::sort(files.begin(), files.end());
  if (odd) std::sort(odd->begin(), odd->end());
  return files;
}

std::optional<std::string> sumsText(const Archive& archive, std::string& out) {
  out.clear();
  for (const std::string& rel : listFiles(archive.root())) {
    if (rel == kSumsFile) continue;
    std::string bytes;
    if (auto e = archive.read(rel, bytes)) return e;
    out += host::sha256Hex(bytes.data(), bytes.size()) + "  " + rel + "\n";
  }
  return std::nullopt;
}

std::optional<std::string> parseSums(std::string_view text, std::vector<SumEntry>& out) {
  out.clear();
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    ++line_no;
    const size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) return "line " + std::to_string(line_no) + " does not end in a newline";
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    const std::string where = "line " + std::to_string(line_no) + ": ";
    if (line.size() < 67 || line[64] != ' ' || line[65] != ' ') return where + "expected 'HEX  PATH'";
    for (char c : line.substr(0, 64))
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
        return where + "the digest is not 64 lowercase hex digits";
    SumEntry e{std::string(line.substr(0, 64)), std::string(line.substr(66))};
    if (e.path.front() == '/' || e.path.find("..") != std::string::npos || e.path.find('\\') != std::string::npos)
      return where + "path '" + e.path + "' is not a plain relative path";
    for (char c : e.path)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f)
        return where + "path holds a control or non-ASCII byte";
    if (!out.empty() && !(out.back().path < e.path)) return where + "paths are not sorted and unique";
    out.push_back(std::move(e));
  }
  if (out.empty()) return "no entries";
  return std::nullopt;
}

}  // namespace kiln::bench
