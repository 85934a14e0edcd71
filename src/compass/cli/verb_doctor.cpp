// compass doctor: says what the runtime can use on this machine (CPU and BLAS, the NVIDIA
// driver and GPUs with their peer-access/NVLink matrix, CUDA multicast, CUDA IPC, the CUDA
// runtime and cuBLAS, NCCL, MPI, the torchrun variables, torch / TransformerEngine /
// Megatron-core versions, CUDA_DEVICE_MAX_CONNECTIONS), one line per item. Absence is a
// finding, not an error: exit code 0.

#include <thread>

#include <nlohmann/json.hpp>

#include "compass/backends/cpu/blas.hpp"
#include "compass/backends/cuda/cuda_backend.hpp"
#include "compass/backends/launch/doctor.hpp"
#include "compass/cli/common.hpp"

namespace compass::cli {

namespace {

namespace launch = backends::launch;

struct DoctorArgs {
  JsonOutput json;
  bool force = false;
};

std::vector<launch::Finding> all_findings(const launch::RuntimeReport& report) {
  std::vector<launch::Finding> out;
  out.push_back({"cpu", launch::Verdict::ok,
                 fmt::format("{} cores; BLAS {}", std::thread::hardware_concurrency(),
                             backends::cpu::blas_description())});
  out.push_back({"cuda-backend",
                 backends::cuda::compiled_in() ? launch::Verdict::ok : launch::Verdict::missing,
                 backends::cuda::compiled_in() ? "compiled in"
                                               : "not compiled in (built without nvcc)"});
  out.insert(out.end(), report.findings.begin(), report.findings.end());
  return out;
}

std::string matrix_cell(const launch::PeerAccess& a) {
  if (!a.p2p) return "-";
  return a.nvlink ? "NV" : a.nvlink_known ? "P2P" : "P2P?";
}

void print_text(const launch::RuntimeReport& report) {
  for (const launch::Finding& f : all_findings(report))
    fmt::print("{:<13} {:<8} {}\n", f.item, launch::to_string(f.verdict), f.detail);
  if (report.peers.empty()) return;
  fmt::print("\npeer access (row = from, col = to; NV = NVLink, P2P = peer access over PCIe, "
             "- = none):\n     ");
  for (std::size_t j = 0; j < report.peers.size(); ++j) fmt::print(" {:>5}", fmt::format("GPU{}", j));
  fmt::print("\n");
  for (std::size_t i = 0; i < report.peers.size(); ++i) {
    fmt::print("{:<5}", fmt::format("GPU{}", i));
    for (std::size_t j = 0; j < report.peers.size(); ++j)
      fmt::print(" {:>5}", i == j ? "X" : matrix_cell(report.peers[i][j]));
    fmt::print("\n");
  }
}

nlohmann::ordered_json report_json(const launch::RuntimeReport& report) {
  nlohmann::ordered_json j;
  nlohmann::ordered_json items = nlohmann::ordered_json::array();
  for (const launch::Finding& f : all_findings(report))
    items.push_back({{"item", f.item}, {"verdict", launch::to_string(f.verdict)}, {"detail", f.detail}});
  j["items"] = std::move(items);
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  for (const launch::GpuInfo& g : report.gpus)
    gpus.push_back({{"ordinal", g.ordinal},
                    {"name", g.name},
                    {"pci_bus_id", g.pci_bus_id},
                    {"compute_capability", fmt::format("{}.{}", g.compute_major, g.compute_minor)},
                    {"memory_bytes", g.memory_bytes},
                    {"unified_addressing", g.unified_addressing}});
  j["gpus"] = std::move(gpus);
  nlohmann::ordered_json peers = nlohmann::ordered_json::array();
  for (const auto& row : report.peers) {
    nlohmann::ordered_json r = nlohmann::ordered_json::array();
    for (const auto& a : row) r.push_back(matrix_cell(a));
    peers.push_back(std::move(r));
  }
  j["peer_access"] = std::move(peers);
  j["nccl_version"] = report.nccl_version > 0 ? nlohmann::ordered_json(launch::nccl_version_text(report.nccl_version))
                                              : nlohmann::ordered_json(nullptr);
  return j;
}

}  // namespace

void add_doctor_verb(CLI::App& app) {
  auto args = std::make_shared<DoctorArgs>();
  auto* sub = app.add_subcommand(
      "doctor",
      "Say what the runtime can use here: CPU/BLAS, NVIDIA driver and GPUs with their "
      "peer-access/NVLink matrix, CUDA multicast, CUDA IPC, the CUDA runtime and cuBLAS, NCCL, "
      "MPI, torchrun variables, and what a TransformerEngine/Megatron-LM launch needs (torch, "
      "TransformerEngine and Megatron-core versions, CUDA_DEVICE_MAX_CONNECTIONS); one line per "
      "item. Every external program runs without a shell and with a 5 s timeout. "
      "Reporting an absence is its job, so it exits 0 whatever is missing (\"no GPU\" included); "
      "exit 2 only for bad flags");
  args->json.add_to(sub, "the report");
  add_force_flag(sub, args->force, "--json-out");
  sub->callback([args] {
    args->json.check_writable(args->force);
    const launch::RuntimeReport report = launch::probe_runtime();
    if (args->json.any()) args->json.emit(report_json(report), args->force);
    if (!args->json.to_stdout()) print_text(report);
  });
}

}  // namespace compass::cli
