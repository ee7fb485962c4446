#pragma once
// The report's sections, each writing its markdown into the report and its CSV beside it.
#include <vector>

#include "eval_cases.h"
#include "paper_tables.h"
#include "report.h"

namespace dype::eval {

// Counts over what a section printed, for the summary dype-eval prints at the end.
struct Headline {
  int table5_match = 0, table5_cases = 0;
  int t3_perf_suboptimal = 0, t3_energy_suboptimal = 0, t3_cases = 0;
  double gnn_perf_over_static = 0, gnn_perf_over_gpu = 0;
};

void table3(const std::vector<CaseResult>& cases, const PaperTables& paper, Report& report, Headline& h);
void table4(const std::vector<CaseResult>& cases, const PaperTables& paper, Report& report, Headline& h);
void table5(const std::vector<CaseResult>& cases, const PaperTables& paper, Report& report, Headline& h);
void beyond_the_paper(const std::vector<CaseResult>& cases, Report& report);
// The drift stream (static / dynamic / oracle over bench_runtime's phases), modelled from plans.
void drift_stream(const std::vector<CaseResult>& cases, const std::vector<Interconnect>& interconnects,
                  const EvalOptions& opt, Report& report);
// Figure 6's measured series: the P2P pairs in dype-calibrate's calibration.json from real hardware
// (none for ""); InputError naming --calibration when the file is unreadable or malformed.
std::vector<std::vector<std::string>> measured_p2p(const std::string& calibration_file);
// Figures 7-9 from the cases; Figure 6 from the testbeds' topologies (modelled) and the measured rows.
void figure_data(const std::vector<CaseResult>& cases, const std::vector<Interconnect>& interconnects,
                 const std::vector<std::vector<std::string>>& measured_p2p, Report& report);

}  // namespace dype::eval
