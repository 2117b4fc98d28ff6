// Health steps run before and after the timed set: is the device answering promptly and correctly?
//   empty_sync   cuCtxSynchronize with nothing pending            (limit 1000 us)
//   copy_1mib    1 MiB host -> device -> host, bytes equal         (limit 20000 us)
//   tiny_kernel  a hand-written PTX kernel on 1024 elements, checked (limit 20000 us)
// Each step takes a few samples; its time is their median, and the limit applies to the median.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "replay.h"

namespace kiln::replay {
namespace {

using gpu::Status;
using Clock = std::chrono::steady_clock;

constexpr int kSamples = 3;
constexpr double kSyncLimitUs = 1000;
constexpr double kCopyLimitUs = 20000;
constexpr double kKernelLimitUs = 20000;
constexpr size_t kCopyBytes = size_t{1} << 20;
constexpr unsigned kTinyElements = 1024;
constexpr unsigned kTinyBlock = 256;

// out[i] = 2 * i + 1 (as u32) for i < n; one thread per element. Loaded with the header
// ".version 7.0 / .target sm_70"; should a driver refuse that old target, with ".version 7.8 /
// .target sm_90" (the step's message says so).
constexpr const char* kTinyHeader = ".version 7.0\n.target sm_70\n.address_size 64\n";
constexpr const char* kTinyHeaderFallback = ".version 7.8\n.target sm_90\n.address_size 64\n";
constexpr const char* kTinyBody = R"(
.visible .entry kiln_health_fill(
	.param .u64 kiln_health_fill_out,
	.param .u32 kiln_health_fill_n
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<7>;
	.reg .b64 	%rd<5>;

	ld.param.u64 	%rd1, [kiln_health_fill_out];
	ld.param.u32 	%r1, [kiln_health_fill_n];
	mov.u32 	%r2, %ctaid.x;
	mov.u32 	%r3, %ntid.x;
	mov.u32 	%r4, %tid.x;
	mad.lo.s32 	%r5, %r2, %r3, %r4;
	setp.ge.u32 	%p1, %r5, %r1;
	@%p1 bra 	DONE;
	cvta.to.global.u64 	%rd2, %rd1;
	mul.wide.u32 	%rd3, %r5, 4;
	add.s64 	%rd4, %rd2, %rd3;
	shl.b32 	%r6, %r5, 1;
	add.s32 	%r6, %r6, 1;
	st.global.u32 	[%rd4], %r6;
DONE:
	ret;
}
)";

double usSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

// Sets pass/us from the samples and the limit; `what` describes a passing step.
void finish(HealthStep& step, const std::string& what) {
  step.us = median(step.samples_us);
  step.pass = step.us <= step.limit_us;
  char buffer[160];
  if (step.pass) {
    std::snprintf(buffer, sizeof(buffer), "%s: median %.1f us (limit %.0f us)", what.c_str(), step.us, step.limit_us);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%s: median %.1f us is over the limit of %.0f us", what.c_str(), step.us,
                  step.limit_us);
  }
  step.message = buffer;
}

HealthStep fail(HealthStep step, const std::string& message) {
  step.pass = false;
  step.message = message;
  return step;
}

HealthStep emptySync(const gpu::CudaDriver& driver) {
  HealthStep step;
  step.name = "empty_sync";
  step.limit_us = kSyncLimitUs;
  if (Status s = driver.synchronize(); !s.ok()) return fail(step, s.message());  // drain pending work
  for (int i = 0; i < kSamples; ++i) {
    const Clock::time_point t0 = Clock::now();
    Status s = driver.synchronize();
    step.samples_us.push_back(usSince(t0));
    if (!s.ok()) return fail(step, s.message());
  }
  finish(step, "cuCtxSynchronize with nothing pending");
  return step;
}

HealthStep copyRoundTrip(const gpu::CudaDriver& driver) {
  HealthStep step;
  step.name = "copy_1mib";
  step.limit_us = kCopyLimitUs;
  std::vector<uint32_t> src(kCopyBytes / 4), dst(kCopyBytes / 4);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint32_t>(i) * 2654435761u ^ 0x5bd1e995u;
  gpu::DeviceBuffer buffer;
  if (Status s = buffer.allocate(driver, kCopyBytes); !s.ok()) return fail(step, s.message());
  for (int i = 0; i < kSamples; ++i) {
    std::fill(dst.begin(), dst.end(), 0u);
    const Clock::time_point t0 = Clock::now();
    Status s = buffer.upload(src.data(), kCopyBytes);
    if (s.ok()) s = buffer.download(dst.data(), kCopyBytes);
    step.samples_us.push_back(usSince(t0));
    if (!s.ok()) return fail(step, s.message());
    if (dst != src) return fail(step, "the bytes read back differ from the bytes written");
  }
  finish(step, "1 MiB host->device->host, bytes equal");
  return step;
}

HealthStep tinyKernel(const gpu::CudaDriver& driver) {
  HealthStep step;
  step.name = "tiny_kernel";
  step.limit_us = kKernelLimitUs;
  gpu::Module module;
  std::string note;
  if (Status s = module.load(driver, std::string(kTinyHeader) + kTinyBody); !s.ok()) {
    if (gpu::isContextLost(s.code())) return fail(step, s.message());
    const Status retry = module.load(driver, std::string(kTinyHeaderFallback) + kTinyBody);
    if (!retry.ok()) return fail(step, s.message() + "; with .target sm_90: " + retry.message());
    note = " (the sm_70 PTX was refused: " + s.message().substr(0, s.message().find('\n')) + "; ran the sm_90 one)";
  }
  gpu::CUfunction function = nullptr;
  if (Status s = module.function("kiln_health_fill", function); !s.ok()) return fail(step, s.message());
  gpu::DeviceBuffer buffer;
  if (Status s = buffer.allocate(driver, kTinyElements * 4); !s.ok()) return fail(step, s.message());
  std::vector<uint32_t> got(kTinyElements);
  for (int i = 0; i < kSamples; ++i) {
    Status s = buffer.zero();
    if (s.ok()) s = driver.synchronize();
    if (!s.ok()) return fail(step, s.message());
    gpu::CUdeviceptr out = buffer.ptr();
    unsigned n = kTinyElements;
    void* args[] = {&out, &n};
    const Clock::time_point t0 = Clock::now();
    s = driver.launch(function, kTinyElements / kTinyBlock, kTinyBlock, args);
    if (s.ok()) s = driver.synchronize();
    step.samples_us.push_back(usSince(t0));
    if (s.ok()) s = buffer.download(got.data(), kTinyElements * 4);
    if (!s.ok()) return fail(step, s.message());
    for (unsigned e = 0; e < kTinyElements; ++e) {
      if (got[e] != 2 * e + 1) {
        return fail(step, "element " + std::to_string(e) + " is " + std::to_string(got[e]) + ", expected " +
                              std::to_string(2 * e + 1));
      }
    }
  }
  finish(step, "launch + sync of out[i] = 2i+1 on 1024 elements, all checked" + note);
  return step;
}

}  // namespace

Health runHealth(const gpu::CudaDriver& driver) {
  Health health;
  health.steps.push_back(emptySync(driver));
  health.steps.push_back(copyRoundTrip(driver));
  health.steps.push_back(tinyKernel(driver));
  health.pass = true;
  for (const HealthStep& step : health.steps) health.pass = health.pass && step.pass;
  return health;
}

}  // namespace kiln::replay
