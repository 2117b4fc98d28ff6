// The CUDA driver API through dlopen (see cuda_driver.h).
#include "gpu/cuda_driver.h"

#include <dlfcn.h>

#include <cstring>
#include <type_traits>

namespace kiln::gpu {
namespace {

constexpr size_t kMinAllocation = 256;
constexpr size_t kJitLogBytes = size_t{1} << 16;

// A JIT option value that is an integer, passed in the pointer-sized slot.
void* jitValue(size_t value) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(value));
}

// The text the JIT wrote into `buffer` (NUL-terminated, at most its size), trailing whitespace dropped.
std::string logText(const std::string& buffer) {
  std::string text(buffer.c_str(), strnlen(buffer.c_str(), buffer.size()));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) text.pop_back();
  return text;
}

// Names of a few CUresult values, for when cuGetErrorName cannot say (e.g. the stub library).
const char* knownErrorName(CUresult code) {
  switch (code) {
    case 1: return "CUDA_ERROR_INVALID_VALUE";
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 34: return "CUDA_ERROR_STUB_LIBRARY";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 218: return "CUDA_ERROR_INVALID_PTX";
    case 222: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case 700: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case 719: return "CUDA_ERROR_LAUNCH_FAILED";
    case 999: return "CUDA_ERROR_UNKNOWN";
    default: return "CUDA_ERROR_UNRECOGNIZED";
  }
}

}  // namespace

bool isContextLost(CUresult code) {
  switch (code) {
    case 700:  // CUDA_ERROR_ILLEGAL_ADDRESS
    case 702:  // CUDA_ERROR_LAUNCH_TIMEOUT
    case 710:  // CUDA_ERROR_ASSERT
    case 714:  // CUDA_ERROR_HARDWARE_STACK_ERROR
    case 715:  // CUDA_ERROR_ILLEGAL_INSTRUCTION
    case 716:  // CUDA_ERROR_MISALIGNED_ADDRESS
    case 717:  // CUDA_ERROR_INVALID_ADDRESS_SPACE
    case 718:  // CUDA_ERROR_INVALID_PC
    case 719:  // CUDA_ERROR_LAUNCH_FAILED
      return true;
    default: return false;
  }
}

// ---- CudaDriver ----------------------------------------------------------------------------

std::unique_ptr<CudaDriver> CudaDriver::open(std::string& error) {
  dlerror();
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    error = std::string("no GPU: libcuda.so.1 not found (dlopen: ") + (why ? why : "unknown error") + ")";
    return nullptr;
  }
  std::unique_ptr<CudaDriver> driver(new CudaDriver());
  driver->library_ = library;

  // Resolves `name` into `fn`; remembers the first missing symbol.
  std::string missing;
  auto resolve = [&](auto& fn, const char* name) {
    void* symbol = dlsym(library, name);
    if (symbol != nullptr) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(symbol);
    } else if (missing.empty()) {
      missing = name;
    }
  };
  Api& a = driver->api_;
  resolve(a.cuInit, "cuInit");
  resolve(a.cuDriverGetVersion, "cuDriverGetVersion");
  resolve(a.cuGetErrorName, "cuGetErrorName");
  resolve(a.cuGetErrorString, "cuGetErrorString");
  resolve(a.cuDeviceGet, "cuDeviceGet");
  resolve(a.cuDeviceGetName, "cuDeviceGetName");
  resolve(a.cuDeviceGetAttribute, "cuDeviceGetAttribute");
  resolve(a.cuCtxCreate, "cuCtxCreate_v2");
  resolve(a.cuCtxDestroy, "cuCtxDestroy_v2");
  resolve(a.cuCtxSynchronize, "cuCtxSynchronize");
  resolve(a.cuMemAlloc, "cuMemAlloc_v2");
  resolve(a.cuMemFree, "cuMemFree_v2");
  resolve(a.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
  resolve(a.cuMemcpyDtoH, "cuMemcpyDtoH_v2");
  resolve(a.cuMemsetD8, "cuMemsetD8_v2");
  resolve(a.cuModuleLoadDataEx, "cuModuleLoadDataEx");
  resolve(a.cuModuleUnload, "cuModuleUnload");
  resolve(a.cuModuleGetFunction, "cuModuleGetFunction");
  resolve(a.cuFuncGetAttribute, "cuFuncGetAttribute");
  resolve(a.cuFuncSetAttribute, "cuFuncSetAttribute");
  resolve(a.cuLaunchKernel, "cuLaunchKernel");
  // Optional: the launches of dependent phases need it (CUDA 12+).
  a.cuLaunchKernelEx = reinterpret_cast<decltype(a.cuLaunchKernelEx)>(dlsym(library, "cuLaunchKernelEx"));
  resolve(a.cuEventCreate, "cuEventCreate");
  resolve(a.cuEventRecord, "cuEventRecord");
  resolve(a.cuEventSynchronize, "cuEventSynchronize");
  resolve(a.cuEventDestroy, "cuEventDestroy_v2");
  if (void* v2 = dlsym(library, "cuEventElapsedTime_v2")) {
    a.cuEventElapsedTime = reinterpret_cast<decltype(a.cuEventElapsedTime)>(v2);
  } else {
    resolve(a.cuEventElapsedTime, "cuEventElapsedTime");
  }
  if (!missing.empty()) {
    error = "libcuda.so.1 lacks the entry point " + missing + " (driver too old?)";
    return nullptr;
  }

  CUresult r = a.cuInit(0);
  if (r != kCudaSuccess) {
    error = "no GPU: cuInit failed: " + driver->describe(r);
    return nullptr;
  }
  r = a.cuDriverGetVersion(&driver->driver_version_);
  if (r != kCudaSuccess) {
    error = "cuDriverGetVersion: " + driver->describe(r);
    return nullptr;
  }
  return driver;
}

// libcuda stays loaded: unloading the driver while the process may still hold CUDA state (a
// context lost to a sticky error, for instance) is not worth the risk; the process ends soon.
CudaDriver::~CudaDriver() = default;

std::string CudaDriver::describe(CUresult code) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_.cuGetErrorName == nullptr || api_.cuGetErrorName(code, &name) != kCudaSuccess || name == nullptr) {
    name = knownErrorName(code);
  }
  if (api_.cuGetErrorString == nullptr || api_.cuGetErrorString(code, &text) != kCudaSuccess) text = nullptr;
  std::string out = std::string(name) + " (" + std::to_string(code) + ")";
  if (text != nullptr && *text != '\0') out += std::string(": ") + text;
  return out;
}

Status CudaDriver::check(CUresult code, const char* call) const {
  if (code == kCudaSuccess) return Status();
  return Status::failure(code, std::string(call) + ": " + describe(code));
}

Status CudaDriver::synchronize() const {
  return check(api_.cuCtxSynchronize(), "cuCtxSynchronize");
}

Status CudaDriver::launch(CUfunction function, unsigned int grid_x, unsigned int block_x, void** args,
                          unsigned int shared_bytes, CUstream stream, bool dependent) const {
  if (!dependent) {
    return check(api_.cuLaunchKernel(function, grid_x, 1, 1, block_x, 1, 1, shared_bytes, stream, args, nullptr),
                 "cuLaunchKernel");
  }
  if (api_.cuLaunchKernelEx == nullptr) {
    return Status::failure(
        kNotACudaError, "cuLaunchKernelEx: this driver does not export it (a dependent launch needs CUDA 12 or later)");
  }
  LaunchAttribute attribute;
  attribute.id = kLaunchAttrProgrammaticStreamSerialization;
  attribute.value.programmatic_stream_serialization_allowed = 1;
  LaunchConfig config;
  config.grid_x = grid_x;
  config.block_x = block_x;
  config.shared_bytes = shared_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.num_attrs = 1;
  return check(api_.cuLaunchKernelEx(&config, function, args, nullptr), "cuLaunchKernelEx");
}

Status CudaDriver::allowDynamicShared(CUfunction function, int bytes) const {
  return check(api_.cuFuncSetAttribute(function, kFuncAttrMaxDynamicSharedSizeBytes, bytes), "cuFuncSetAttribute");
}

Status CudaDriver::attributes(CUfunction function, FunctionAttributes& out) const {
  struct Query {
    int attribute;
    int* value;
  };
  const Query queries[] = {
      {kFuncAttrMaxThreadsPerBlock, &out.max_threads_per_block},
      {kFuncAttrSharedSizeBytes, &out.shared_bytes},
      {kFuncAttrConstSizeBytes, &out.const_bytes},
      {kFuncAttrLocalSizeBytes, &out.local_bytes},
      {kFuncAttrNumRegs, &out.registers},
      {kFuncAttrPtxVersion, &out.ptx_version},
      {kFuncAttrBinaryVersion, &out.binary_version},
  };
  for (const Query& q : queries) {
    Status s = check(api_.cuFuncGetAttribute(q.value, q.attribute, function), "cuFuncGetAttribute");
    if (!s.ok()) return s;
  }
  return Status();
}

// ---- Context -------------------------------------------------------------------------------

Context& Context::operator=(Context&& other) noexcept {
  if (this != &other) {
    reset();
    driver_ = other.driver_;
    context_ = other.context_;
    device_ = other.device_;
    other.context_ = nullptr;
  }
  return *this;
}

Status Context::create(const CudaDriver& driver, int ordinal) {
  reset();
  CUdevice device = 0;
  Status s = driver.check(driver.api().cuDeviceGet(&device, ordinal), "cuDeviceGet");
  if (!s.ok()) return s;
  CUcontext context = nullptr;
  s = driver.check(driver.api().cuCtxCreate(&context, 0, device), "cuCtxCreate_v2");
  if (!s.ok()) return s;
  driver_ = &driver;
  context_ = context;
  device_ = device;
  return Status();
}

Status Context::info(DeviceInfo& out) const {
  if (driver_ == nullptr) return Status::failure(kNotACudaError, "Context::info: no context");
  const CudaDriver::Api& a = driver_->api();
  char name[256] = {};
  Status s = driver_->check(a.cuDeviceGetName(name, sizeof(name) - 1, device_), "cuDeviceGetName");
  if (!s.ok()) return s;
  out.name = name;
  struct Query {
    int attribute;
    int* value;
  };
  const Query queries[] = {
      {kDevAttrComputeCapabilityMajor, &out.cc_major},
      {kDevAttrComputeCapabilityMinor, &out.cc_minor},
      {kDevAttrMultiprocessorCount, &out.multiprocessors},
  };
  for (const Query& q : queries) {
    s = driver_->check(a.cuDeviceGetAttribute(q.value, q.attribute, device_), "cuDeviceGetAttribute");
    if (!s.ok()) return s;
  }
  out.driver_version = driver_->driverVersion();
  return Status();
}

void Context::reset() {
  if (context_ != nullptr) driver_->api().cuCtxDestroy(context_);
  context_ = nullptr;
}

// ---- DeviceBuffer --------------------------------------------------------------------------

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    driver_ = other.driver_;
    ptr_ = other.ptr_;
    bytes_ = other.bytes_;
    allocated_ = other.allocated_;
    other.ptr_ = 0;
    other.bytes_ = other.allocated_ = 0;
  }
  return *this;
}

Status DeviceBuffer::allocate(const CudaDriver& driver, size_t bytes) {
  reset();
  const size_t allocated = bytes < kMinAllocation ? kMinAllocation : bytes;
  CUdeviceptr ptr = 0;
  Status s = driver.check(driver.api().cuMemAlloc(&ptr, allocated), "cuMemAlloc_v2");
  if (!s.ok()) return Status::failure(s.code(), s.message() + " (" + std::to_string(allocated) + " bytes)");
  driver_ = &driver;
  ptr_ = ptr;
  bytes_ = bytes;
  allocated_ = allocated;
  return Status();
}

Status DeviceBuffer::upload(const void* src, size_t bytes) const {
  if (ptr_ == 0 || bytes > bytes_) return Status::failure(kNotACudaError, "DeviceBuffer::upload: out of range");
  if (bytes == 0) return Status();
  return driver_->check(driver_->api().cuMemcpyHtoD(ptr_, src, bytes), "cuMemcpyHtoD_v2");
}

Status DeviceBuffer::download(void* dst, size_t bytes) const {
  if (ptr_ == 0 || bytes > bytes_) return Status::failure(kNotACudaError, "DeviceBuffer::download: out of range");
  if (bytes == 0) return Status();
  return driver_->check(driver_->api().cuMemcpyDtoH(dst, ptr_, bytes), "cuMemcpyDtoH_v2");
}

Status DeviceBuffer::zero() const {
  if (ptr_ == 0) return Status::failure(kNotACudaError, "DeviceBuffer::zero: not allocated");
  return driver_->check(driver_->api().cuMemsetD8(ptr_, 0, allocated_), "cuMemsetD8_v2");
}

void DeviceBuffer::reset() {
  if (ptr_ != 0) driver_->api().cuMemFree(ptr_);
  ptr_ = 0;
  bytes_ = allocated_ = 0;
}

// ---- Module --------------------------------------------------------------------------------

Module& Module::operator=(Module&& other) noexcept {
  if (this != &other) {
    reset();
    driver_ = other.driver_;
    module_ = other.module_;
    info_log_ = std::move(other.info_log_);
    other.module_ = nullptr;
  }
  return *this;
}

Status Module::load(const CudaDriver& driver, const std::string& ptx) {
  reset();
  std::string info(kJitLogBytes, '\0');
  std::string error(kJitLogBytes, '\0');
  int options[] = {kJitInfoLogBuffer, kJitInfoLogBufferSizeBytes, kJitErrorLogBuffer, kJitErrorLogBufferSizeBytes,
                   kJitLogVerbose};
  void* values[] = {info.data(), jitValue(kJitLogBytes), error.data(), jitValue(kJitLogBytes), jitValue(1)};
  CUmodule module = nullptr;
  const CUresult r =
      driver.api().cuModuleLoadDataEx(&module, ptx.c_str(), sizeof(options) / sizeof(options[0]), options, values);
  info_log_ = logText(info);
  if (r != kCudaSuccess) {
    std::string message = "cuModuleLoadDataEx: " + driver.describe(r);
    const std::string log = logText(error);
    if (!log.empty()) message += "\nJIT error log:\n" + log;
    return Status::failure(r, message);
  }
  driver_ = &driver;
  module_ = module;
  return Status();
}

Status Module::function(const std::string& entry, CUfunction& out) const {
  if (module_ == nullptr) return Status::failure(kNotACudaError, "Module::function: no module loaded");
  Status s = driver_->check(driver_->api().cuModuleGetFunction(&out, module_, entry.c_str()), "cuModuleGetFunction");
  if (!s.ok()) return Status::failure(s.code(), s.message() + " (entry " + entry + ")");
  return Status();
}

void Module::reset() {
  if (module_ != nullptr) driver_->api().cuModuleUnload(module_);
  module_ = nullptr;
}

// ---- Event ---------------------------------------------------------------------------------

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    reset();
    driver_ = other.driver_;
    event_ = other.event_;
    other.event_ = nullptr;
  }
  return *this;
}

Status Event::create(const CudaDriver& driver) {
  reset();
  CUevent event = nullptr;
  Status s = driver.check(driver.api().cuEventCreate(&event, 0), "cuEventCreate");
  if (!s.ok()) return s;
  driver_ = &driver;
  event_ = event;
  return Status();
}

Status Event::record(CUstream stream) const {
  if (event_ == nullptr) return Status::failure(kNotACudaError, "Event::record: no event");
  return driver_->check(driver_->api().cuEventRecord(event_, stream), "cuEventRecord");
}

Status Event::synchronize() const {
  if (event_ == nullptr) return Status::failure(kNotACudaError, "Event::synchronize: no event");
  return driver_->check(driver_->api().cuEventSynchronize(event_), "cuEventSynchronize");
}

Status Event::elapsedMs(const Event& start, const Event& stop, float& ms) {
  if (start.event_ == nullptr || stop.event_ == nullptr) {
    return Status::failure(kNotACudaError, "Event::elapsedMs: no event");
  }
  const CudaDriver& driver = *start.driver_;
  return driver.check(driver.api().cuEventElapsedTime(&ms, start.event_, stop.event_), "cuEventElapsedTime");
}

void Event::reset() {
  if (event_ != nullptr) driver_->api().cuEventDestroy(event_);
  event_ = nullptr;
}

}  // namespace kiln::gpu
