#pragma once
// A cluster: identical nodes (each a machine Profile: its GPUs and the links inside), the
// compute NICs of a node, and the network between nodes. Built-in clusters and the JSON form
// are documented in docs/job.md with the source of every number.

#include <cstdint>
#include <string>
#include <vector>

#include "compass/core/result.hpp"
#include "compass/hardware/profile.hpp"

namespace compass::job {

/// The compute NICs of one node.
struct NicSpec {
  int count = 1;            ///< compute NICs per node (a file without it: the profile's NIC nodes)
  double gbps = 100;        ///< line rate per NIC, Gb/s per direction
  double efficiency = 0.9;  ///< fraction of the line rate collectives reach
  double latency_s = 2e-6;  ///< one message, NIC to NIC through one switch
  bool rail_optimized = true;  ///< each GPU has its own NIC (false: GPUs share the NICs)
  std::string source;
  bool operator==(const NicSpec&) const = default;
};

/// The network between nodes.
struct NetworkSpec {
  double oversubscription = 1;  ///< 1: non-blocking fat tree; k: k:1 at the leaf uplinks
  double hop_latency_s = 0.5e-6;
  int hops = 3;  ///< switch hops between two nodes (leaf, spine, leaf)
  std::string source;
  bool operator==(const NetworkSpec&) const = default;
};

struct Cluster {
  std::string name;
  std::string description;
  hardware::Profile node;  ///< one node; its GPUs share the node's fast links
  int max_nodes = 0;       ///< 0: as many nodes as asked for
  NicSpec nic;
  NetworkSpec network;
  std::vector<std::string> notes;
  bool operator==(const Cluster&) const = default;

  int gpus_per_node() const { return node.gpu_count(); }
  /// Bytes/s per direction one GPU gets from the node's NICs when every GPU of the node sends
  /// at once (collectives of all ranks run together), after oversubscription.
  double nic_bytes_per_s_per_gpu() const;
  /// One message between GPUs of two nodes: NIC latency plus the switch hops.
  double inter_node_latency_s() const;
};

/// Names of the built-in clusters, in display order.
std::vector<std::string> cluster_names();
/// A built-in cluster; the error lists the known names.
Result<Cluster> builtin_cluster(const std::string& name);
/// A built-in cluster name, a cluster JSON file, or a machine profile JSON file or preset name
/// (a one-node cluster with no NICs).
Result<Cluster> resolve_cluster(const std::string& name_or_path);
/// Parses a cluster JSON document (docs/job.md); `origin` prefixes errors.
Result<Cluster> cluster_from_json(const std::string& text, const std::string& origin);
/// The cluster as JSON (the node as its full profile); cluster_from_json reads it back.
std::string cluster_to_json(const Cluster& c);
/// Positive NIC count and rate, efficiency in (0, 1], oversubscription >= 1, latencies >= 0.
Status validate(const Cluster& c);

}  // namespace compass::job
