// The archive on disk: a folder that is created new (an existing one is refused, so results
// are never overwritten), files written once by relative path, raw little-endian float data,
// and SHA256SUMS in the format `sha256sum -c` reads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::bench {

class Archive {
 public:
  // Creates `dir` (and missing parents). Error when `dir` exists in any form.
  static std::optional<std::string> create(const std::filesystem::path& dir, std::unique_ptr<Archive>& out);
  // An existing archive, for reading (replay, audit).
  explicit Archive(std::filesystem::path dir) : root_(std::move(dir)) {}

  const std::filesystem::path& root() const { return root_; }
  // Writes `bytes` to root/rel, creating folders; refuses to replace an existing file.
  std::optional<std::string> write(const std::string& rel, std::string_view bytes) const;
  std::optional<std::string> read(const std::string& rel, std::string& bytes) const;
  bool exists(const std::string& rel) const;

 private:
  std::filesystem::path root_;
};

// Raw little-endian IEEE data, no header (shapes live in the JSON beside it).
std::string f32Bytes(std::span<const float> values);
std::string f64Bytes(std::span<const double> values);
// Error when the byte count is not `count` elements.
std::optional<std::string> parseF32(std::string_view bytes, int64_t count, std::vector<float>& out);
std::optional<std::string> parseF64(std::string_view bytes, int64_t count, std::vector<double>& out);

// Every entry under `root`, as relative paths with '/' separators, sorted bytewise; entries
// that are not regular files (links, devices) are listed in `odd`.
std::vector<std::string> listFiles(const std::filesystem::path& root, std::vector<std::string>* odd = nullptr);

inline constexpr const char* kSumsFile = "SHA256SUMS";

// SHA256SUMS text: "HEX  PATH\n" for every file but SHA256SUMS itself, sorted by path.
std::optional<std::string> sumsText(const Archive& archive, std::string& out);

struct SumEntry {
  std::string sha256;
  std::string path;
};
// Strict: 64 lowercase hex digits, two spaces, a relative path without "..", one per line,
// each line ending in '\n', paths sorted and unique. Error names the line.
std::optional<std::string> parseSums(std::string_view text, std::vector<SumEntry>& out);

}  // namespace kiln::bench
