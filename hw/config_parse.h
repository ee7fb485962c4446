#pragma once
// Parsers for config fragments shared by device models, bitstreams and system files.
#include "hw/config_node.h"
#include "hw/power.h"
#include "hw/topology.h"

namespace dype::hw {

// {type: pcie|cxl, generation, lanes: 1|2|4|8|16, latency_us}; absent keys keep `defaults`.
Link parse_link(const ConfigNode& node, const Link& defaults);
// {idle_w, execute_w, transfer_w, execute_w_by_op: {op: W}}; absent keys keep `defaults`.
PowerStates parse_power(const ConfigNode& node, const PowerStates& defaults);
// Resolves a reference from a config file: relative to the file's folder, then its parent.
std::string resolve_config_path(const std::string& referring_file, const std::string& ref);

}  // namespace dype::hw
