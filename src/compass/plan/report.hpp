#pragma once
// Machine-readable forms of the planner's results (JSON via nlohmann, CSV for the sweep).

#include <string>

#include <nlohmann/json.hpp>

#include "compass/model/selector.hpp"
#include "compass/plan/layer_plan.hpp"
#include "compass/plan/sweep.hpp"

namespace compass::plan {

/// {"strategy", "total_s", "compute_s", "exposed_comm_s", "overhead_s", "interference_s",
///  "comm_s", "bottleneck", "congested"}.
nlohmann::json to_json(const model::Estimate& e);
/// The ODP coefficients, degrees and per-degree times.
nlohmann::json to_json(const model::OdpResult& r);
/// The operator, every estimate, the ODP result, the choice and its reason.
nlohmann::json to_json(const model::OperatorChoice& c);
/// The layer plan with the three configurations' iteration estimates and speedups.
nlohmann::json to_json(const LayerPlan& lp);
/// Every row (model, layer, shape, every strategy's total, d*, argmin, choice) and the summary.
nlohmann::json to_json(const SweepResult& r);
nlohmann::json to_json(const SweepSummary& s);
/// One CSV line per row with a header line.
std::string sweep_csv(const SweepResult& r);

}  // namespace compass::plan
