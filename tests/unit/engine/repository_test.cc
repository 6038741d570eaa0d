// The Triton-style repository: model directories, numeric versions, configs.

#include "engine/repository.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/engine_test_util.h"

namespace ndserve::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::WriteFile;

TEST(RepositoryTest, ListsModelsAndPicksTheHighestVersion) {
  TempDir dir;
  WriteFile(dir.path() / "b/1/model.onnx", "x");
  WriteFile(dir.path() / "b/10/model.onnx", "x");
  WriteFile(dir.path() / "b/3/model.onnx", "x");
  WriteFile(dir.path() / "b/notes/model.onnx", "x");  // not a version
  WriteFile(dir.path() / "b/0/model.onnx", "x");      // versions are positive
  WriteFile(dir.path() / "a/2/model.onnx", "x");
  WriteFile(dir.path() / ".hidden/1/model.onnx", "x");
  WriteFile(dir.path() / "README", "x");
  ModelRepository repo(dir.path().string());
  EXPECT_THAT(*repo.ListModels(), ElementsAre("a", "b"));

  absl::StatusOr<RepositoryModel> b = repo.ReadModel("b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(b->config.has_value());
  ASSERT_EQ(b->versions.size(), 3u);
  EXPECT_EQ(ModelRepository::ResolveVersion(*b, 0)->version, 10);
  EXPECT_EQ(ModelRepository::ResolveVersion(*b, 3)->version, 3);
  EXPECT_EQ(ModelRepository::ResolveVersion(*b, 3)->model_path,
            (dir.path() / "b/3/model.onnx").string());
  absl::Status missing = ModelRepository::ResolveVersion(*b, 4).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.message()), HasSubstr((dir.path() / "b").string() + "/4"));

  VersionPolicy latest2;
  latest2.num_versions = 2;
  auto selected = ModelRepository::SelectVersions(*b, latest2);
  ASSERT_TRUE(selected.ok());
  ASSERT_EQ(selected->size(), 2u);
  EXPECT_EQ((*selected)[0].version, 10);
  EXPECT_EQ((*selected)[1].version, 3);
  VersionPolicy all;
  all.kind = VersionPolicy::Kind::kAll;
  EXPECT_EQ(ModelRepository::SelectVersions(*b, all)->size(), 3u);
}

TEST(RepositoryTest, ErrorsNameThePath) {
  TempDir dir;
  WriteFile(dir.path() / "noversions/config.pbtxt", "name: \"noversions\"");
  WriteFile(dir.path() / "nofile/2/other.txt", "x");
  WriteFile(dir.path() / "misnamed/config.pbtxt", "name: \"other\"");
  WriteFile(dir.path() / "misnamed/1/model.onnx", "x");
  WriteFile(dir.path() / "badconfig/config.pbtxt", "max_batch_size: [");
  WriteFile(dir.path() / "badconfig/1/model.onnx", "x");
  WriteFile(dir.path() / "custom/config.pbtxt", "default_model_filename: \"net.onnx\"");
  WriteFile(dir.path() / "custom/1/net.onnx", "x");
  ModelRepository repo(dir.path().string());

  absl::Status s = repo.ReadModel("absent").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr((dir.path() / "absent").string()));
  EXPECT_THAT(std::string(repo.ReadModel("noversions").status().message()),
              HasSubstr("no version directory"));
  absl::StatusOr<RepositoryModel> nofile = repo.ReadModel("nofile");
  ASSERT_TRUE(nofile.ok());
  EXPECT_THAT(std::string(ModelRepository::ResolveVersion(*nofile, 0).status().message()),
              HasSubstr((dir.path() / "nofile/2/model.onnx").string()));
  EXPECT_THAT(std::string(repo.ReadModel("misnamed").status().message()),
              HasSubstr("does not match the directory name"));
  EXPECT_THAT(std::string(repo.ReadModel("badconfig").status().message()),
              HasSubstr((dir.path() / "badconfig/config.pbtxt").string()));
  absl::StatusOr<RepositoryModel> custom = repo.ReadModel("custom");
  ASSERT_TRUE(custom.ok()) << custom.status();
  EXPECT_EQ(ModelRepository::ResolveVersion(*custom, 0)->model_path,
            (dir.path() / "custom/1/net.onnx").string());

  EXPECT_EQ(ModelRepository("/nonexistent/repo").ListModels().status().code(),
            absl::StatusCode::kNotFound);
}

TEST(RepositoryTest, NamesThatAreNotOneDirectoryAreRejected) {
  ModelRepository repo(testing::SourceDir().string());
  for (const char* name : {"", ".", "..", "../examples", "a/b", "tests/../x"}) {
    EXPECT_EQ(repo.ReadModel(name).status().code(), absl::StatusCode::kInvalidArgument) << name;
  }
  EXPECT_FALSE(ValidateModelName(std::string("a\0b", 3)).ok());
  EXPECT_TRUE(ValidateModelName("resnet-50_v1.2").ok());
}

}  // namespace
}  // namespace ndserve::engine
