// File helpers for captured objects, and the object-cache key.
#include "jit/object_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "host/data.h"

namespace kiln::jit {
namespace {

std::string failure(const char* verb, const std::string& path, int err) {
  return std::string("cannot ") + verb + " '" + path + "': " + std::strerror(err);
}

}  // namespace

std::optional<std::string> writeFile(const std::string& path, const std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return failure("write", path, errno);
  const size_t written = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const int write_errno = errno;
  if (std::fclose(f) != 0 && written == bytes.size()) return failure("write", path, errno);
  if (written != bytes.size()) return failure("write", path, write_errno);
  return std::nullopt;
}

std::optional<std::string> readFile(const std::string& path, std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return failure("read", path, errno);
  bytes.clear();
  char chunk[1 << 16];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0) bytes.append(chunk, n);
  const bool failed = std::ferror(f);
  const int read_errno = errno;
  std::fclose(f);
  if (failed) return failure("read", path, read_errno);
  return std::nullopt;
}

std::string ObjectCacheKey::hash() const {
  std::string text;
  for (const std::string* field : {&ir_text, &knobs, &cpu, &llvm_version})
    text += std::to_string(field->size()) + ":" + *field + "\n";
  return host::sha256Hex(text.data(), text.size());
}

}  // namespace kiln::jit
