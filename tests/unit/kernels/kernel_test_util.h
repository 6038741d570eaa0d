#ifndef NDSERVE_TESTS_UNIT_KERNELS_KERNEL_TEST_UTIL_H_
#define NDSERVE_TESTS_UNIT_KERNELS_KERNEL_TEST_UTIL_H_

// Helpers for kernel tests: host tensors, running one kernel on any device present
// (upload, run through the dispatch table, synchronize, download) and comparing with a
// tolerance. Header-only because the test binary is built from *_test.cc files only.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "kernels/cast_convert.h"
#include "kernels/dispatch.h"
#include "kernels/gpu_resources.h"
#include "kernels/shape_inference.h"
#include "base/status_macros.h"
#include "memory/cuda_allocator.h"
#include "memory/cuda_runtime.h"
#include "memory/device_allocator.h"
#include "memory/device_copy.h"
#include "tests/fixture_case.h"

namespace ndserve::kernels::testing {

// A tensor in host memory, owning its bytes.
struct HostTensor {
  DType dtype = DType::kFp32;
  Shape shape;
  std::vector<uint8_t> bytes;

  TensorDesc desc() const { return {dtype, shape}; }
  int64_t numel() const { return NumElements(shape); }

  template <typename T>
  static HostTensor Of(Shape shape, const std::vector<T>& values, DType dtype = kDTypeOf<T>) {
    HostTensor t{dtype, std::move(shape), {}};
    t.bytes.resize(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
    return t;
  }
  template <typename T>
  std::vector<T> Values() const {
    std::vector<T> v(bytes.size() / sizeof(T));
    if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
    return v;
  }
};

// Deterministic uniform floats in [lo, hi).
inline std::vector<float> RandomFloats(int64_t n, uint32_t seed, float lo = -2.0f,
                                       float hi = 2.0f) {
  std::vector<float> v(n);
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * static_cast<float>((s >> 40) & 0xffffff) / 16777216.0f;
  }
  return v;
}

inline HostTensor RandomTensor(Shape shape, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  return HostTensor::Of<float>(shape, RandomFloats(NumElements(shape), seed, lo, hi));
}

// CPU plus every CUDA device present.
inline std::vector<Device> TestDevices() {
  std::vector<Device> devices = {Device::Cpu()};
  for (int i = 0; i < CudaDeviceCount(); ++i) devices.push_back(Device::Cuda(i));
  return devices;
}

inline std::string DeviceTestName(const ::testing::TestParamInfo<Device>& info) {
  return info.param.is_cuda() ? absl::StrCat("cuda", info.param.ordinal) : "cpu";
}

// The kernels' working space in tests (the engine's comes from the request's scope):
// blocks from the device's raw allocator, all given back by Release, which the runner
// calls once a run's outputs are downloaded (so queued CUDA work has finished with them).
// An optional byte limit makes Allocate fail with RESOURCE_EXHAUSTED, as a full pool
// would. Not thread-safe.
class TestScratch : public ScratchAllocator {
 public:
  TestScratch() = default;
  ~TestScratch() override { Release(); }
  TestScratch(const TestScratch&) = delete;
  TestScratch& operator=(const TestScratch&) = delete;

  void set_allocator(DeviceAllocator* allocator) { allocator_ = allocator; }
  void set_limit(std::size_t bytes) { limit_ = bytes; }

  absl::StatusOr<void*> Allocate(std::size_t bytes) override {
    if (allocator_ == nullptr) return absl::FailedPreconditionError("no scratch allocator");
    if (held_ + bytes > limit_) {
      return absl::ResourceExhaustedError(absl::StrCat("test scratch limit of ", limit_,
                                                       " bytes reached (asked for ", bytes, ")"));
    }
    const std::size_t n = std::max<std::size_t>(bytes, 1);
    NDS_ASSIGN_OR_RETURN(void* p, allocator_->Allocate(n));
    blocks_.push_back({p, n});
    held_ += bytes;
    peak_ = std::max(peak_, held_);
    return p;
  }

  void Release() {
    for (auto& [ptr, bytes] : blocks_) allocator_->Deallocate(ptr, bytes);
    blocks_.clear();
    held_ = 0;
  }
  std::size_t held_bytes() const { return held_; }
  // The most bytes held at once since construction.
  std::size_t peak_bytes() const { return peak_; }

 private:
  DeviceAllocator* allocator_ = nullptr;
  std::size_t limit_ = SIZE_MAX;
  std::size_t held_ = 0, peak_ = 0;
  std::vector<std::pair<void*, std::size_t>> blocks_;
};

// Runs kernels on one device with buffers from that device's raw allocator, and scratch
// (TestScratch) from it too. Not thread-safe.
class DeviceRunner {
  // KernelContext::outputs for kOpDataShape ops: buffers from the runner, kept per output.
  struct RunnerOutputs : OutputAllocator {
    RunnerOutputs(DeviceRunner& r, const std::vector<TensorDesc>& descs)
        : runner(r), dtypes(), views(descs.size()) {
      for (const TensorDesc& d : descs) dtypes.push_back(d.dtype);
    }
    absl::StatusOr<TensorView> Allocate(int index, ShapeSpan shape) override {
      NDS_ASSIGN_OR_RETURN(TensorView v,
                           runner.Allocate(TensorDesc{dtypes.at(index), Shape(shape.begin(), shape.end())}));
      views.at(index) = v;
      return v;
    }
    DeviceRunner& runner;
    std::vector<DType> dtypes;
    std::vector<std::optional<TensorView>> views;
  };

 public:
  explicit DeviceRunner(Device device) : device_(device) {
    auto alloc = MakeDeviceAllocator(device);
    EXPECT_TRUE(alloc.ok()) << alloc.status();
    if (alloc.ok()) allocator_ = *std::move(alloc);
    scratch_.set_allocator(allocator_.get());
    if (device.is_cuda()) {
      auto gpu = GpuResources::Create(device);
      EXPECT_TRUE(gpu.ok()) << gpu.status();
      if (gpu.ok()) gpu_ = *std::move(gpu);
    }
  }
  ~DeviceRunner() {
    scratch_.Release();
    for (auto& [ptr, bytes] : buffers_) allocator_->Deallocate(ptr, bytes);
  }

  Device device() const { return device_; }
  KernelContext context() {
    KernelContext ctx = gpu_ ? gpu_->context() : KernelContext::Cpu();
    ctx.scratch = &scratch_;
    ctx.packed_weight = packed_weight_;
    return ctx;
  }
  // What context() hands the kernel as KernelContext::packed_weight (borrowed).
  void set_packed_weight(const cpu::PackedMatrix* w) { packed_weight_ = w; }
  TestScratch& scratch() { return scratch_; }

  // A view over a fresh buffer holding `t` (or uninitialized, for outputs).
  absl::StatusOr<TensorView> Upload(const HostTensor& t) {
    NDS_ASSIGN_OR_RETURN(TensorView v, Allocate(t.desc()));
    NDS_RETURN_IF_ERROR(Copy(v.data, t.bytes.data(), t.bytes.size(), /*to_device=*/true));
    return v;
  }
  absl::StatusOr<TensorView> Allocate(const TensorDesc& desc) {
    TensorView v{nullptr, desc.dtype, desc.shape, device_};
    const std::size_t bytes = v.nbytes();
    if (bytes > 0) {
      NDS_ASSIGN_OR_RETURN(v.data, allocator_->Allocate(bytes));
      buffers_.push_back({v.data, bytes});
    }
    return v;
  }
  absl::StatusOr<HostTensor> Download(const TensorView& v) {
    if (gpu_) NDS_RETURN_IF_ERROR(gpu_->Synchronize());
    HostTensor t{v.dtype, v.shape, std::vector<uint8_t>(v.nbytes())};
    NDS_RETURN_IF_ERROR(Copy(t.bytes.data(), v.data, t.bytes.size(), /*to_device=*/false));
    return t;
  }

  // Uploads inputs, allocates the first `num_outputs` outputs InferOutputs gives, runs the
  // kernel through the dispatch table and downloads the outputs.
  absl::StatusOr<std::vector<HostTensor>> Run(OpKind op, const std::vector<HostTensor>& inputs,
                                              const OpAttrs& attrs, int num_outputs = 1) {
    std::vector<TensorDesc> descs;
    for (const HostTensor& t : inputs) descs.push_back(t.desc());
    NDS_ASSIGN_OR_RETURN(std::vector<TensorDesc> out_descs, InferOutputs(op, descs, attrs));
    out_descs.resize(std::min<std::size_t>(out_descs.size(), num_outputs));
    return RunWithOutputs(op, inputs, out_descs, attrs);
  }

  // As Run, with caller-chosen output descriptors (for error tests).
  absl::StatusOr<std::vector<HostTensor>> RunWithOutputs(OpKind op,
                                                         const std::vector<HostTensor>& inputs,
                                                         const std::vector<TensorDesc>& out_descs,
                                                         const OpAttrs& attrs) {
    std::vector<TensorView> in_views, out_views;
    for (const HostTensor& t : inputs) {
      NDS_ASSIGN_OR_RETURN(TensorView v, Upload(t));
      in_views.push_back(v);
    }
    // An op whose output dims depend on the data allocates its outputs as it runs.
    const bool data_shape = GetOpInfo(op).data_shape;
    RunnerOutputs late(*this, out_descs);
    if (!data_shape) {
      for (const TensorDesc& d : out_descs) {
        NDS_ASSIGN_OR_RETURN(TensorView v, Allocate(d));
        out_views.push_back(v);
      }
    }
    KernelContext ctx = context();
    if (data_shape) ctx.outputs = &late;
    absl::Status run = RunKernel(op, ctx, in_views, out_views, attrs);
    if (data_shape && run.ok()) {
      for (std::size_t i = 0; i < late.views.size(); ++i) {
        if (!late.views[i].has_value()) {
          return absl::InternalError(absl::StrCat("output ", i, " was never allocated"));
        }
        out_views.push_back(*late.views[i]);
      }
    }
    if (gpu_ && !run.ok()) gpu_->Synchronize().IgnoreError();  // before scratch goes back
    if (!run.ok()) {
      scratch_.Release();
      return run;
    }
    std::vector<HostTensor> out;
    for (const TensorView& v : out_views) {
      NDS_ASSIGN_OR_RETURN(HostTensor t, Download(v));
      out.push_back(std::move(t));
    }
    if (gpu_) NDS_RETURN_IF_ERROR(gpu_->Synchronize());
    scratch_.Release();
    return out;
  }

 private:
  absl::Status Copy(void* dst, const void* src, std::size_t bytes, bool to_device) {
    if (bytes == 0) return absl::OkStatus();
    if (!device_.is_cuda()) {
      std::memcpy(dst, src, bytes);
      return absl::OkStatus();
    }
    // memory/device_copy.h finishes an upload before returning: a bare cudaMemcpy from
    // pageable memory may return before the bytes land, and the kernels' non-blocking
    // stream does not wait for the legacy stream it ran on.
    return to_device ? CopyHostToDevice(device_, dst, src, bytes)
                     : CopyDeviceToHost(device_, dst, src, bytes);
  }

  Device device_;
  const cpu::PackedMatrix* packed_weight_ = nullptr;
  std::unique_ptr<DeviceAllocator> allocator_;
  std::unique_ptr<GpuResources> gpu_;
  std::vector<std::pair<void*, std::size_t>> buffers_;
  TestScratch scratch_;  // after allocator_: released before the allocator goes
};

// Element i of a host tensor as double (FP16/BF16 through float, BOOL as 0/1).
inline double ElementAsDouble(const HostTensor& t, int64_t i) {
  const uint8_t* p = t.bytes.data();
  switch (t.dtype) {
    case DType::kBool:
      return p[i] != 0;
    case DType::kUint8:
      return p[i];
    case DType::kInt8:
      return reinterpret_cast<const int8_t*>(p)[i];
    case DType::kUint16:
      return reinterpret_cast<const uint16_t*>(p)[i];
    case DType::kInt16:
      return reinterpret_cast<const int16_t*>(p)[i];
    case DType::kUint32:
      return reinterpret_cast<const uint32_t*>(p)[i];
    case DType::kInt32:
      return reinterpret_cast<const int32_t*>(p)[i];
    case DType::kUint64:
      return static_cast<double>(reinterpret_cast<const uint64_t*>(p)[i]);
    case DType::kInt64:
      return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
    case DType::kFp16:
      return HalfToFloat(reinterpret_cast<const Half*>(p)[i]);
    case DType::kBf16:
      return BFloat16ToFloat(reinterpret_cast<const BFloat16*>(p)[i]);
    case DType::kFp32:
      return reinterpret_cast<const float*>(p)[i];
    case DType::kFp64:
      return reinterpret_cast<const double*>(p)[i];
    case DType::kBytes:
      break;
  }
  return std::nan("");
}

// Same dtype and shape, and every element within atol + rtol * |want| (NaN matches NaN,
// infinities must be equal). Integer types compare exactly as int64 to avoid rounding.
inline ::testing::AssertionResult AllClose(const HostTensor& got, const HostTensor& want,
                                           double atol, double rtol) {
  if (!(got.desc() == want.desc())) {
    return ::testing::AssertionFailure()
           << "got " << got.desc().ToString() << ", want " << want.desc().ToString();
  }
  const bool exact_int = want.dtype == DType::kInt64 || want.dtype == DType::kUint64;
  int failures = 0;
  std::string detail;
  for (int64_t i = 0; i < want.numel(); ++i) {
    bool ok;
    double g, w;
    if (exact_int) {
      int64_t gi, wi;
      std::memcpy(&gi, got.bytes.data() + i * 8, 8);
      std::memcpy(&wi, want.bytes.data() + i * 8, 8);
      ok = gi == wi;
      g = static_cast<double>(gi);
      w = static_cast<double>(wi);
    } else {
      g = ElementAsDouble(got, i);
      w = ElementAsDouble(want, i);
      ok = (std::isnan(g) && std::isnan(w)) || g == w ||
           (std::isfinite(w) && std::abs(g - w) <= atol + rtol * std::abs(w));
    }
    if (!ok && failures++ < 5) {
      absl::StrAppendFormat(&detail, "\n  [%d] got %.9g want %.9g (diff %.3g)", i, g, w, g - w);
    }
  }
  if (failures > 0) {
    return ::testing::AssertionFailure()
           << failures << " of " << want.numel() << " elements differ (atol " << atol << ", rtol "
           << rtol << "):" << detail;
  }
  return ::testing::AssertionSuccess();
}

// The repository root: $NDSERVE_SOURCE_DIR (set by ctest), else the nearest ancestor of
// the test binary or the working directory that has tests/fixtures.
inline std::filesystem::path SourceDir() { return fixtures::SourceDir(); }

// Runs `op` on `device` and returns its outputs; on a CUDA device the CPU runs it too and
// the two must agree (AllClose with atol, rtol). A failed run is a test failure and
// returns no outputs.
inline std::vector<HostTensor> RunAndCrossCheck(Device device, OpKind op,
                                                const std::vector<HostTensor>& inputs,
                                                const OpAttrs& attrs, double atol, double rtol,
                                                int num_outputs = 1) {
  DeviceRunner runner(device);
  auto got = runner.Run(op, inputs, attrs, num_outputs);
  EXPECT_TRUE(got.ok()) << got.status();
  if (!got.ok()) return {};
  if (device.is_cuda()) {
    DeviceRunner cpu(Device::Cpu());
    auto want = cpu.Run(op, inputs, attrs, num_outputs);
    EXPECT_TRUE(want.ok()) << want.status();
    for (std::size_t i = 0; want.ok() && i < want->size(); ++i) {
      EXPECT_TRUE(AllClose((*got)[i], (*want)[i], atol, rtol)) << "CUDA vs CPU, output " << i;
    }
  }
  return *std::move(got);
}

}  // namespace ndserve::kernels::testing

#endif  // NDSERVE_TESTS_UNIT_KERNELS_KERNEL_TEST_UTIL_H_
