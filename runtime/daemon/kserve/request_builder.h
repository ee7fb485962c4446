#pragma once
// Protocol tensors -> rt::Request, with every check a network input needs (PyG conventions):
//   GNN:          x FP32 [N, F] and one of edge_index INT64 [2, E] (+ edge_weight FP32 [E]),
//                 indptr + indices INT64 (+ values FP32), or parameters.graph_id (registered);
//                 with graph_id and no x, the features stored with the graph (and
//                 parameters.graph_version, when given, must be the graph's current version);
//                 node_ids INT64 [m]: answer those rows only, in that order.
//   transformer:  x FP32 [seq_len, d_model] and parameters.window (or input window INT64 [1]).
// Index checks come from graph/edge_index.h; NaN/Inf features are refused.
#include <chrono>
#include <optional>

#include "graph/edge_list.h"
#include "runtime/daemon/graph_registry.h"
#include "runtime/daemon/service.h"
#include "runtime/daemon/kserve/tensor.h"
#include "runtime/model.h"

namespace dype::rt::daemon {

Request build_request(const Model& model, const InferRequest& in, GraphRegistry& graphs);

// Input x FP32 [rows, cols_expected] copied out, every value finite (InputError naming the row and
// column otherwise; cols_name names the width in the message).
HostTensor features(const Tensor& x, std::int64_t cols_expected, const char* cols_name);
// Input x left in GPU memory (Tensor::device): the same checks, made on the device.
DeviceFeatures features_on_device(const Tensor& x, std::int64_t cols_expected,
                                  const char* cols_name);
// Input x viewed in memory the request holds (in.held: a system shared-memory region, or a gRPC
// stream's received raw contents), aligned for float: the same checks, made where it lies, and no
// copy (rt::MappedFeatures); nullopt for any other x.
std::optional<MappedFeatures> features_in_place(const Tensor& x, std::int64_t cols_expected,
                                                const char* cols_name, const InferRequest& in);

// Graph tensors only (edge_index or CSR), for registration. num_nodes: parameters.num_nodes or
// inferred from the ids.
kernels::EdgeList edges_from_request(const InferRequest& in, std::optional<std::int64_t> num_nodes);

// The whole infer call both front ends make: checks the requested outputs, builds the request,
// runs it on the service and waits; returns the output tensors asked for (output_tensors).
// engine_seconds: set to the time from submitting to the engine until its answer (measured), so
// front ends can report it and protocol overhead can be told apart from inference.
// deadline: when the caller stops waiting (a gRPC deadline); parameters.timeout (from now) too.
std::vector<Tensor> run_infer(InferenceService& service, GraphRegistry& graphs, const std::string& model,
                              const InferRequest& in, double* engine_seconds = nullptr, std::int64_t* version = nullptr,
                              std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

// parameters.timeout: the microseconds the client waits for its answer (Triton's convention);
// InputError unless an integer from 1 to 3.6e9 (an hour).
std::optional<std::chrono::microseconds> request_timeout(const InferRequest& in);

// The engine's answer, waited for until `deadline` (none: for as long as it takes); DeadlineExceeded
// after it. The engine still finishes the request and its answer is dropped: a deadline bounds
// the client's wait, not the work already admitted.
HostTensor await_answer(std::future<HostTensor>& y, std::optional<std::chrono::steady_clock::time_point> deadline);

// run_infer's first half, for callers that wait elsewhere (the gRPC stream): checks the requested
// outputs, builds the request (copying what it needs out of `in`) and submits it; `submitted`, when
// given, is set to when the engine got it, `version` to the model version that took it, and
// `outputs` to the names of the outputs to answer with; `cancel` ties the engine's request to the
// client's deadline or stream (RequestCancelled once it expired, the stages left not run) (those asked for, or every output the model
// serves when none is named; an output the model does not serve is an InputError).
std::future<HostTensor> submit_infer(InferenceService& service, GraphRegistry& graphs, const std::string& model,
                                     const InferRequest& in,
                                     std::chrono::steady_clock::time_point* submitted = nullptr,
                                     std::int64_t* version = nullptr, std::vector<std::string>* outputs = nullptr,
                                     std::shared_ptr<const CancelToken> cancel = nullptr);

// submit_infer without the submission: checks the requested outputs (their names into `outputs`)
// and builds the request, tied to `cancel`; the caller submits it (InferenceService::try_infer).
Request prepare_infer(InferenceService& service, GraphRegistry& graphs, const std::string& model,
                      const InferRequest& in, std::vector<std::string>* outputs,
                      std::shared_ptr<const CancelToken> cancel = nullptr);

// An inference over a registered graph's stored features (graph_id and no x) of a GNN, answered
// from the activations the registry keeps for it, without the engine: the answer (rows node_ids),
// the outputs to answer with into `outputs` (as prepare_infer), the model version into `version`.
// nullopt when the engine runs it (not such a request, or the activations over their bound).
std::optional<HostTensor> answer_from_graph(InferenceService& service, GraphRegistry& graphs, const std::string& model,
                                            const InferRequest& in, std::vector<std::string>* outputs,
                                            std::int64_t* version);

// A token that expires at `deadline` (and with `parent`), or none when there is neither: what a
// front end ties a request to so that the engine stops running it once its client stopped waiting.
std::shared_ptr<const CancelToken> cancel_token(std::optional<std::chrono::steady_clock::time_point> deadline,
                                                std::shared_ptr<const CancelToken> parent = nullptr);

// The protocol's output tensors of an answer y, in the order of `names`: "y" (FP32 [rows, cols]),
// "predictions" (INT64 [rows], the arg-max class of each row, the first on ties). view: "y" views
// y's data (Tensor::view) instead of copying it; y must outlive it.
std::vector<Tensor> output_tensors(const HostTensor& y, const std::vector<std::string>& names, bool view);

// After the request was built from `request`: InputError when memory an input viewed in place (a
// shared-memory region) shrank while it was read (InferRequest::held).
void check_inputs_read(const InferRequest& request);

// Inputs parsed as views into `buffer` (an HTTP body) are held by `owner`, the memory `buffer` lies
// in: features_in_place then reads them where they lie, and they stay valid for the engine after
// the transport is done with the request (a response written on a passed deadline).
void hold_views(InferRequest& request, std::string_view buffer, std::shared_ptr<const void> owner);

// Writes each output asked for in shared memory (RequestedOutput::sink) into its region and leaves
// it without data, its shared_memory set, so the response carries the parameters instead of the
// bytes. InputError naming the output when its region cannot hold it.
void deliver_outputs(std::vector<Tensor>& outputs, const std::vector<RequestedOutput>& requested);

}  // namespace dype::rt::daemon
