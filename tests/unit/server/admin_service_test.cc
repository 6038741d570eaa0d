#include "server/admin_service.h"

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/training_scopes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/device_pools.h"
#include "memory/memory_system.h"
#include "memory/nd_manager.h"
#include "memory/pool.h"
#include "proto/admin.grpc.pb.h"

namespace ndserve {
namespace {

using ::ndserve::admin::v1::DebugDumpRequest;
using ::ndserve::admin::v1::DebugDumpResponse;
using ::ndserve::admin::v1::GetMemoryStatusRequest;
using ::ndserve::admin::v1::MemoryAdmin;
using ::ndserve::admin::v1::MemoryStatus;
using ::ndserve::admin::v1::PoolStatus;
using ::ndserve::admin::v1::ReclaimRequest;
using ::ndserve::admin::v1::ReclaimResponse;
using ::testing::HasSubstr;

// An AdminServiceImpl over a memory system of its own with a CPU pool, on an in-process
// server at 127.0.0.1:<any>.
class AdminServiceTest : public ::testing::Test {
 protected:
  void StartServer(std::string token = {}, ModelMemorySource models = {}) {
    MemoryConfig config;
    config.debug_level = 1;
    memory_ = std::make_unique<MemorySystem>(config);
    absl::StatusOr<Pool*> pool = memory_->GetPool(Device::Cpu());
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = *pool;
    service_ = std::make_unique<AdminServiceImpl>(memory_.get(), AdminAuth(std::move(token)),
                                                  std::move(models));
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port, 0);
    stub_ = MemoryAdmin::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    for (const Block& b : live_) pool_->Free(b);
    if (server_) server_->Shutdown();
  }

  // Three live blocks and two freed ones, so that allocated, cached and outstanding are
  // all non-zero.
  void MakeTraffic() {
    for (std::size_t bytes : {4096u, 65536u, 1u << 20}) {
      absl::StatusOr<Block> b = pool_->Allocate(bytes, "test-manager");
      ASSERT_TRUE(b.ok());
      live_.push_back(*b);
    }
    for (std::size_t bytes : {8192u, 2u << 20}) {
      absl::StatusOr<Block> b = pool_->Allocate(bytes);
      ASSERT_TRUE(b.ok());
      pool_->Free(*b);
    }
  }

  grpc::Status GetStatus(const GetMemoryStatusRequest& request, MemoryStatus* response,
                         const std::string& authorization = {}) {
    grpc::ClientContext context;
    if (!authorization.empty()) context.AddMetadata("authorization", authorization);
    return stub_->GetMemoryStatus(&context, request, response);
  }

  std::unique_ptr<MemorySystem> memory_;
  Pool* pool_ = nullptr;
  std::unique_ptr<AdminServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MemoryAdmin::Stub> stub_;
  std::vector<Block> live_;
};

TEST_F(AdminServiceTest, MemoryStatusFieldsAddUp) {
  StartServer();
  MakeTraffic();
  GetMemoryStatusRequest request;
  request.set_device_id(-1);
  MemoryStatus status;
  grpc::Status rpc = GetStatus(request, &status);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  ASSERT_EQ(status.pools_size(), 1);
  const PoolStatus& p = status.pools(0);
  const PoolStats s = pool_->Stats();
  EXPECT_EQ(p.device(), "cpu:0");
  EXPECT_EQ(p.pool(), "binned");
  EXPECT_GT(p.allocated_bytes(), 0u);
  EXPECT_GT(p.cached_bytes(), 0u);
  EXPECT_EQ(p.allocated_bytes() + p.cached_bytes(), p.reserved_bytes());
  EXPECT_EQ(p.allocated_bytes(), s.allocated_bytes);
  EXPECT_EQ(p.cached_bytes(), s.cached_bytes);
  EXPECT_EQ(p.limit_bytes(), 0u);  // no limit
  EXPECT_GE(p.peak_allocated_bytes(), p.allocated_bytes());
  EXPECT_GT(p.device_total_bytes(), 0u);
  EXPECT_EQ(p.alloc_count(), 5u);
  EXPECT_EQ(p.cache_hits() + p.cache_misses(), p.alloc_count());
  EXPECT_EQ(p.outstanding_allocations(), 3u);
  EXPECT_EQ(p.outstanding_size(), 0);  // not asked for
  EXPECT_THAT(status.text(), HasSubstr("Pool 'binned' on cpu:0"));
  EXPECT_THAT(status.text(), HasSubstr("Effective device memory usage"));
}

TEST_F(AdminServiceTest, IncludeOutstandingListsLiveBlocksWithOwners) {
  StartServer();
  MakeTraffic();
  GetMemoryStatusRequest request;
  request.set_device_id(0);
  request.set_include_outstanding(true);
  MemoryStatus status;
  ASSERT_TRUE(GetStatus(request, &status).ok());
  ASSERT_EQ(status.pools_size(), 1);
  const PoolStatus& p = status.pools(0);
  ASSERT_EQ(p.outstanding_size(), 3);
  std::uint64_t bytes = 0;
  for (const auto& o : p.outstanding()) {
    EXPECT_EQ(o.manager(), "test-manager");
    EXPECT_NE(o.address(), 0u);
    bytes += o.bytes();
  }
  EXPECT_EQ(bytes, p.allocated_bytes());
  EXPECT_THAT(status.text(), HasSubstr("Outstanding allocation of"));
  EXPECT_THAT(status.text(), HasSubstr("test-manager"));
}

TEST_F(AdminServiceTest, UnknownOrInvalidDevice) {
  StartServer();
  GetMemoryStatusRequest request;
  MemoryStatus status;
  request.set_device_id(7);
  EXPECT_EQ(GetStatus(request, &status).error_code(), grpc::StatusCode::NOT_FOUND);
  request.set_device_id(-2);
  EXPECT_EQ(GetStatus(request, &status).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // A device label overrides the ordinal: one device, or an error naming it.
  request.set_device("tpu:0");
  EXPECT_EQ(GetStatus(request, &status).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  request.set_device("cuda_host:0");
  grpc::Status pinned = GetStatus(request, &status);
  EXPECT_EQ(pinned.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(pinned.error_message(), HasSubstr("cuda_host:0"));
  request.set_device("cpu:0");
  ASSERT_TRUE(GetStatus(request, &status).ok());
  ASSERT_EQ(status.pools_size(), 1);
  EXPECT_EQ(status.pools(0).device(), "cpu:0");
}

TEST_F(AdminServiceTest, ReclaimReturnsTheCachedBytes) {
  StartServer();
  MakeTraffic();
  const PoolStats before = pool_->Stats();
  ASSERT_GT(before.cached_bytes, 0u);

  ReclaimRequest request;
  request.set_device_id(-1);
  request.set_target_bytes(0);
  ReclaimResponse response;
  grpc::ClientContext context;
  grpc::Status rpc = stub_->Reclaim(&context, request, &response);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  EXPECT_EQ(response.reclaimed_bytes(), before.cached_bytes);
  ASSERT_EQ(response.pools_size(), 1);
  EXPECT_EQ(response.pools(0).cached_bytes(), 0u);
  EXPECT_EQ(response.pools(0).allocated_bytes(), before.allocated_bytes);
  EXPECT_EQ(response.pools(0).reclaimed_bytes_total(), before.cached_bytes);

  const PoolStats after = pool_->Stats();
  EXPECT_EQ(after.cached_bytes, 0u);
  EXPECT_EQ(after.reclaimed_bytes_admin, before.cached_bytes);
  EXPECT_EQ(after.reclaimed_bytes_pressure, 0u);

  // Nothing left to give back.
  grpc::ClientContext again;
  ASSERT_TRUE(stub_->Reclaim(&again, request, &response).ok());
  EXPECT_EQ(response.reclaimed_bytes(), 0u);
}

TEST_F(AdminServiceTest, TokenRule) {
  StartServer("s3cret-token");
  GetMemoryStatusRequest request;
  request.set_device_id(-1);
  MemoryStatus status;

  grpc::Status none = GetStatus(request, &status);
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GetStatus(request, &status, "Bearer wrong").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GetStatus(request, &status, "Bearer s3cret-toke").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GetStatus(request, &status, "Basic s3cret-token").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GetStatus(request, &status, "s3cret-token").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::Status ok = GetStatus(request, &status, "Bearer s3cret-token");
  EXPECT_TRUE(ok.ok()) << ok.error_message();

  // Every method checks, not only GetMemoryStatus.
  ReclaimRequest reclaim;
  ReclaimResponse reclaimed;
  grpc::ClientContext c1;
  EXPECT_EQ(stub_->Reclaim(&c1, reclaim, &reclaimed).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  DebugDumpRequest dump;
  DebugDumpResponse dumped;
  grpc::ClientContext c2;
  EXPECT_EQ(stub_->DebugDump(&c2, dump, &dumped).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  ndserve::admin::v1::GetMemorySnapshotRequest snap;
  ndserve::admin::v1::MemorySnapshot snapped;
  grpc::ClientContext c3;
  EXPECT_EQ(stub_->GetMemorySnapshot(&c3, snap, &snapped).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext c4;
  c4.AddMetadata("authorization", "Bearer s3cret-token");
  EXPECT_TRUE(stub_->GetMemorySnapshot(&c4, snap, &snapped).ok());
}

TEST_F(AdminServiceTest, DebugDumpShowsTheManagerTree) {
  StartServer();
  absl::StatusOr<std::shared_ptr<NDManager>> model =
      memory_->NewBaseManager(Device::Cpu(), ManagerLevel::kModel, "model:admin-test/1");
  ASSERT_TRUE(model.ok()) << model.status();
  const std::int64_t shape[] = {256};
  ASSERT_TRUE((*model)->Zeros(shape, DType::kFp32).ok());
  (*model)->Cap();
  absl::StatusOr<std::shared_ptr<NDManager>> context =
      (*model)->NewSubManager(ManagerLevel::kContext, "ctx:admin-test");
  ASSERT_TRUE(context.ok());

  DebugDumpRequest request;
  DebugDumpResponse response;
  grpc::ClientContext c1;
  ASSERT_TRUE(stub_->DebugDump(&c1, request, &response).ok());
  EXPECT_EQ(response.root().name(), "process");
  const ndserve::admin::v1::ManagerNode* found = nullptr;
  for (const auto& system : response.root().children()) {
    for (const auto& child : system.children()) {
      if (child.name() == "model:admin-test/1") found = &child;
    }
  }
  ASSERT_NE(found, nullptr) << response.text();
  EXPECT_TRUE(found->capped());
  EXPECT_EQ(found->resource_count(), 1u);
  EXPECT_EQ(found->bytes(), 1024u);
  EXPECT_EQ(found->device(), "cpu:0");
  ASSERT_EQ(found->children_size(), 1);
  EXPECT_EQ(found->children(0).name(), "ctx:admin-test");
  EXPECT_THAT(response.text(), HasSubstr("  model:admin-test/1 (uid="));
  EXPECT_THAT(response.text(), HasSubstr("    ctx:admin-test (uid="));

  // Depth 1: the model, not its context.
  request.set_max_depth(1);
  grpc::ClientContext c2;
  ASSERT_TRUE(stub_->DebugDump(&c2, request, &response).ok());
  EXPECT_THAT(response.text(), HasSubstr("model:admin-test/1"));
  EXPECT_THAT(response.text(), ::testing::Not(HasSubstr("ctx:admin-test")));
  EXPECT_THAT(response.text(), HasSubstr("(1 sub-managers not shown)"));

  request.set_max_depth(-1);
  grpc::ClientContext c3;
  EXPECT_EQ(stub_->DebugDump(&c3, request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE((*model)->Close().ok());
}

// What a training session holds is visible to an operator (docs/design.md §2.1): its
// trainer manager, the running step's batch manager and an uploaded batch carry their
// level and the session id, in DebugDump's tree and text and in GetMemorySnapshot's tree.
TEST_F(AdminServiceTest, DumpsLabelTrainerAndBatchScopesWithTheirSession) {
  StartServer();
  std::shared_ptr<NDManager> model =
      *memory_->NewBaseManager(Device::Cpu(), ManagerLevel::kModel, "model:trained/1");
  absl::StatusOr<std::shared_ptr<engine::TrainerScope>> trainer =
      engine::TrainerScope::Open(model, "sess-42");
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  const std::int64_t shape[] = {64};
  ASSERT_TRUE((*trainer)->Zeros(shape, DType::kFp32).ok());
  absl::StatusOr<std::shared_ptr<NDManager>> uploaded =
      (*trainer)->manager()->NewSubManager(ManagerLevel::kBatch, "batch-data/0");
  ASSERT_TRUE(uploaded.ok());
  absl::StatusOr<engine::TrainingStep> step = (*trainer)->BeginStep();
  ASSERT_TRUE(step.ok()) << step.status();

  // Checks the model's subtree as either RPC returns it.
  auto check = [](const ndserve::admin::v1::ManagerNode& root, const std::string& text) {
    const ndserve::admin::v1::ManagerNode* found = nullptr;
    for (const auto& system : root.children()) {
      EXPECT_EQ(system.level(), "system");
      for (const auto& child : system.children()) {
        if (child.name() == "model:trained/1") found = &child;
      }
    }
    ASSERT_NE(found, nullptr) << text;
    EXPECT_EQ(found->level(), "model");
    EXPECT_EQ(found->training_session(), "");
    ASSERT_EQ(found->children_size(), 1) << text;
    const auto& t = found->children(0);
    EXPECT_EQ(t.name(), "trainer/sess-42");
    EXPECT_EQ(t.level(), "trainer");
    EXPECT_EQ(t.training_session(), "sess-42");
    EXPECT_EQ(t.bytes(), 256u);
    ASSERT_EQ(t.children_size(), 2) << text;
    for (const auto& batch : t.children()) {
      EXPECT_EQ(batch.level(), "batch") << batch.name();
      EXPECT_EQ(batch.training_session(), "sess-42") << batch.name();
    }
  };
  DebugDumpRequest request;
  DebugDumpResponse response;
  grpc::ClientContext c1;
  ASSERT_TRUE(stub_->DebugDump(&c1, request, &response).ok());
  check(response.root(), response.text());
  EXPECT_THAT(response.text(), HasSubstr("trainer/sess-42 (uid="));
  EXPECT_THAT(response.text(), HasSubstr("level=trainer device=cpu:0 session=sess-42"));
  EXPECT_THAT(response.text(), HasSubstr("level=batch device=cpu:0 session=sess-42"));
  EXPECT_THAT(response.text(), ::testing::Not(HasSubstr("level=model device=cpu:0 session=")));

  ndserve::admin::v1::GetMemorySnapshotRequest snap;
  snap.set_device_id(-1);
  ndserve::admin::v1::MemorySnapshot snapped;
  grpc::ClientContext c2;
  ASSERT_TRUE(stub_->GetMemorySnapshot(&c2, snap, &snapped).ok());
  check(snapped.root(), snapped.root().DebugString());

  ASSERT_TRUE(step->End().ok());
  ASSERT_TRUE(model->Close().ok());
}

TEST_F(AdminServiceTest, MemorySnapshotListsEveryBlockWithItsOwner) {
  StartServer();
  MakeTraffic();  // blocks on the pool directly: live ones without an owner
  absl::StatusOr<std::shared_ptr<NDManager>> model =
      memory_->NewBaseManager(Device::Cpu(), ManagerLevel::kModel, "model/snap:1");
  ASSERT_TRUE(model.ok()) << model.status();
  const std::int64_t shape[] = {1000};
  ASSERT_TRUE((*model)->Zeros(shape, DType::kFp32, "weights").ok());

  ndserve::admin::v1::GetMemorySnapshotRequest request;
  request.set_device_id(-1);
  ndserve::admin::v1::MemorySnapshot response;
  grpc::ClientContext c1;
  ASSERT_TRUE(stub_->GetMemorySnapshot(&c1, request, &response).ok());
  ASSERT_EQ(response.pools_size(), 1);
  const auto& pool = response.pools(0);
  EXPECT_EQ(pool.status().device(), "cpu:0");
  std::uint64_t cached = 0;
  int owned = 0;
  for (const auto& segment : pool.segments()) {
    for (const auto& block : segment.blocks()) {
      if (block.state() == "cached") cached += block.bytes();
      if (block.owner().empty()) continue;
      ++owned;
      EXPECT_EQ(block.model(), "model/snap:1");
      EXPECT_EQ(block.array(), "weights");
      EXPECT_EQ(block.requested_bytes(), 4000u);
      EXPECT_EQ(block.state(), "allocated");
      EXPECT_EQ(segment.address() + block.offset() != 0, true);
    }
  }
  EXPECT_EQ(owned, 1);
  EXPECT_EQ(cached, pool.status().cached_bytes());
  EXPECT_GT(cached, 0u);
  // The tree comes along, with rounded bytes.
  bool found = false;
  for (const auto& system : response.root().children()) {
    for (const auto& child : system.children()) {
      if (child.name() != "model/snap:1") continue;
      found = true;
      EXPECT_EQ(child.bytes(), 4000u);
      EXPECT_EQ(child.block_bytes(), 4096u);  // the binned pool's class
    }
  }
  EXPECT_TRUE(found);

  request.set_device_id(-2);
  grpc::ClientContext c2;
  EXPECT_EQ(stub_->GetMemorySnapshot(&c2, request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE((*model)->Close().ok());
}

TEST_F(AdminServiceTest, MemoryStatusListsPerModelMemory) {
  StartServer({}, [] {
    return std::vector<ModelMemorySample>{{"mlp", "1", "cpu:0", "parameters", 4096},
                                          {"gpu-model", "2", "cuda:1", "parameters", 1}};
  });
  GetMemoryStatusRequest request;
  request.set_device_id(-1);
  MemoryStatus status;
  ASSERT_TRUE(GetStatus(request, &status).ok());
  // Only rows on the selected pools' devices (here the one CPU pool).
  ASSERT_EQ(status.models_size(), 1);
  EXPECT_EQ(status.models(0).model(), "mlp");
  EXPECT_EQ(status.models(0).version(), "1");
  EXPECT_EQ(status.models(0).device(), "cpu:0");
  EXPECT_EQ(status.models(0).kind(), "parameters");
  EXPECT_EQ(status.models(0).bytes(), 4096u);
  EXPECT_THAT(status.text(), HasSubstr("Model 'mlp' version 1 on cpu:0: 4.000 KiB parameters"));
}

TEST(AdminAuthTest, ConstantTimeEquals) {
  EXPECT_TRUE(AdminAuth::ConstantTimeEquals("", ""));
  EXPECT_TRUE(AdminAuth::ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(AdminAuth::ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(AdminAuth::ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(AdminAuth::ConstantTimeEquals("abcd", "abc"));
  EXPECT_FALSE(AdminAuth::ConstantTimeEquals("", "a"));
}

TEST(AdminAuthTest, HeaderRule) {
  const AdminAuth open;
  EXPECT_TRUE(open.CheckHeader("").ok());
  const AdminAuth auth("tok");
  EXPECT_TRUE(auth.CheckHeader("Bearer tok").ok());
  EXPECT_TRUE(auth.CheckHeader("bearer tok").ok());
  EXPECT_EQ(auth.CheckHeader("").code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.CheckHeader("Bearer").code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.CheckHeader("Bearer ").code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.CheckHeader("Bearer tok2").code(), absl::StatusCode::kUnauthenticated);
  // The error never echoes what was presented.
  EXPECT_THAT(auth.CheckHeader("Bearer guess").message(), ::testing::Not(HasSubstr("guess")));
}

}  // namespace
}  // namespace ndserve
