#pragma once
// Trained weights into a served model: which tensor of model.safetensors fills which weight slot
// of dype's kernel chain, by default under the names PyTorch Geometric writes, and the load itself.
//
// Slots are named after the chain's kernels: "l0.update.weight" / "l0.update.bias" (GCN), and for
// GIN "l0.mlp1.*", "l0.mlp2.*", the first MLP layer's batch norm "l0.mlp1.norm.{weight,bias,
// running_mean,running_var}" and "l0.eps". Default tensor names (PyG's models.GCN / models.GIN):
//   gcn  l{i}.update.weight  convs.{i}.lin.weight  [out, in], transposed at load
//        l{i}.update.bias    convs.{i}.bias        [out]
//   gin  l{i}.mlp{1,2}.*     convs.{i}.nn.lins.{0,1}.weight / .bias
//        l{i}.mlp1.norm.*    convs.{i}.nn.norms.0.{weight,bias,running_mean,running_var}, folded
//                            into mlp1's weight and bias (inference-mode batch norm); PyG's own
//                            BatchNorm wrapper writes convs.{i}.nn.norms.0.module.*, read as well
//        l{i}.eps            convs.{i}.eps         [1] (optional unless train_eps)
//   sage l{i}.update.weight_l  convs.{i}.lin_l.weight  [out, in] (the mean of the neighbours)
//        l{i}.update.weight_r  convs.{i}.lin_r.weight  [out, in] (the node itself; no bias)
//        l{i}.update.bias      convs.{i}.lin_l.bias
//   transformer (nn.TransformerEncoder of nn.TransformerEncoderLayer):
//        l{i}.qkv.{weight,bias}       layers.{i}.self_attn.in_proj_{weight,bias}  [3d, d], [3d]
//        l{i}.out_proj.{weight,bias}  layers.{i}.self_attn.out_proj.{weight,bias}
//        l{i}.ffn1.*, l{i}.ffn2.*     layers.{i}.linear1.*, layers.{i}.linear2.*
//        l{i}.norm1.*, l{i}.norm2.*   layers.{i}.norm1.{weight,bias}, layers.{i}.norm2.*
// A config's tensor_names replaces any of these. Every slot must be found with its shape, and
// every tensor of the file must fill one (training counters "*.num_batches_tracked" excepted):
// a missing or extra tensor, a wrong shape, a non-float dtype or a NaN/Inf value is an InputError
// naming the file, the tensor and the problem.
//
//   rt::SafetensorsFile f = rt::SafetensorsFile::open("models/karate-gcn/model.safetensors");
//   rt::Model m = rt::load_model_weights(rt::load_model_config("models/karate-gcn/config.yaml"), f);
#include <string>
#include <vector>

#include "runtime/model.h"
#include "runtime/repository/model_config.h"
#include "runtime/repository/safetensors.h"

namespace dype::rt {

struct WeightSlot {
  std::string slot;    // "l0.update.weight"
  std::string tensor;  // the name in the file (default or from tensor_names)
  bool required = true;
  std::string alternate;  // a default name's other spelling, read when `tensor` is absent

};

// The slots a config's model has, with the tensor each reads.
std::vector<WeightSlot> weight_slots(const ModelConfig& config);

// The model the config describes with every weight read from `file`.
Model load_model_weights(const ModelConfig& config, const SafetensorsFile& file);

}  // namespace dype::rt
