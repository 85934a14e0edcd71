#pragma once
// The layout search: every TP x CP x PP x virtual stages x DP x micro-batch x recomputation x
// sequence-parallel layout of a model on a cluster, the ones that fit, priced under each of the
// three TP overlap settings and as the printed launch runs it, ranked by the launch.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "compass/job/cluster.hpp"
#include "compass/job/comm.hpp"
#include "compass/job/step.hpp"

namespace compass::job {

/// What to search. Fixed dimensions (an optional that holds a value) restrict the enumeration;
/// with all of them fixed the search prices one layout.
struct SearchRequest {
  std::int64_t gpus = 8;
  int global_batch = 8;
  std::int64_t seq = 2048;
  std::optional<int> tp, cp, pp, vpp, micro_batch;
  std::optional<bool> sequence_parallel;
  std::optional<Recompute> recompute;
  bool distributed_optimizer = true;
  bool dp_overlap = true;
  bool fp8 = false;
  int max_vpp = 4;
  /// Context-parallel sizes tried when cp is not fixed: the powers of two up to this (1: none).
  int max_cp = 1;
  std::vector<int> micro_batches = {1, 2, 4, 8};
  int top = 5;
  /// Price and rank layouts that do not fit in memory too (their reports say by how much).
  bool ignore_memory = false;
  /// Workers planning the distinct layer shapes and pricing the layouts (0: one per hardware
  /// thread). The result does not depend on it.
  int threads = 0;
};

/// One of a candidate's prices: under one of the three TP overlap settings, or as its launch
/// runs.
enum class Pricing { megatron, te_default, compass, launch };
/// "megatron", "te-default", "compass" or "launch".
std::string_view to_string(Pricing p);
/// The pricing a name above gives; nullopt for any other name.
std::optional<Pricing> parse_pricing(std::string_view name);

/// One layout priced under the three TP overlap settings, and as the search's printed launch
/// runs it.
struct Candidate {
  Layout layout;
  StepResult megatron, te, compass;
  /// The launch the search prints for this layout: Megatron-LM with `compass export te`'s
  /// settings (Searcher::price_as_exported) where TransformerEngine can run them, else
  /// Megatron-LM's own sequential TP (the megatron result).
  StepResult launch;
  /// Why the launch runs no TP overlap: empty when it runs the exported TE settings; the
  /// export's reason (no sequence parallelism, GPUs without peer access, ...) when TE cannot.
  std::string launch_without_te;
  const StepResult& under(plan::Config c) const {
    return c == plan::Config::megatron ? megatron : c == plan::Config::te_default ? te : compass;
  }
  const StepResult& priced(Pricing p) const {
    switch (p) {
      case Pricing::megatron:
        return megatron;
      case Pricing::te_default:
        return te;
      case Pricing::compass:
        return compass;
      case Pricing::launch:
        break;
    }
    return launch;
  }
  bool launch_runs_te() const { return launch_without_te.empty(); }
};

struct SearchResult {
  long enumerated = 0;         ///< layouts that pass the layout checks
  long fitting = 0;            ///< of those, the ones that fit in memory
  std::vector<Candidate> top;  ///< best first by the launch's time (Candidate::launch)
  /// The best layout under each setting, and the best launch: the layout the search recommends
  /// (Compass's own choices can be faster on a layout whose launch is not, where TE cannot run
  /// them).
  Candidate best_megatron, best_te, best_compass, best_launch;
  /// Whether the best launch's layout differs from the best under Megatron-LM's or TE's
  /// overlap.
  bool compass_changes_winner() const {
    return !(best_launch.layout == best_megatron.layout) || !(best_launch.layout == best_te.layout);
  }
};

/// Searches one model on one cluster; plans each distinct layer shape once (the cache lives in
/// the object, not the process).
class Searcher {
 public:
  Searcher(Cluster cluster, workload::ModelConfig model, StepOptions options = {});
  Searcher(const Searcher&) = delete;  // the communication model points at cluster_
  Searcher& operator=(const Searcher&) = delete;

  /// Errors name the constraint that fails first: GPU count against the cluster, a fixed TP, PP
  /// or micro-batch no layout of the GPUs can take, a global batch no layout divides, no layout
  /// that fits in memory (with the smallest one's need).
  Result<SearchResult> search(const SearchRequest& r);
  /// One layout under the three settings and as launched.
  Result<Candidate> price(const Layout& l);
  /// `l` under Compass's overlap as TransformerEngine runs it from `compass export te`'s
  /// settings: every TP operator at the predicted time of the setting the export writes for it
  /// (plan::export_te on the layout's layer plan; Compass's own choice where TE can run it, the
  /// nearest TE setting where not). Errors: the export's (no sequence parallelism, TP 1, GPUs
  /// without peer access).
  Result<StepResult> price_as_exported(const Layout& l);

  const Cluster& cluster() const { return cluster_; }
  const workload::ModelConfig& model() const { return model_; }
  /// Distinct layer plans made so far.
  std::size_t planned_layers() const { return plans_.size(); }

 private:
  /// Plans the shapes of `layouts` not planned yet (kept per shape, the planner's error too),
  /// and exports those whose launch needs it (each layer plan with its operators at their
  /// exported settings' times, kept per shape with the export's error), on `threads` workers
  /// (0: one per hardware thread), each with a planner of its own: the same bits as one worker.
  void plan_shapes(const std::vector<Layout>& layouts, int threads);
  /// The layer plan of l's shape (plan_shapes made it), or the planner's error.
  Result<const plan::LayerPlan*> planned(const Layout& l) const;
  /// price() and price_as_exported() of a layout whose shape plan_shapes made, through `comm`
  /// and `pipelines` (a worker's own; they change no result).
  Result<Candidate> price_planned(const Layout& l, JobComm& comm, PipelineCache& pipelines) const;
  Result<StepResult> price_exported(const Layout& l, JobComm& comm, PipelineCache& pipelines) const;

  Cluster cluster_;
  workload::ModelConfig model_;
  StepOptions options_;
  std::unique_ptr<JobComm> comm_;
  plan::LayerPlanner planner_;  // plans on cluster_.node
  std::map<LayerPlanKey, plan::LayerPlan> plans_;
  std::map<LayerPlanKey, Error> unplanned_;  // the planner's errors
  std::map<LayerPlanKey, Result<plan::LayerPlan>> exported_;
  PipelineCache pipelines_;
};

/// The Megatron-LM command-line arguments of a layout under `overlap`, one word each (an argv:
/// a flag and its value are two). Under Config::te_default they end with --tp-comm-overlap
/// where it applies (TE's default settings); under Config::compass they carry no TP overlap
/// setting: those are `compass export te`'s (its launch script's MEGATRON_TP_ARGS, its
/// environment and its configuration file).
std::vector<std::string> megatron_args(const Layout& l, int layers, plan::Config overlap);

}  // namespace compass::job
