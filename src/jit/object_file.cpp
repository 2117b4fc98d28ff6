// File helpers for captured objects, and the object-cache key.
#include "jit/object_file.h"

#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <system_error>
#include <vector>

#include "host/data.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unversioned"
#endif

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
  for (const std::string* field : {&ir_text, &knobs, &cpu, &llvm_version, &kiln_version})
    text += std::to_string(field->size()) + ":" + *field + "\n";
  return host::sha256Hex(text.data(), text.size());
}

namespace {

namespace fs = std::filesystem;

constexpr const char* kEntryMagic = "kiln-cache-entry/1";
constexpr const char* kEntrySuffix = ".kc";

bool isHash(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// The GNU build-id note (hex) of the loaded object that holds Kiln's own code: the kiln
// executable, a program linking the static libraries, or libkiln.so (the public API) — not the
// program that loaded the library. "" when that object has no note.
struct BuildIdSearch {
  uintptr_t code = 0;  // an address inside Kiln's code
  std::string* out = nullptr;
};

int findBuildId(dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<BuildIdSearch*>(data);
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum && !holds; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    holds = ph.p_type == PT_LOAD && search->code >= begin && search->code < begin + ph.p_memsz;
  }
  if (!holds) return 0;  // keep looking
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* n = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const char* name = p + sizeof(ElfW(Nhdr));
      const char* desc = name + ((n->n_namesz + 3) & ~3u);
      if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0 &&
          desc + n->n_descsz <= end) {
        static const char* hex = "0123456789abcdef";
        for (unsigned j = 0; j < n->n_descsz; ++j) {
          const auto b = static_cast<unsigned char>(desc[j]);
          *search->out += hex[b >> 4];
          *search->out += hex[b & 15];
        }
        return 1;
      }
      p = desc + ((n->n_descsz + 3) & ~3u);
    }
  }
  return 1;  // the object holding Kiln's code has no build id
}

void defaultWarn(const std::string& s) {
  std::cerr << "kiln: warning: " << s << '\n';
}

}  // namespace

const char* kilnVersion() {
  return KILN_VERSION;
}

const std::string& kilnBuildId() {
  static const std::string id = [] {
    std::string build;
    BuildIdSearch search{reinterpret_cast<uintptr_t>(&findBuildId), &build};
    dl_iterate_phdr(findBuildId, &search);
    return std::string(kilnVersion()) + "+" + (build.empty() ? "no-build-id" : build);
  }();
  return id;
}

DiskObjectCache::DiskObjectCache(std::string dir, int64_t max_bytes, std::function<void(const std::string&)> warn)
    : dir_(std::move(dir)), max_bytes_(max_bytes), warn_(warn ? std::move(warn) : defaultWarn) {}

std::optional<std::string> DiskObjectCache::get(const std::string& key_hash) {
  if (!isHash(key_hash)) return std::nullopt;
  const std::string path = dir_ + "/" + key_hash + kEntrySuffix;
  std::string bytes;
  if (readFile(path, bytes)) return std::nullopt;  // absent (or unreadable): a miss
  std::string why;
  const size_t nl = bytes.find('\n');
  std::string body;
  if (nl == std::string::npos || nl > 200) {
    why = "no entry header";
  } else {
    const std::string header = bytes.substr(0, nl);
    char magic[32] = {}, digest[65] = {};
    unsigned long long size = 0;
    if (std::sscanf(header.c_str(), "%31s %64s %llu", magic, digest, &size) != 3 || std::string(magic) != kEntryMagic)
      why = "bad entry header";
    else if (bytes.size() - nl - 1 != size)
      why = "truncated: " + std::to_string(bytes.size() - nl - 1) + " of " + std::to_string(size) + " bytes";
    else if (body = bytes.substr(nl + 1); host::sha256Hex(body.data(), body.size()) != digest)
      why = "its digest does not match its contents";
  }
  if (!why.empty()) {
    std::error_code ec;
    fs::remove(path, ec);
    warn_("cache entry " + path + " is corrupted (" + why + "); removed, compiling again");
    return std::nullopt;
  }
  std::error_code ec;
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // most recently used
  return body;
}

void DiskObjectCache::put(const std::string& key_hash, const std::string& bytes) {
  if (!isHash(key_hash)) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) {
    warn_("cannot create the cache directory " + dir_ + ": " + ec.message() + "; not caching");
    return;
  }
  std::random_device rd;
  const std::string tmp = dir_ + "/" + key_hash + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
  const std::string entry = std::string(kEntryMagic) + " " + host::sha256Hex(bytes.data(), bytes.size()) + " " +
                            std::to_string(bytes.size()) + "\n" + bytes;
  if (auto e = writeFile(tmp, entry)) {
    fs::remove(tmp, ec);
    warn_(*e + "; not caching");
    return;
  }
  fs::rename(tmp, dir_ + "/" + key_hash + kEntrySuffix, ec);
  if (ec) {
    fs::remove(tmp, ec);
    warn_("cannot store a cache entry in " + dir_ + ": " + ec.message());
    return;
  }
  evict();
}

DiskObjectCache::Info DiskObjectCache::info() const {
  Info out;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != kEntrySuffix) continue;
    std::error_code sec;
    const auto size = it->file_size(sec);
    if (sec) continue;
    ++out.entries;
    out.bytes += static_cast<int64_t>(size);
  }
  return out;
}

int64_t DiskObjectCache::clear() {
  int64_t removed = 0;
  std::error_code ec;
  std::vector<fs::path> paths;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const bool entry = it->path().extension() == kEntrySuffix;
    if (entry || name.find(".tmp.") != std::string::npos) paths.push_back(it->path());
  }
  for (const fs::path& p : paths) {
    std::error_code rec;
    if (fs::remove(p, rec) && p.extension() == kEntrySuffix) ++removed;
  }
  return removed;
}

void DiskObjectCache::evict() {
  struct File {
    fs::path path;
    fs::file_time_type used;
    int64_t bytes;
  };
  std::vector<File> files;
  int64_t total = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != kEntrySuffix) continue;
    std::error_code sec;
    File f{it->path(), it->last_write_time(sec), 0};
    f.bytes = static_cast<int64_t>(it->file_size(sec));
    if (sec) continue;
    total += f.bytes;
    files.push_back(std::move(f));
  }
  if (total <= max_bytes_) return;
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) { return a.used < b.used; });
  for (const File& f : files) {
    if (total <= max_bytes_) break;
    std::error_code rec;
    if (fs::remove(f.path, rec)) total -= f.bytes;
  }
}

std::optional<std::string> cacheFromEnvironment(std::unique_ptr<DiskObjectCache>& out) {
  out.reset();
  int64_t max_mb = 512;
  if (const char* m = std::getenv("KILN_CACHE_MAX_MB"); m && *m) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(m, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0 || v > (int64_t{1} << 30))
      return std::string("KILN_CACHE_MAX_MB='") + m + "' is not a size in MiB (0.." + std::to_string(int64_t{1} << 30) +
             ")";
    max_mb = v;
  }
  std::string dir;
  if (const char* d = std::getenv("KILN_CACHE_DIR"); d) {
    if (std::string(d).empty() || std::string(d) == "off") return std::nullopt;
    dir = d;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    dir = std::string(x) + "/kiln";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    dir = std::string(h) + "/.cache/kiln";
  } else {
    return std::nullopt;
  }
  out = std::make_unique<DiskObjectCache>(dir, max_mb << 20);
  return std::nullopt;
}

}  // namespace kiln::jit
