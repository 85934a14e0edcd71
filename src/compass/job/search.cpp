#include "compass/job/search.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <exception>
#include <limits>
#include <thread>

#include "compass/core/units.hpp"
#include "compass/core/workers.hpp"
#include "compass/plan/te_export.hpp"
#include "compass/workload/layer_ops.hpp"

namespace compass::job {

namespace {

constexpr std::int64_t kMaxGpus = std::int64_t{1} << 20;
constexpr int kMaxGlobalBatch = 1 << 24;
constexpr std::int64_t kMaxSeq = std::int64_t{1} << 22;
constexpr int kMaxLayers = 100000;
/// Layouts whose pipeline has more passes than this are left out (too many micro-batches to
/// follow one by one within the search's time).
constexpr long kMaxPipelineTasks = 2'000'000;

constexpr plan::Config kConfigs[] = {plan::Config::megatron, plan::Config::te_default,
                                     plan::Config::compass};

template <typename T>
std::vector<T> fixed_or(const std::optional<T>& fixed, std::vector<T> all) {
  if (fixed) return {*fixed};
  return all;
}

bool better(const StepResult& a, const Layout& la, const StepResult& b, const Layout& lb) {
  if (a.iteration_s != b.iteration_s) return a.iteration_s < b.iteration_s;
  return describe(la) < describe(lb);
}

// `lp` (l's layer plan) with each operator's chosen estimate at the time of the setting
// `compass export te` writes for it.
Result<plan::LayerPlan> export_plan(const Cluster& cluster, const plan::LayerPlan& lp,
                                    const Layout& l) {
  plan::TeExportOptions eo;
  eo.fp8 = l.fp8;
  eo.cp = l.cp;
  COMPASS_ASSIGN(const plan::TeExport ex, plan::export_te(cluster.node, lp, eo));
  // The report lists the plan's operators in order: each one's chosen estimate takes the
  // exported setting's time (its GEMM work, and so what counts as exposed, stays).
  plan::LayerPlan exported = lp;
  if (ex.layers.size() != exported.ops.size())
    return make_error("the export reports {} operators for a plan of {}", ex.layers.size(),
                      exported.ops.size());
  for (std::size_t i = 0; i < exported.ops.size(); ++i) {
    model::OperatorChoice& c = exported.ops[i].choice;
    if (ex.layers[i].role != c.op.role)
      return make_error("the export reports {} where the plan has {}", ex.layers[i].role,
                        c.op.role);
    c.estimates[c.chosen].total_s = ex.layers[i].exported_s;
  }
  return exported;
}

// Runs task(i, w) for every i in [0, n), each once, on `workers` threads (w: 0 for the calling
// thread, 1.. for the others), each taking the next task left. After all have joined, rethrows
// the first worker's exception (the others stop after their current task).
template <typename Task>
void on_workers(std::size_t n, std::size_t workers, Task&& task) {
  if (workers == 0) return;
  std::atomic<std::size_t> next{0};
  std::vector<std::exception_ptr> failed(workers);
  auto work = [&](std::size_t w) {
    try {
      for (std::size_t i = next++; i < n; i = next++) task(i, w);
    } catch (...) {
      failed[w] = std::current_exception();
      next = n;
    }
  };
  {
    std::vector<std::jthread> pool;
    for (std::size_t w = 1; w < workers; ++w) pool.emplace_back(work, w);
    work(0);
  }  // joined
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
}

}  // namespace

Searcher::Searcher(Cluster cluster, workload::ModelConfig model, StepOptions options)
    : cluster_(std::move(cluster)),
      model_(std::move(model)),
      options_(options),
      comm_(std::make_unique<JobComm>(cluster_)),
      planner_(cluster_.node) {}

Result<Candidate> Searcher::price(const Layout& l) {
  COMPASS_TRY(check(l, model_));
  plan_shapes({l}, 1);
  return price_planned(l, *comm_, pipelines_);
}

Result<StepResult> Searcher::price_as_exported(const Layout& l) {
  COMPASS_TRY(check(l, model_));
  plan_shapes({l}, 1);
  // plan_shapes exports only where the launch uses it; asked here, the export's error answers.
  const LayerPlanKey key = layer_plan_key(l);
  if (!exported_.count(key)) {
    const Result<const plan::LayerPlan*> lp = planned(l);
    exported_.emplace(
        key, lp.ok() ? export_plan(cluster_, **lp, l) : Result<plan::LayerPlan>(lp.error()));
  }
  return price_exported(l, *comm_, pipelines_);
}

Result<const plan::LayerPlan*> Searcher::planned(const Layout& l) const {
  const LayerPlanKey key = layer_plan_key(l);
  if (auto failed = unplanned_.find(key); failed != unplanned_.end()) return failed->second;
  auto it = plans_.find(key);
  if (it == plans_.end()) return make_error("{}: its layer shape was not planned", describe(l));
  return &it->second;
}

Result<StepResult> Searcher::price_exported(const Layout& l, JobComm& comm,
                                            PipelineCache& pipelines) const {
  auto it = exported_.find(layer_plan_key(l));
  if (it == exported_.end()) return make_error("{}: its layer shape was not exported", describe(l));
  if (!it->second.ok()) return it->second.error();
  return price_step(cluster_, comm, model_, l, it->second.value(), plan::Config::compass, options_,
                    pipelines);
}

Result<Candidate> Searcher::price_planned(const Layout& l, JobComm& comm,
                                          PipelineCache& pipelines) const {
  COMPASS_TRY(check(l, model_));
  COMPASS_ASSIGN(const plan::LayerPlan* lp, planned(l));
  Candidate c;
  c.layout = l;
  COMPASS_ASSIGN(c.megatron, price_step(cluster_, comm, model_, l, *lp, plan::Config::megatron,
                                        options_, pipelines));
  COMPASS_ASSIGN(c.te, price_step(cluster_, comm, model_, l, *lp, plan::Config::te_default,
                                  options_, pipelines));
  COMPASS_ASSIGN(c.compass, price_step(cluster_, comm, model_, l, *lp, plan::Config::compass,
                                       options_, pipelines));
  // The launch: TE's overlap only with TP > 1 and SP (Megatron-LM refuses --tp-comm-overlap
  // without --sequence-parallel), and only where the export can write settings TE runs.
  c.launch = c.megatron;
  if (!te_overlap_applies(l)) {
    c.launch_without_te = l.tp < 2 ? "TP 1 has no TP communication"
                                   : "TransformerEngine's TP overlap needs sequence parallelism";
  } else if (Result<StepResult> e = price_exported(l, comm, pipelines); e.ok()) {
    c.launch = std::move(e).value();
  } else {
    c.launch_without_te = e.error().message;
  }
  return c;
}

void Searcher::plan_shapes(const std::vector<Layout>& layouts, int threads) {
  // Each shape not planned yet (or planned, with its export still to make), with the first
  // layout that needs it; the costliest first (larger TP, then more tokens per micro-batch).
  struct Shape {
    Layout layout;
    bool plan = false, exported = false;  // what is to be made
    std::optional<Result<plan::LayerPlan>> planned, te;
  };
  std::vector<Shape> shapes;
  std::map<LayerPlanKey, std::size_t> index;
  for (const Layout& l : layouts) {
    const LayerPlanKey key = layer_plan_key(l);
    if (unplanned_.count(key) || index.count(key)) continue;
    const bool plan = !plans_.count(key);
    const bool exported = te_overlap_applies(l) && !exported_.count(key);
    if (!plan && !exported) continue;
    index.emplace(key, shapes.size());
    shapes.push_back(Shape{l, plan, exported, std::nullopt, std::nullopt});
  }
  std::stable_sort(shapes.begin(), shapes.end(), [](const Shape& a, const Shape& b) {
    const std::int64_t ta = a.layout.local_seq() * a.layout.micro_batch;
    const std::int64_t tb = b.layout.local_seq() * b.layout.micro_batch;
    return a.layout.tp != b.layout.tp ? a.layout.tp > b.layout.tp : ta > tb;
  });
  const std::size_t workers = worker_count(threads, shapes.size());
  std::deque<plan::LayerPlanner> own;  // worker w > 0 plans with own[w - 1]
  for (std::size_t w = 1; w < workers; ++w) own.emplace_back(cluster_.node);
  on_workers(shapes.size(), workers, [&](std::size_t i, std::size_t w) {
    Shape& sh = shapes[i];
    const plan::LayerPlan* lp = nullptr;
    if (sh.plan) {
      sh.planned = plan_for(w == 0 ? planner_ : own[w - 1], cluster_, model_, sh.layout);
      if (sh.planned->ok()) lp = &sh.planned->value();
    } else {
      lp = &plans_.at(layer_plan_key(sh.layout));  // read only while the workers run
    }
    if (sh.exported)
      sh.te = lp != nullptr ? export_plan(cluster_, *lp, sh.layout) : sh.planned->error();
  });
  for (Shape& sh : shapes) {
    const LayerPlanKey key = layer_plan_key(sh.layout);
    if (sh.planned) {
      if (sh.planned->ok())
        plans_.emplace(key, std::move(*sh.planned).value());
      else
        unplanned_.emplace(key, sh.planned->error());
    }
    if (sh.te) exported_.emplace(key, std::move(*sh.te));
  }
}

Result<SearchResult> Searcher::search(const SearchRequest& r) {
  COMPASS_TRY(workload::validate(model_));
  if (model_.layers > kMaxLayers)
    return make_error("{} has {} layers; the search handles at most {}", model_.name, model_.layers,
                      kMaxLayers);
  if (r.gpus < 1 || r.gpus > kMaxGpus)
    return make_error("--gpus {} is out of range (1..{})", r.gpus, kMaxGpus);
  if (r.global_batch < 1 || r.global_batch > kMaxGlobalBatch)
    return make_error("global batch {} is out of range (1..{})", r.global_batch, kMaxGlobalBatch);
  if (r.seq < 1 || r.seq > kMaxSeq)
    return make_error("sequence length {} is out of range (1..{})", r.seq, kMaxSeq);
  const int g = cluster_.gpus_per_node();
  if (r.gpus > g && r.gpus % g != 0)
    return make_error("{} GPUs do not fill whole nodes of {} ({} GPUs per node)", r.gpus,
                      cluster_.name, g);
  if (cluster_.max_nodes > 0 && r.gpus > std::int64_t{cluster_.max_nodes} * g)
    return make_error("{} GPUs asked for; cluster {} has {}", r.gpus, cluster_.name,
                      std::int64_t{cluster_.max_nodes} * g);
  if (r.fp8) COMPASS_TRY(hardware::check_peak_flops(cluster_.node, DType::fp8));

  // A fixed dimension that no layout of these GPUs can take is the error, named as given
  // (rather than the batch or memory constraint the empty enumeration would report).
  if (r.tp) {
    if (*r.tp < 1) return make_error("TP {} must be positive", *r.tp);
    if (*r.tp > g)
      return make_error("TP {} is larger than a node of {} ({} GPUs)", *r.tp, cluster_.name, g);
    if (r.gpus % *r.tp != 0) return make_error("TP {} does not divide the {} GPUs", *r.tp, r.gpus);
  }
  std::vector<int> tps;
  for (int t = 1; t <= std::min<std::int64_t>(g, r.gpus); t *= 2) tps.push_back(t);
  tps = fixed_or(r.tp, tps);
  if (r.cp) {
    if (*r.cp < 1) return make_error("CP {} must be positive", *r.cp);
    if (r.gpus % *r.cp != 0) return make_error("CP {} does not divide the {} GPUs", *r.cp, r.gpus);
    if (r.tp && r.gpus % (std::int64_t{*r.tp} * *r.cp) != 0)
      return make_error("TP {} x CP {} does not divide the {} GPUs", *r.tp, *r.cp, r.gpus);
    if (Status st = workload::check_context_split(r.seq, *r.cp); !st.ok())
      return make_error("CP {}: {}", *r.cp, st.error().message);
  }
  if (r.max_cp < 1) return make_error("the largest CP {} must be positive", r.max_cp);
  std::vector<int> cps;
  for (std::int64_t c = 1; c <= std::min<std::int64_t>(r.max_cp, r.gpus); c *= 2)
    cps.push_back(static_cast<int>(c));
  cps = fixed_or(r.cp, cps);
  if (r.pp) {
    if (*r.pp < 1 || *r.pp > model_.layers)
      return make_error("PP {} is not in 1..{} (the layers of {})", *r.pp, model_.layers,
                        model_.name);
    auto divides = [&](int t) {
      return std::any_of(cps.begin(), cps.end(),
                         [&](int c) { return r.gpus % (std::int64_t{t} * c * *r.pp) == 0; });
    };
    if (r.tp && !divides(*r.tp)) {
      if (r.cp && *r.cp > 1)
        return make_error("PP {} does not divide the {} GPUs left by TP {} x CP {}", *r.pp,
                          r.gpus / (std::int64_t{*r.tp} * *r.cp), *r.tp, *r.cp);
      return make_error("PP {} does not divide the {} GPUs left by TP {}", *r.pp, r.gpus / *r.tp,
                        *r.tp);
    }
    if (std::none_of(tps.begin(), tps.end(), divides))
      return make_error("PP {} does not divide {} GPUs / TP for any TP ({})", *r.pp, r.gpus,
                        fmt::join(tps, ", "));
  }
  if (r.vpp && *r.vpp > 1) {
    // Interleaving needs PP > 1 stages that split the layers into PP x VPP chunks (split_layers).
    std::vector<int> stages;  // the pipeline sizes these GPUs allow, above 1
    for (int t : tps)
      for (int c : cps) {
        const std::int64_t left = r.gpus / (std::int64_t{t} * c);
        if (r.gpus % (std::int64_t{t} * c) != 0) continue;
        for (std::int64_t p = 2; p <= std::min<std::int64_t>(left, model_.layers); ++p)
          if (left % p == 0 && (!r.pp || *r.pp == p) &&
              std::find(stages.begin(), stages.end(), p) == stages.end())
            stages.push_back(static_cast<int>(p));
      }
    std::sort(stages.begin(), stages.end());
    if (stages.empty())
      return make_error("VPP {} needs a pipeline of more than one stage, and these GPUs allow none",
                        *r.vpp);
    if (std::none_of(stages.begin(), stages.end(),
                     [&](int p) { return split_layers(model_.layers, p, *r.vpp).has_value(); }))
      return make_error("VPP {}: no PP among {} splits the {} layers of {} into PP x {} chunks",
                        *r.vpp, fmt::join(stages, ", "), model_.layers, model_.name, *r.vpp);
  }
  if (r.micro_batch && (*r.micro_batch < 1 || r.global_batch % *r.micro_batch != 0))
    return make_error("global batch {} is not a multiple of micro-batch {}", r.global_batch,
                      *r.micro_batch);
  const int max_tp = tps.empty() ? 1 : *std::max_element(tps.begin(), tps.end());
  std::vector<int> vpps;
  for (int v = 1; v <= std::max(1, r.max_vpp); ++v) vpps.push_back(v);
  vpps = fixed_or(r.vpp, vpps);
  const std::vector<int> mbss = fixed_or(r.micro_batch, r.micro_batches);
  const std::vector<Recompute> rcs =
      fixed_or(r.recompute, {Recompute::none, Recompute::selective, Recompute::full});

  SearchResult out;
  bool batch_divides = false;
  long too_many_tasks = 0;
  double smallest_need = std::numeric_limits<double>::infinity();
  std::string smallest_layout;
  Status first_error = Status::success();
  std::vector<Layout> priced;  // in the order they are met, which ranks ties
  for (int tp : tps)
    for (int cp : cps) {
      if (tp < 1 || r.gpus % (std::int64_t{tp} * cp) != 0) continue;
      const std::int64_t rest = r.gpus / (std::int64_t{tp} * cp);
      std::vector<int> pps;
      for (std::int64_t p = 1; p <= std::min<std::int64_t>(rest, model_.layers); ++p)
        if (rest % p == 0) pps.push_back(static_cast<int>(p));
      for (int pp : fixed_or(r.pp, pps)) {
        if (pp < 1 || rest % pp != 0) continue;
        const std::int64_t dp64 = rest / pp;
        if (dp64 > std::numeric_limits<int>::max()) continue;
        const int dp = static_cast<int>(dp64);
        for (int mbs : mbss) {
          if (mbs < 1 || r.global_batch % (std::int64_t{mbs} * dp) != 0) continue;
          batch_divides = true;
          for (int vpp : vpps)
            for (bool sp : fixed_or(r.sequence_parallel, tp > 1 ? std::vector<bool>{true, false}
                                                                : std::vector<bool>{false}))
              for (Recompute rc : rcs) {
                Layout l;
                l.tp = tp;
                l.cp = cp;
                l.pp = pp;
                l.vpp = vpp;
                l.dp = dp;
                l.micro_batch = mbs;
                l.global_batch = r.global_batch;
                l.seq = r.seq;
                l.sequence_parallel = sp;
                l.recompute = rc;
                l.distributed_optimizer = r.distributed_optimizer;
                l.overlap_grad_reduce = l.overlap_param_gather = r.dp_overlap;
                l.fp8 = r.fp8;
                if (Status s = check(l, model_); !s.ok()) {
                  if (first_error.ok()) first_error = s;
                  continue;
                }
                ++out.enumerated;
                if (2L * pp * vpp * l.microbatches() > kMaxPipelineTasks) {
                  ++too_many_tasks;
                  continue;
                }
                const double capacity = cluster_.node.gpu_device(0).memory_bytes;
                double need = std::numeric_limits<double>::infinity();
                for (plan::Config c : kConfigs)
                  need = std::min(
                      need, memory_per_gpu(model_, l, c, capacity, options_.memory).peak_bytes);
                if (need < smallest_need) {
                  smallest_need = need;
                  smallest_layout = describe(l);
                }
                if (need > capacity && !r.ignore_memory) continue;
                if (need <= capacity) ++out.fitting;
                priced.push_back(l);
              }
        }
      }
    }
  if (!batch_divides)
    return make_error(
        "global batch {} is not a multiple of micro-batch x DP for any layout with "
        "TP <= {} on {} GPUs",
        r.global_batch, max_tp, r.gpus);
  if (out.enumerated == 0) {
    if (!first_error.ok()) return first_error.error();
    return make_error("no layout of {} fits the constraints on {} GPUs", model_.name, r.gpus);
  }
  if (out.enumerated == too_many_tasks)
    return make_error(
        "every layout has more than {} pipeline passes per iteration (global batch "
        "{} over {} GPUs is too many micro-batches to follow)",
        kMaxPipelineTasks, r.global_batch, r.gpus);
  // The layer shapes on several workers, then the layouts on several workers, each with a
  // communication model and pipeline lists of its own; the first error in order is the answer.
  plan_shapes(priced, r.threads);
  std::vector<std::optional<Result<Candidate>>> made(priced.size());
  const std::size_t workers = worker_count(r.threads, priced.size());
  std::deque<JobComm> comms;  // worker w > 0 prices with comms[w - 1] and lists[w - 1]
  std::deque<PipelineCache> lists(workers > 0 ? workers - 1 : 0);
  for (std::size_t w = 1; w < workers; ++w) comms.emplace_back(cluster_);
  on_workers(priced.size(), workers, [&](std::size_t i, std::size_t w) {
    made[i] = w == 0 ? price_planned(priced[i], *comm_, pipelines_)
                     : price_planned(priced[i], comms[w - 1], lists[w - 1]);
  });
  std::vector<Candidate> all;
  for (std::optional<Result<Candidate>>& m : made) {
    if (!m->ok()) return m->error();
    all.push_back(std::move(*m).value());
  }
  if (all.empty()) {
    const hardware::DeviceSpec& dev = cluster_.node.gpu_device(0);
    return make_error("smallest layout needs {:.1f} GiB per GPU ({}), {} has {:.1f} GiB",
                      smallest_need / kGiB, smallest_layout, dev.name, dev.memory_bytes / kGiB);
  }

  // Rank under each setting among the layouts that fit under it.
  auto best_under = [&](plan::Config c) -> const Candidate* {
    const Candidate* best = nullptr;
    for (const Candidate& k : all) {
      const StepResult& s = k.under(c);
      if (!s.memory.fits() && !r.ignore_memory) continue;
      if (!best || better(s, k.layout, best->under(c), best->layout)) best = &k;
    }
    return best;
  };
  const Candidate* bm = best_under(plan::Config::megatron);
  const Candidate* bt = best_under(plan::Config::te_default);
  const Candidate* bc = best_under(plan::Config::compass);
  std::vector<const Candidate*> order;  // by the launch's time, among the layouts it fits
  for (const Candidate& k : all)
    if (k.launch.memory.fits() || r.ignore_memory) order.push_back(&k);
  std::sort(order.begin(), order.end(), [](const Candidate* a, const Candidate* b) {
    return better(a->launch, a->layout, b->launch, b->layout);
  });
  const Candidate* bl = order.empty() ? nullptr : order.front();
  const Candidate* fallback = bl ? bl : bc ? bc : bm ? bm : bt;
  out.best_megatron = bm ? *bm : *fallback;
  out.best_te = bt ? *bt : *fallback;
  out.best_compass = bc ? *bc : *fallback;
  out.best_launch = bl ? *bl : *fallback;
  for (int i = 0; i < std::min<int>(std::max(r.top, 1), static_cast<int>(order.size())); ++i)
    out.top.push_back(*order[i]);
  if (out.top.empty()) out.top.push_back(*fallback);
  return out;
}

std::string_view to_string(Pricing p) {
  switch (p) {
    case Pricing::megatron:
      return "megatron";
    case Pricing::te_default:
      return "te-default";
    case Pricing::compass:
      return "compass";
    case Pricing::launch:
      break;
  }
  return "launch";
}

std::optional<Pricing> parse_pricing(std::string_view name) {
  for (Pricing p : {Pricing::megatron, Pricing::te_default, Pricing::compass, Pricing::launch})
    if (to_string(p) == name) return p;
  return std::nullopt;
}

std::vector<std::string> megatron_args(const Layout& l, int layers, plan::Config overlap) {
  std::vector<std::string> a;
  const auto flag = [&a](std::string name, auto value) {
    a.push_back(std::move(name));
    a.push_back(fmt::format("{}", value));
  };
  flag("--tensor-model-parallel-size", l.tp);
  if (l.cp > 1) flag("--context-parallel-size", l.cp);
  flag("--pipeline-model-parallel-size", l.pp);
  const std::optional<LayerSplit> split = split_layers(layers, l.pp, l.vpp);
  // A chunk's layers as Megatron-LM counts them: the middle chunks' (the embedding and the loss
  // count as a layer of the first and last chunk with SplitRule::embedding_and_loss).
  if (l.vpp > 1 && split) flag("--num-layers-per-virtual-pipeline-stage", split->layers[1]);
  if (split && split->rule == SplitRule::first_last) {
    flag("--decoder-first-pipeline-num-layers", split->layers.front());
    flag("--decoder-last-pipeline-num-layers", split->layers.back());
  }
  if (split && split->rule == SplitRule::embedding_and_loss) {
    a.push_back("--account-for-embedding-in-pipeline-split");
    a.push_back("--account-for-loss-in-pipeline-split");
  }
  flag("--micro-batch-size", l.micro_batch);
  flag("--global-batch-size", l.global_batch);
  flag("--seq-length", l.seq);
  if (l.sequence_parallel && l.tp > 1) a.push_back("--sequence-parallel");
  if (l.recompute == Recompute::selective) a.push_back("--recompute-activations");
  if (l.recompute == Recompute::full) {
    flag("--recompute-granularity", "full");
    flag("--recompute-method", "uniform");
    flag("--recompute-num-layers", 1);
  }
  if (l.distributed_optimizer) a.push_back("--use-distributed-optimizer");
  // The gradients are reduced over DP x CP.
  if (l.overlap_grad_reduce && l.grad_group() > 1) a.push_back("--overlap-grad-reduce");
  if (l.overlap_param_gather && l.distributed_optimizer && l.grad_group() > 1)
    a.push_back("--overlap-param-gather");
  if (overlap == plan::Config::te_default && te_overlap_applies(l))
    a.push_back("--tp-comm-overlap");
  if (l.fp8) flag("--fp8-format", "hybrid");
  return a;
}

}  // namespace compass::job
