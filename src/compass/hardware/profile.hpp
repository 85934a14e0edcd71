#pragma once
// The hardware model: a machine as nodes (GPUs and the switches, root complexes, sockets,
// host memory and NICs between them), full-duplex links with a bandwidth per direction, the
// route between every ordered pair of GPUs, device specs, and calibration data.
// A Profile is a plain value; load/save/validate live in profile_io.hpp, presets in presets.hpp.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compass/core/dtype.hpp"
#include "compass/core/result.hpp"

namespace compass::hardware {

/// What a node of the topology is.
enum class NodeKind { gpu, pcie_switch, root_complex, cpu_socket, host_memory, nvswitch, nic, network };

/// The specification of one GPU model.
struct DeviceSpec {
  std::string name;                        ///< e.g. "RTX A6000"
  std::string arch;                        ///< e.g. "sm_86"
  int sm_count = 0;
  std::map<DType, double> peak_flops;      ///< dense tensor peak, FLOP/s, per dtype
  double memory_bandwidth_bytes_per_s = 0;
  double memory_bytes = 0;
  int copy_engines = 0;                    ///< asynchronous copy engines usable for transfers
  bool operator==(const DeviceSpec&) const = default;
};

/// A vertex of the topology graph.
struct Node {
  std::string name;          ///< unique, e.g. "gpu0", "pcie-sw0", "socket1"
  NodeKind kind = NodeKind::gpu;
  std::string device;        ///< for GPUs: the name of a DeviceSpec in Profile::devices
  bool operator==(const Node&) const = default;
};

/// What a link physically is (for display and for default interference behaviour).
enum class LinkKind { nvlink, pcie, inter_socket, memory, nvswitch, network };

/// A full-duplex link between nodes a and b. "Forward" is a->b, "reverse" is b->a.
/// A link whose `shared` flag is set is a segment that several GPU pairs' routes cross
/// (a PCIe switch uplink, a root complex port, the cross-socket link, a NIC).
struct Link {
  std::string name;                       ///< unique, e.g. "nvlink-0-1", "pcie-sw0-up"
  LinkKind kind = LinkKind::pcie;
  int a = 0;                              ///< node index
  int b = 0;                              ///< node index
  double bandwidth_bytes_per_s = 0;       ///< a->b
  double reverse_bandwidth_bytes_per_s = 0;  ///< b->a
  double latency_s = 0;
  bool shared = false;
  std::string source;                     ///< where the numbers come from ("assumed: ..." if so)
  bool operator==(const Link&) const = default;
};

/// One link traversed in one direction.
struct Hop {
  int link = 0;
  bool forward = true;  ///< true: a->b
  bool operator==(const Hop&) const = default;
};

/// The path data takes from GPU `src` to GPU `dst` (GPU ordinals, not node indices).
struct Route {
  int src = 0;
  int dst = 0;
  std::vector<Hop> hops;
  bool operator==(const Route&) const = default;
};

/// A measured GEMM time (filled by calibration).
struct GemmSample {
  DType dtype = DType::bf16;
  std::int64_t m = 0, n = 0, k = 0;
  double time_s = 0;
  bool operator==(const GemmSample&) const = default;
};

/// Fixed costs; defaults are documented in docs/profile-format.md.
struct Overheads {
  double kernel_launch_s = 5e-6;      ///< one kernel launch / one GEMM call
  double collective_launch_s = 10e-6; ///< one NCCL collective call beyond its link latency
  double flag_wait_s = 1e-6;          ///< one fused-kernel wait on an arrival flag
  double copy_launch_s = 3e-6;        ///< one copy-engine transfer issue
  bool operator==(const Overheads&) const = default;
};

/// How computation and communication slow each other when they overlap (factors >= 1).
struct Interference {
  double gemm_slowdown_copy_engine = 1.05;  ///< GEMM beside copy-engine transfers
  double gemm_slowdown_sm_copy = 1.15;      ///< GEMM beside SM-driven copies / NCCL kernels
  double comm_slowdown_beside_gemm = 1.05;  ///< transfer beside a running GEMM (memory contention)
  bool operator==(const Interference&) const = default;
};

/// Calibration data; every part is optional, models fall back to documented defaults.
struct Calibration {
  std::vector<GemmSample> gemm;                  ///< GEMM time table
  std::optional<double> copy_bandwidth_bytes_per_s;  ///< measured device-to-device copy
  std::optional<double> gemm_efficiency;         ///< fraction of peak a large GEMM reaches
  /// The fused GEMM kernel's time / cuBLASLt's on the same GEMM with every arrival flag already
  /// set: what fusing costs (or saves) in the GEMM itself. Absent: 1.
  std::optional<double> fused_gemm_overhead;
  /// The fused kernel's time beside copy-engine copies / alone (>= 1). Absent: the GEMM's
  /// `Interference::gemm_slowdown_copy_engine`.
  std::optional<double> fused_slowdown_copy_engine;
  std::string source;                            ///< how and where it was measured
  bool operator==(const Calibration&) const = default;
};

/// A machine.
struct Profile {
  static constexpr int kFormatVersion = 1;

  std::string name;
  std::string description;
  std::vector<DeviceSpec> devices;
  std::vector<Node> nodes;
  std::vector<Link> links;
  std::vector<Route> routes;  ///< one per ordered pair of distinct GPUs
  bool p2p = true;            ///< false: GPU-to-GPU traffic is staged through host memory
  /// With p2p false: GPU pairs (ordinals, first < second, sorted) that still reach each other
  /// directly, e.g. over an NVLink bridge on a machine with PCIe peer-to-peer disabled.
  std::vector<std::pair<int, int>> p2p_pairs;
  Overheads overheads;
  Interference interference;
  Calibration calibration;
  std::vector<std::string> notes;  ///< layout assumptions and sources, shown by `compass topo`

  bool operator==(const Profile&) const = default;

  /// Whether GPUs a and b (ordinals) read and write each other's memory directly: p2p, or the
  /// pair is listed in p2p_pairs.
  bool peer_access(int a, int b) const;
  /// Number of GPUs; GPU ordinal i is the i-th node of kind gpu.
  int gpu_count() const;
  /// Node index of GPU ordinal `gpu`.
  int gpu_node(int gpu) const;
  /// The DeviceSpec of GPU ordinal `gpu`.
  const DeviceSpec& gpu_device(int gpu) const;
  /// The route from GPU src to GPU dst (src != dst); CHECKs that it exists.
  const Route& route(int src, int dst) const;
  /// Bandwidth of a hop in its direction.
  double hop_bandwidth(const Hop& h) const;
  /// Sum of the latencies along the route.
  double route_latency_s(int src, int dst) const;
  /// Smallest hop bandwidth along the route.
  double route_bandwidth(int src, int dst) const;
  /// "name a->b" for a hop (e.g. "pcie-sw0-up up") for reports.
  std::string hop_name(const Hop& h) const;
};

std::string_view to_string(NodeKind k);
std::optional<NodeKind> parse_node_kind(std::string_view s);
std::string_view to_string(LinkKind k);
std::optional<LinkKind> parse_link_kind(std::string_view s);

/// Success when every GPU of the profile lists a dense peak for `dtype` (the GEMM model prices a
/// dtype only from its own peak); else an error naming the dtype, the profile and the device.
Status check_peak_flops(const Profile& p, DType dtype);

/// Computes a route for every ordered GPU pair not yet routed: fewest hops, ties broken by the
/// widest bottleneck; for pairs without peer access (Profile::peer_access) the path is forced
/// through a host_memory node.
/// Errors name the first pair with no path.
Status compute_missing_routes(Profile& p);

}  // namespace compass::hardware
