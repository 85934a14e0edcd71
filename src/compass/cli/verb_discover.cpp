// compass discover [--from-topo FILE] [--gpu NAME] [--name N] [--no-p2p] [--out F] [--force]:
// builds a profile of a machine from a saved `nvidia-smi topo -m` matrix, or from the machine
// itself (NVML and the CUDA driver loaded at run time, PCIe and NUMA from sysfs).

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "compass/cli/common.hpp"
#include "compass/hardware/gpu_models.hpp"
#include "compass/measure/live_topology.hpp"
#include "compass/hardware/profile_io.hpp"
#include "compass/measure/topo_matrix.hpp"

namespace compass::cli {

namespace {

struct DiscoverOptions {
  std::string from_topo;
  std::string gpu;
  std::string name;
  std::string out;
  std::string sysfs = "/sys";
  bool no_p2p = false;
  bool force = false;
};

// A matrix of kMaxTopoGpus GPUs with NICs is a few KiB; far larger text is not such a matrix.
constexpr std::uint64_t kMaxTopoBytes = std::uint64_t{4} << 20;

void print_summary(const hardware::Profile& p) {
  out("profile {}: {} GPUs ({}), {} nodes, {} links, p2p {}\n", p.name, p.gpu_count(),
             p.devices.empty() ? "?" : p.devices[0].name, p.nodes.size(), p.links.size(),
             p.p2p ? "on" : "off");
  for (const hardware::Link& l : p.links)
    out("  {:<14} {:<12} {:>10} -- {:<10} {}{}\n", l.name, hardware::to_string(l.kind),
               p.nodes[l.a].name, p.nodes[l.b].name, format_bandwidth(l.bandwidth_bytes_per_s),
               l.shared ? " shared" : "");
  for (const std::string& n : p.notes) out("  note: {}\n", n);
}

void emit(const hardware::Profile& p, const DiscoverOptions& o) {
  if (o.out.empty()) {
    out("{}", hardware::profile_to_json(p));
    return;
  }
  unwrap(hardware::save_profile_file(p, o.out, o.force));
  print_summary(p);
  out("wrote {}\n", o.out);
}

std::string default_name(const std::string& path) {
  std::string stem = std::filesystem::path(path).stem().string();
  return stem.empty() ? "discovered" : stem;
}

void run_discover(const DiscoverOptions& o) {
  measure::TopoProfileOptions options;
  options.p2p = !o.no_p2p;
  if (!o.from_topo.empty()) {
    const std::string text = read_input_file(o.from_topo, kMaxTopoBytes);
    const measure::TopoMatrix m = unwrap(measure::parse_topo_matrix(text, o.from_topo));
    const bool assumed = o.gpu.empty();
    hardware::GpuModel gpu =
        unwrap(hardware::find_gpu_model(assumed ? measure::default_gpu_key(m) : o.gpu));
    options.name = o.name.empty() ? default_name(o.from_topo) : o.name;
    options.origin = std::filesystem::path(o.from_topo).filename().string();
    hardware::Profile p = unwrap(measure::profile_from_topo(m, gpu, options));
    if (assumed)
      p.notes.insert(p.notes.begin(),
                     fmt::format("assumed GPU model {} (the matrix does not name the GPU; pass "
                                 "--gpu to choose)",
                                 gpu.key));
    emit(p, o);
    return;
  }
  options.name = o.name.empty() ? "discovered" : o.name;
  options.origin = "this machine";
  hardware::Profile p = unwrap(measure::discover_live(o.sysfs, o.gpu, options));
  emit(p, o);
}

}  // namespace

void add_discover_verb(CLI::App& app) {
  auto o = std::make_shared<DiscoverOptions>();
  auto* sub = app.add_subcommand(
      "discover", "Build a profile of this machine, or of a saved 'nvidia-smi topo -m' matrix");
  sub->add_option("--from-topo", o->from_topo, "Saved output of 'nvidia-smi topo -m'");
  std::string keys;
  for (const auto& m : hardware::known_gpu_models()) keys += (keys.empty() ? "" : ", ") + m.key;
  sub->add_option("--gpu", o->gpu, "GPU model (" + keys + "); default: guessed from the matrix");
  sub->add_option("--name", o->name, "Profile name (default: the file name)");
  sub->add_flag("--no-p2p", o->no_p2p, "GPUs cannot access each other's memory (staged copies)");
  sub->add_option("--out", o->out, "Write the profile here (default: print it)");
  sub->add_flag("--force", o->force, "Overwrite --out if it exists");
  sub->add_option("--sysfs", o->sysfs, "sysfs root for live discovery (default /sys)");
  sub->callback([o] { run_discover(*o); });
}

}  // namespace compass::cli
