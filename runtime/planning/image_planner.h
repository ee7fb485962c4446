#pragma once
// Image choice on a running system: which image each FPGA should hold for one model's plan, the
// daemon's side of image_choice.h. The candidates are the images the FPGAs hold now plus the
// manifests beside them for the same board; every assignment of images to the usable FPGAs is
// planned as if loaded (the reloaded FPGAs timed from their manifests, planning_kinds.h), and the
// best plan wins once its reloads pay for themselves within `horizon` requests. FPGAs that keep an
// image they hold are never reloaded: an assignment reloads as few as it can. Modelled.
//
//   rt::FpgaImages cands = rt::candidate_images(system, drained);
//   rt::ImagePlan ip = rt::plan_images(planner, c, "energy", drained, cands, 1000);
//   for (const auto& [fpga, image] : ip.reloads) ...   // what to load where, then swap to ip.planned
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hw/system.h"
#include "runtime/planning/image_choice.h"
#include "runtime/planning/planner.h"

namespace dype::rt {

// The candidates for the usable reconfigurable FPGAs as they are now (loaded = FPGAs holding an
// image now); no options when there are none, they are of different boards, or none holds an
// image. Manifests are looked for in the folders of the loaded images and of the system file's.
FpgaImages candidate_images(const hw::System& system, const std::set<std::string>& excluded);

// Which FPGA gets which image under `a`: FPGAs keep the image they hold while the assignment
// wants it; the others take the remaining images in option order. Pointers into `images`.
FpgaImagePlan assign_images(const hw::System& system, const std::set<std::string>& excluded,
                            const FpgaImages& images, const ImageAssignment& a);

struct ImagePlan {
  ImageAssignment assignment;
  std::string images;                 // "2 x u280-sextans-gemm + 1 x u280-sextans-swat"
  FpgaImagePlan by_device;            // every usable FPGA's image under the choice
  std::vector<std::pair<std::string, const hw::Bitstream*>> reloads;  // FPGAs whose image changes
  ReloadCost cost;
  double score = 0.0;                 // amortised (image_choice.h)
  PlannedPipeline planned;            // on the devices, for the chosen images
  sched::Plan plan;
};

// The best images for `planner`'s model at `c` in `mode` (perf | energy | balanced | qos;
// balanced holds every assignment to the fastest period over all of them). Throws
// sched::InfeasibleError when no assignment gives a plan, Error when there are no candidates.
ImagePlan plan_images(const SchedPlanner& planner, const Characteristics& c, const std::string& mode,
                      const std::set<std::string>& excluded, const FpgaImages& images, double horizon);

}  // namespace dype::rt
