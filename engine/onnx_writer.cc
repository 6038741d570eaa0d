#include "engine/onnx_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "kernels/node_attrs.h"
#include "onnx/onnx_pb.h"

namespace ndserve::engine {
namespace {

bool IsDefaultDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

absl::StatusOr<onnx::ModelProto> ReadModel(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open (", std::strerror(errno), ")"));
  }
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in) || !model.has_graph()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not an ONNX model"));
  }
  return model;
}

// Gives `t` the value `v` in raw_data, after checking that only the value changes.
absl::Status Replace(const HostTensor& v, onnx::TensorProto* t) {
  const std::string where = absl::StrCat("initializer '", v.name, "'");
  if (t->data_location() == onnx::TensorProto::EXTERNAL) {
    return absl::UnimplementedError(absl::StrCat(where, ": external data files are not supported"));
  }
  NDS_ASSIGN_OR_RETURN(DType dtype, kernels::DTypeFromOnnx(t->data_type()));
  if (dtype != v.dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " is ", DTypeName(dtype), ", the new value ", DTypeName(v.dtype)));
  }
  const bool same_shape = t->dims_size() == static_cast<int>(v.shape.size()) &&
                          std::equal(v.shape.begin(), v.shape.end(), t->dims().begin());
  if (!same_shape) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " has shape [", absl::StrJoin(t->dims(), ","), "], the new value [",
                     absl::StrJoin(v.shape, ","), "]"));
  }
  std::uint64_t count = 1;
  for (std::int64_t d : v.shape) count *= static_cast<std::uint64_t>(d);
  if (DTypeSize(dtype) == 0 || count * DTypeSize(dtype) != v.bytes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": the new value has ", v.bytes.size(),
                                                   " bytes, its shape and dtype take ",
                                                   count * DTypeSize(dtype)));
  }
  t->clear_float_data();
  t->clear_int32_data();
  t->clear_int64_data();
  t->clear_double_data();
  t->clear_uint64_data();
  t->clear_string_data();
  t->set_raw_data(v.bytes.data(), v.bytes.size());
  return absl::OkStatus();
}

absl::Status WriteAtomically(const onnx::ModelProto& model, const std::string& dest_path) {
  const std::string tmp = absl::StrCat(dest_path, ".tmp.", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out.good() || !model.SerializeToOstream(&out) || !out.flush().good()) {
      const std::string reason = std::strerror(errno);
      std::remove(tmp.c_str());
      return absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", reason));
    }
  }
  if (std::rename(tmp.c_str(), dest_path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(tmp.c_str());
    return absl::InternalError(
        absl::StrCat("cannot rename ", tmp, " to ", dest_path, ": ", reason));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteOnnxWithInitializers(const std::string& source_path,
                                       absl::Span<const HostTensor> values,
                                       const std::string& dest_path) {
  absl::flat_hash_map<std::string, const HostTensor*> wanted;
  for (const HostTensor& v : values) {
    if (!wanted.emplace(v.name, &v).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("initializer '", v.name, "' is given more than once"));
    }
  }
  NDS_ASSIGN_OR_RETURN(onnx::ModelProto model, ReadModel(source_path));
  onnx::GraphProto& graph = *model.mutable_graph();
  auto take = [&](const std::string& name) -> const HostTensor* {
    auto it = wanted.find(name);
    if (it == wanted.end()) return nullptr;
    const HostTensor* v = it->second;
    wanted.erase(it);
    return v;
  };
  for (onnx::TensorProto& t : *graph.mutable_initializer()) {
    if (const HostTensor* v = take(t.name())) NDS_RETURN_IF_ERROR(Replace(*v, &t));
  }
  for (onnx::NodeProto& n : *graph.mutable_node()) {
    if (n.op_type() != "Constant" || !IsDefaultDomain(n.domain()) || n.output_size() != 1) {
      continue;
    }
    const HostTensor* v = take(n.output(0));
    if (v == nullptr) continue;
    if (n.attribute_size() != 1 || n.attribute(0).name() != "value" || !n.attribute(0).has_t()) {
      return absl::UnimplementedError(
          absl::StrCat("Constant '", v->name,
                       "': only a Constant with a 'value' tensor can be given a new "
                       "value"));
    }
    NDS_RETURN_IF_ERROR(Replace(*v, n.mutable_attribute(0)->mutable_t()));
  }
  if (!wanted.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model in ", source_path, " has no initializer named '", wanted.begin()->first, "'"));
  }
  return WriteAtomically(model, dest_path);
}

}  // namespace ndserve::engine
