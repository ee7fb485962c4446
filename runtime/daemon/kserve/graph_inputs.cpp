#include "runtime/daemon/kserve/graph_inputs.h"

#include <string>

#include "common/error.h"
#include "runtime/daemon/kserve/request_builder.h"

namespace dype::rt::daemon {

namespace {
void check_type(const Tensor& t, const char* type) {
  if (t.datatype != type)
    throw InputError("input '" + t.name + "'", "must be " + std::string(type) + ", got " + t.datatype);
}

// An edge list [2, k]: its sources and targets.
void edges(const Tensor& t, std::vector<std::int64_t>& src, std::vector<std::int64_t>& dst) {
  check_type(t, "INT64");
  if (t.shape.size() != 2 || t.shape[0] != 2) throw InputError("input '" + t.name + "'", "must have shape [2, k]");
  std::vector<std::int64_t> scratch;
  const std::span<const std::int64_t> v = t.i64_span(scratch);
  const auto k = static_cast<std::size_t>(t.shape[1]);
  src.assign(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k));
  dst.assign(v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
}

// FP32 [rows, F] of any width F (the graph checks it against its own).
HostTensor rows_of(const Tensor& t) {
  check_type(t, "FP32");
  if (t.shape.size() != 2) throw InputError("input '" + t.name + "'", "must have rank 2 [rows, F]");
  HostTensor x = features(t, t.shape[1], "the graph's feature length");
  return x;
}
}  // namespace

HostTensor registered_features(const InferRequest& in) {
  const Tensor* x = in.find("x");
  if (!x) return {};
  if (x->shape.size() == 2 && x->shape[1] < 1) throw InputError("input 'x'", "must have at least one feature");
  if (x->shape.size() == 2 && x->shape[0] < 1) throw InputError("input 'x'", "must have a row for each node, got none");
  return rows_of(*x);
}

GraphUpdate graph_update_from_request(const InferRequest& in) {
  for (const Tensor& t : in.inputs)
    if (t.name != "add_edges" && t.name != "remove_edges" && t.name != "add_nodes" && t.name != "set_rows" && t.name != "x")
      throw InputError("input '" + t.name + "'", "not an input of a graph update (add_edges, remove_edges, add_nodes, "
                                                 "set_rows with x)");
  GraphUpdate u;
  if (const Tensor* t = in.find("add_edges")) edges(*t, u.add_src, u.add_dst);
  if (const Tensor* t = in.find("remove_edges")) edges(*t, u.remove_src, u.remove_dst);
  if (const Tensor* t = in.find("add_nodes")) {
    if (t->datatype == "INT64") {  // a count, for a graph without features
      if (t->elements() != 1) throw InputError("input 'add_nodes'", "as INT64 holds one count");
      u.add_nodes = t->i64()[0];
    } else {
      if (t->shape.size() == 2 && t->shape[1] < 1)
        throw InputError("input 'add_nodes'", "as FP32 holds the new nodes' feature rows, at least one feature wide "
                                              "(a count for a graph without features: INT64 [1])");
      HostTensor x = rows_of(*t);
      u.add_nodes = x.rows;
      u.add_x = std::move(x.data);
    }
  }
  const Tensor* rows = in.find("set_rows");
  const Tensor* x = in.find("x");
  if (rows || x) {
    if (!rows) throw InputError("input 'x'", "gives feature rows: name the nodes with set_rows INT64 [r]");
    if (!x) throw InputError("input 'set_rows'", "names rows to set: give their features as x FP32 [r, F]");
    check_type(*rows, "INT64");
    if (rows->shape.size() != 1) throw InputError("input 'set_rows'", "must have rank 1 [r]");
    std::vector<std::int64_t> scratch;
    const std::span<const std::int64_t> r = rows->i64_span(scratch);
    u.set_rows.assign(r.begin(), r.end());
    HostTensor v = rows_of(*x);
    if (v.rows != static_cast<std::int64_t>(u.set_rows.size()))
      throw InputError("input 'x'", "has " + std::to_string(v.rows) + " rows for " + std::to_string(u.set_rows.size()) +
                                        " set_rows");
    u.set_x = std::move(v.data);
  }
  return u;
}

}  // namespace dype::rt::daemon
