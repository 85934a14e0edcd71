#include "compass/measure/topo_matrix.hpp"

#include "compass/core/format.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "compass/core/units.hpp"
#include "compass/hardware/profile_io.hpp"

namespace compass::measure {

using namespace hardware;  // what these read and write: profiles, GPU models, links

namespace {

bool is_gpu_label(std::string_view t) {
  if (t.size() < 4 || t.substr(0, 3) != "GPU") return false;
  return std::all_of(t.begin() + 3, t.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

std::optional<TopoEntry> parse_code(std::string_view t) {
  if (t == "X") return TopoEntry{TopoCode::self, 0};
  if (t == "PIX") return TopoEntry{TopoCode::pix, 0};
  if (t == "PXB") return TopoEntry{TopoCode::pxb, 0};
  if (t == "PHB") return TopoEntry{TopoCode::phb, 0};
  if (t == "NODE") return TopoEntry{TopoCode::node, 0};
  // Older drivers printed SOC for what newer ones call SYS.
  if (t == "SYS" || t == "SOC") return TopoEntry{TopoCode::sys, 0};
  if (t.size() >= 3 && t.size() <= 4 && t.substr(0, 2) == "NV" &&
      std::all_of(t.begin() + 2, t.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    const int n = std::stoi(std::string(t.substr(2)));
    if (n >= 1) return TopoEntry{TopoCode::nvlink, n};
  }
  return std::nullopt;
}

std::string code_text(const TopoEntry& e) {
  switch (e.code) {
    case TopoCode::self: return "X";
    case TopoCode::nvlink: return fmt::format("NV{}", e.nvlinks);
    case TopoCode::pix: return "PIX";
    case TopoCode::pxb: return "PXB";
    case TopoCode::phb: return "PHB";
    case TopoCode::node: return "NODE";
    case TopoCode::sys: return "SYS";
  }
  return "?";
}

/// Union-find over GPU ordinals.
class Groups {
 public:
  explicit Groups(int n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  int find(int x) { return parent_[x] == x ? x : parent_[x] = find(parent_[x]); }
  void join(int a, int b) {
    a = find(a);
    b = find(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);
  }
  /// Classes in order of their lowest member, each sorted.
  std::vector<std::vector<int>> classes() {
    std::map<int, std::vector<int>> by_root;
    for (int i = 0; i < static_cast<int>(parent_.size()); ++i) by_root[find(i)].push_back(i);
    std::vector<std::vector<int>> out;
    for (auto& [root, members] : by_root) out.push_back(std::move(members));
    return out;
  }

 private:
  std::vector<int> parent_;
};

// Levels of PCIe containment, outermost first: the same NUMA node / socket (not SYS), the
// same root complex (not NODE or SYS), the same switch tree (PIX or PXB), the same switch (PIX).
enum Level { kSocket = 0, kRootComplex = 1, kSwitchTree = 2, kSwitch = 3, kLevels = 4 };

bool same_at(TopoCode c, int level) {
  switch (level) {
    case kSocket: return c == TopoCode::pix || c == TopoCode::pxb || c == TopoCode::phb || c == TopoCode::node;
    case kRootComplex: return c == TopoCode::pix || c == TopoCode::pxb || c == TopoCode::phb;
    case kSwitchTree: return c == TopoCode::pix || c == TopoCode::pxb;
    case kSwitch: return c == TopoCode::pix;
    default: return false;
  }
}

std::string gpu_list(const std::vector<int>& g) {
  std::vector<std::string> s;
  for (int x : g) s.push_back(std::to_string(x));
  return fmt::format("{}", fmt::join(s, ","));
}

std::string gbs(double b) { return fmt::format("{:g} GB/s", b / kGB); }

}  // namespace

Result<TopoMatrix> parse_topo_matrix(std::string_view text, std::string_view origin) {
  std::vector<std::string_view> lines;
  for (std::size_t start = 0; start <= text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    start = end + 1;
  }
  if (std::all_of(text.begin(), text.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); }))
    return make_error("{}: empty file (expected the output of nvidia-smi topo -m)", origin);

  TopoMatrix m;
  std::vector<std::string> columns;
  bool has_cpu = false, has_numa = false;
  std::size_t li = 0;
  for (; li < lines.size(); ++li) {
    auto t = split_ws(lines[li]);
    if (t.empty() || t[0][0] == '#') continue;
    if (t[0] == "GPU0" && (t.size() == 1 || t[1] != "X")) break;
  }
  if (li == lines.size())
    return make_error(
        "{}: no matrix header (a line starting with GPU0 GPU1 ... as nvidia-smi topo -m prints)",
        origin);
  {
    const auto t = split_ws(lines[li]);
    std::size_t k = 0;
    for (; k < t.size(); ++k) {
      if (t[k] == "CPU" || t[k] == "NUMA" || t[k] == "GPU") break;
      columns.push_back(t[k]);
    }
    if (k > static_cast<std::size_t>(kMaxTopoColumns))
      return make_error("{}: line {}: the header names {} columns (at most {})", origin, li + 1, k,
                        kMaxTopoColumns);
    const std::size_t header_gpus = static_cast<std::size_t>(
        std::count_if(t.begin(), t.begin() + static_cast<long>(k), [](const std::string& c) {
          return is_gpu_label(c);
        }));
    if (header_gpus > static_cast<std::size_t>(kMaxTopoGpus))
      return make_error("{}: line {}: the header names {} GPUs (at most {} on one machine)", origin,
                        li + 1, header_gpus, kMaxTopoGpus);
    const std::string rest = fmt::format("{}", fmt::join(t.begin() + static_cast<long>(k), t.end(), " "));
    has_cpu = rest.find("CPU Affinity") != std::string::npos;
    has_numa = rest.find("NUMA Affinity") != std::string::npos;
    std::set<std::string> seen;
    for (const std::string& c : columns) {
      if (!seen.insert(c).second)
        return make_error("{}: line {}: header names column {} twice", origin, li + 1, c);
      if (is_gpu_label(c)) {
        if (c != fmt::format("GPU{}", m.gpus.size()))
          return make_error("{}: line {}: header column {} where GPU{} was expected", origin,
                            li + 1, c, m.gpus.size());
        m.gpus.push_back(c);
      } else {
        m.nics.push_back(c);
      }
    }
  }
  const std::size_t n = m.gpus.size();
  const std::size_t cols = columns.size();
  m.gpu.assign(n, std::vector<TopoEntry>(n));
  m.nic.assign(n, std::vector<TopoEntry>(m.nics.size()));
  m.cpu_affinity.assign(n, "");
  m.numa.assign(n, std::nullopt);
  std::vector<char> have(n, 0);
  for (++li; li < lines.size(); ++li) {
    const auto t = split_ws(lines[li]);
    if (t.empty()) continue;
    if (t[0][0] == '#') continue;
    const bool known = std::find(columns.begin(), columns.end(), t[0]) != columns.end();
    if (!known) {
      if (is_gpu_label(t[0]))
        return make_error(
            "{}: line {}: row {} but the header names {} GPU{} (GPU0..GPU{}): mismatched GPU count",
            origin, li + 1, t[0], n, n == 1 ? "" : "s", n - 1);
      break;  // the legend or anything after the matrix
    }
    if (t.size() - 1 < cols)
      return make_error("{}: line {}: truncated row {}: {} of {} entries", origin, li + 1, t[0],
                        t.size() - 1, cols);
    std::vector<TopoEntry> row;
    for (std::size_t c = 0; c < cols; ++c) {
      auto e = parse_code(t[c + 1]);
      if (!e)
        return make_error(
            "{}: line {}: row {} column {}: unknown link code '{}' (expected X, NV#, PIX, PXB, "
            "PHB, NODE or SYS)",
            origin, li + 1, t[0], columns[c], t[c + 1]);
      row.push_back(*e);
    }
    if (!is_gpu_label(t[0])) continue;  // NIC rows repeat what the GPU rows say
    const std::size_t g = std::stoul(t[0].substr(3));
    if (have[g]) return make_error("{}: line {}: second row for {}", origin, li + 1, t[0]);
    have[g] = 1;
    for (std::size_t c = 0; c < cols; ++c) {
      if (is_gpu_label(columns[c]))
        m.gpu[g][std::stoul(columns[c].substr(3))] = row[c];
      else
        m.nic[g][std::find(m.nics.begin(), m.nics.end(), columns[c]) - m.nics.begin()] = row[c];
    }
    std::size_t k = cols + 1;
    if (has_cpu && k < t.size()) m.cpu_affinity[g] = t[k++];
    if (has_numa && k < t.size() && t[k] != "N/A") {
      const std::string& v = t[k];
      if (!v.empty() && std::all_of(v.begin(), v.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
        m.numa[g] = std::stoi(v);
    }
  }
  for (std::size_t g = 0; g < n; ++g)
    if (!have[g])
      return make_error("{}: truncated matrix: the header names {} GPUs but there is no row for GPU{}",
                        origin, n, g);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      const bool diag = i == j;
      if (diag != (m.gpu[i][j].code == TopoCode::self))
        return make_error("{}: row GPU{} column GPU{}: '{}' {}", origin, i, j, code_text(m.gpu[i][j]),
                          diag ? "on the diagonal (expected X)" : "off the diagonal");
      if (!(m.gpu[i][j] == m.gpu[j][i]))
        return make_error("{}: asymmetric matrix: GPU{} to GPU{} is {} but GPU{} to GPU{} is {}", origin,
                          i, j, code_text(m.gpu[i][j]), j, i, code_text(m.gpu[j][i]));
    }
  return m;
}

std::string default_gpu_key(const TopoMatrix& m) {
  int most = 0;
  for (const auto& row : m.gpu)
    for (const TopoEntry& e : row)
      if (e.code == TopoCode::nvlink) most = std::max(most, e.nvlinks);
  if (most >= 18) return "h100";
  if (most >= 12) return "a100";
  return "a6000";
}

Result<Profile> profile_from_topo(const TopoMatrix& m, const GpuModel& gpu,
                                  const TopoProfileOptions& options) {
  const int n = static_cast<int>(m.gpus.size());
  if (n == 0) return make_error("the matrix has no GPU");
  Profile p;
  p.name = options.name;
  p.description = fmt::format("{}x {} from nvidia-smi topo -m{}", n, gpu.device.name,
                              options.origin.empty() ? "" : " (" + options.origin + ")");
  p.p2p = options.p2p;
  p.devices.push_back(gpu.device);
  std::vector<std::string>& notes = p.notes;
  notes.push_back(fmt::format("GPU: {} ({})", gpu.device.name, gpu.source));

  COMPASS_ASSIGN(const double pcie_raw, pcie_raw_bytes_per_s(gpu.pcie_gen, gpu.pcie_width));
  const double pcie_bw = pcie_raw * kPcieEfficiency;
  const std::string pcie_source = fmt::format(
      "assumed: PCIe {}.0 x{} = {} raw per direction x {} efficiency = {}; latency assumed 1 us",
      gpu.pcie_gen, gpu.pcie_width, gbs(pcie_raw), kPcieEfficiency, gbs(pcie_bw));
  notes.push_back(fmt::format(
      "PCIe links (GPU links, switch uplinks, root ports) assumed PCIe {}.0 x{} like the GPU: {} "
      "per direction ({} raw x {} assumed efficiency)",
      gpu.pcie_gen, gpu.pcie_width, gbs(pcie_bw), gbs(pcie_raw), kPcieEfficiency));

  // --- PCIe containment from the codes; NV# hides the PCIe relation of a pair.
  std::vector<Groups> level;
  for (int l = 0; l < kLevels; ++l) level.emplace_back(n);
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j)
      for (int l = 0; l < kLevels; ++l)
        if (same_at(m.gpu[i][j].code, l)) level[l].join(i, j);
  // SYS between GPUs of one NUMA node (seen on some platforms): one socket, separate root
  // complexes, as the NUMA Affinity column says.
  bool sys_in_numa = false;
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j)
      if (m.numa[i] && m.numa[j] && *m.numa[i] == *m.numa[j] &&
          level[kSocket].find(i) != level[kSocket].find(j)) {
        level[kSocket].join(i, j);
        sys_in_numa = sys_in_numa || m.gpu[i][j].code == TopoCode::sys;
      }
  if (sys_in_numa)
    notes.push_back("some GPUs of one NUMA node show SYS between them: placed on that node's "
                    "socket, on separate root complexes");
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) {
      if (m.gpu[i][j].code != TopoCode::nvlink) continue;
      if (m.numa[i] && m.numa[j] && *m.numa[i] != *m.numa[j]) continue;  // different sockets
      // Join a hidden pair at the socket and root-complex levels when every third GPU sees
      // both the same way there (an NVLink bridge joins neighbouring slots).
      for (int l : {kSocket, kRootComplex}) {
        bool consistent = true;
        for (int k = 0; k < n; ++k) {
          if (k == i || k == j) continue;
          const TopoCode a = m.gpu[i][k].code, b = m.gpu[j][k].code;
          if (a == TopoCode::nvlink || b == TopoCode::nvlink) continue;
          if (same_at(a, l) != same_at(b, l)) consistent = false;
        }
        if (!consistent) break;
        if (level[l].find(i) != level[l].find(j)) {
          level[l].join(i, j);
          notes.push_back(fmt::format(
              "the PCIe path between GPU{} and GPU{} is hidden by their NVLink; assumed on the same "
              "{}",
              i, j, l == kSocket ? "socket" : "root complex"));
        }
      }
    }
  // Nesting: a finer class must sit inside one coarser class.
  for (int l = 1; l < kLevels; ++l)
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (level[l].find(i) == level[l].find(j) && level[l - 1].find(i) != level[l - 1].find(j))
          return make_error(
              "GPU{} and GPU{} share a PCIe {} but not a {}: the matrix is inconsistent", i, j,
              l == kRootComplex ? "root complex" : "switch", l - 1 == kSocket ? "socket" : "root complex");

  for (int g = 0; g < n; ++g) p.nodes.push_back(Node{fmt::format("gpu{}", g), NodeKind::gpu, gpu.device.name});
  auto add_node = [&](const std::string& name, NodeKind kind) {
    p.nodes.push_back(Node{name, kind, ""});
    return static_cast<int>(p.nodes.size()) - 1;
  };
  auto add_link = [&](const std::string& name, LinkKind kind, int a, int b, double bw,
                      double latency, bool shared, const std::string& source) {
    p.links.push_back(Link{name, kind, a, b, bw, bw, latency, shared, source});
  };

  const auto sockets = level[kSocket].classes();
  std::vector<int> attach(n, -1);  // node each GPU's PCIe link goes to
  std::vector<int> socket_nodes;
  int rc_count = 0, sw_count = 0;
  for (std::size_t s = 0; s < sockets.size(); ++s) {
    const int socket = add_node(fmt::format("socket{}", s), NodeKind::cpu_socket);
    socket_nodes.push_back(socket);
    const int mem = add_node(fmt::format("mem{}", s), NodeKind::host_memory);
    add_link(fmt::format("mem{}", s), LinkKind::memory, socket, mem, 100 * kGB, 0.5e-6, true,
             "assumed: 100 GB/s per direction for DMA into host DRAM, as the presets "
             "(docs/presets.md); latency assumed 0.5 us");
    std::set<int> numa;
    for (int g : sockets[s])
      if (m.numa[g]) numa.insert(*m.numa[g]);
    std::vector<std::string> numa_text;
    for (int x : numa) numa_text.push_back(std::to_string(x));
    notes.push_back(fmt::format("socket{} (a NUMA domain: SYS separates them): GPUs {}{}{}",
                                s, gpu_list(sockets[s]),
                                numa.empty() ? "" : fmt::format(", NUMA node {}", fmt::join(numa_text, "/")),
                                m.cpu_affinity[sockets[s][0]].empty()
                                    ? ""
                                    : fmt::format(", CPU affinity {}", m.cpu_affinity[sockets[s][0]])));
    // Root complexes of this socket.
    std::map<int, std::vector<int>> rcs;
    for (int g : sockets[s]) rcs[level[kRootComplex].find(g)].push_back(g);
    for (auto& [root, members] : rcs) {
      const int rc = add_node(fmt::format("rc{}", rc_count), NodeKind::root_complex);
      add_link(fmt::format("rc{}-up", rc_count), LinkKind::pcie, rc, socket, pcie_bw, 1e-6, true,
               pcie_source);
      ++rc_count;
      std::map<int, std::vector<int>> trees;
      for (int g : members) trees[level[kSwitchTree].find(g)].push_back(g);
      for (auto& [troot, tmembers] : trees) {
        if (tmembers.size() == 1) {
          attach[tmembers[0]] = rc;
          continue;
        }
        const int top = add_node(fmt::format("pcie-sw{}", sw_count), NodeKind::pcie_switch);
        add_link(fmt::format("pcie-sw{}-up", sw_count), LinkKind::pcie, top, rc, pcie_bw, 1e-6,
                 true, pcie_source);
        const int top_index = sw_count++;
        std::map<int, std::vector<int>> leaves;
        for (int g : tmembers) leaves[level[kSwitch].find(g)].push_back(g);
        if (leaves.size() == 1) {
          for (int g : tmembers) attach[g] = top;
          notes.push_back(fmt::format("pcie-sw{}: GPUs {} (PIX)", top_index, gpu_list(tmembers)));
          continue;
        }
        notes.push_back(fmt::format("pcie-sw{}: GPUs {} (PXB: more than one bridge between them)",
                                    top_index, gpu_list(tmembers)));
        for (auto& [lroot, lmembers] : leaves) {
          if (lmembers.size() == 1) {
            attach[lmembers[0]] = top;
            continue;
          }
          const int leaf = add_node(fmt::format("pcie-sw{}", sw_count), NodeKind::pcie_switch);
          add_link(fmt::format("pcie-sw{}-up", sw_count), LinkKind::pcie, leaf, top, pcie_bw, 1e-6,
                   true, pcie_source);
          notes.push_back(fmt::format("pcie-sw{}: GPUs {} (PIX), below pcie-sw{}", sw_count,
                                      gpu_list(lmembers), top_index));
          ++sw_count;
          for (int g : lmembers) attach[g] = leaf;
        }
      }
    }
  }
  for (int g = 0; g < n; ++g)
    add_link(fmt::format("pcie-gpu{}", g), LinkKind::pcie, g, attach[g], pcie_bw, 1e-6, false,
             pcie_source);
  for (std::size_t a = 0; a < socket_nodes.size(); ++a)
    for (std::size_t b = a + 1; b < socket_nodes.size(); ++b)
      add_link(fmt::format("xsocket-{}-{}", a, b), LinkKind::inter_socket, socket_nodes[a],
               socket_nodes[b], 20 * kGB, 1e-6, true,
               "assumed: 20 GB/s per direction for GPU traffic between sockets, as the presets "
               "(docs/presets.md); latency assumed 1 us");
  if (sockets.size() > 1)
    notes.push_back(fmt::format("{} sockets joined pairwise by 20 GB/s links (assumed)", sockets.size()));

  // --- NVLink.
  std::vector<int> nv_total(n, 0);
  bool any_nv = false, uniform = true;
  int first_count = 0;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (i != j) {
        const TopoEntry& e = m.gpu[i][j];
        if (e.code == TopoCode::nvlink) {
          any_nv = true;
          nv_total[i] += e.nvlinks;
          if (first_count == 0) first_count = e.nvlinks;
          if (e.nvlinks != first_count) uniform = false;
        } else {
          uniform = false;
        }
      }
  if (any_nv && gpu.nvlink_links == 0)
    return make_error("GPU model {} has no NVLink but the matrix shows NV# entries (pass --gpu)",
                      gpu.key);
  const bool over = std::any_of(nv_total.begin(), nv_total.end(),
                                [&](int t) { return t > gpu.nvlink_links; });
  const std::string nv_lat = "latency assumed 1.5 us GPU to GPU";
  if (any_nv && over) {
    if (!uniform)
      return make_error(
          "GPUs show more NVLinks in total than a {} has ({}), but not the same count to every "
          "peer: cannot tell the NVSwitch layout",
          gpu.device.name, gpu.nvlink_links);
    const int sw = add_node("nvswitch", NodeKind::nvswitch);
    const double bw = first_count * gpu.nvlink_link_bytes_per_s;
    for (int g = 0; g < n; ++g)
      add_link(fmt::format("nvl-gpu{}", g), LinkKind::nvswitch, g, sw, bw, 0.75e-6, false,
               fmt::format("assumed: NV{} = {} NVLink{} links x {} per direction (signalling "
                           "rate); {}",
                           first_count, first_count, gpu.nvlink_gen, gbs(gpu.nvlink_link_bytes_per_s),
                           nv_lat));
    notes.push_back(fmt::format(
        "NVSwitch: every GPU pair shows NV{} and {} peers x {} links exceed the {} links of a {}, "
        "so the links go to switches, modelled as one non-blocking node; {} per GPU per direction "
        "(assumed: signalling rate, no efficiency factor)",
        first_count, n - 1, first_count, gpu.nvlink_links, gpu.device.name, gbs(bw)));
  } else if (any_nv) {
    std::vector<std::string> pairs;
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) {
        const TopoEntry& e = m.gpu[i][j];
        if (e.code != TopoCode::nvlink) continue;
        const double bw = e.nvlinks * gpu.nvlink_link_bytes_per_s;
        add_link(fmt::format("nvlink-{}-{}", i, j), LinkKind::nvlink, i, j, bw, 1.5e-6, false,
                 fmt::format("assumed: NV{} = {} NVLink{} links x {} per direction (signalling "
                             "rate); {}",
                             e.nvlinks, e.nvlinks, gpu.nvlink_gen,
                             gbs(gpu.nvlink_link_bytes_per_s), nv_lat));
        pairs.push_back(fmt::format("({},{}) NV{}", i, j, e.nvlinks));
      }
    notes.push_back(fmt::format("NVLink pairs {}: each NV# link {} per direction (assumed: "
                                "signalling rate)",
                                fmt::join(pairs, " "), gbs(gpu.nvlink_link_bytes_per_s)));
  }
  // --- NICs: each hangs where its closest GPU's entry says (PIX: the GPU's switch, PXB: the top
  // of its switch tree, PHB: its root complex, NODE: its socket, SYS: another socket).
  std::map<int, int> parent;  // PCIe node -> the node its uplink goes to
  for (const Link& l : p.links)
    if (l.kind == LinkKind::pcie && l.name.ends_with("-up")) parent[l.a] = l.b;
  auto up_to = [&](int node, NodeKind kind) {
    while (p.nodes[node].kind != kind && parent.count(node)) node = parent[node];
    return node;
  };
  for (std::size_t k = 0; k < m.nics.size(); ++k) {
    int best = -1;
    for (int g = 0; g < n; ++g)
      if (best < 0 || m.nic[g][k].code < m.nic[best][k].code) best = g;
    if (best < 0) break;
    const TopoCode code = m.nic[best][k].code;
    int at = attach[best];
    std::string where;
    switch (code) {
      case TopoCode::pix: where = "PIX: the switch of GPU" + std::to_string(best); break;
      case TopoCode::pxb:
        while (parent.count(at) && p.nodes[parent[at]].kind == NodeKind::pcie_switch) at = parent[at];
        where = "PXB: the switch tree of GPU" + std::to_string(best);
        break;
      case TopoCode::phb:
        at = up_to(at, NodeKind::root_complex);
        where = "PHB: the root complex of GPU" + std::to_string(best);
        break;
      case TopoCode::node:
        at = up_to(at, NodeKind::cpu_socket);
        where = "NODE: the socket of GPU" + std::to_string(best);
        break;
      default: {
        at = up_to(at, NodeKind::cpu_socket);
        for (int sock : socket_nodes)
          if (sock != at) {
            at = sock;
            break;
          }
        where = "SYS to every GPU: the other socket";
      }
    }
    const int nic = add_node(fmt::format("nic{}", k), NodeKind::nic);
    add_link(fmt::format("pcie-nic{}", k), LinkKind::pcie, nic, at, pcie_bw, 1e-6, false,
             "assumed: the NIC's PCIe link at the GPUs' rate; its line rate is not in the matrix");
    notes.push_back(fmt::format("nic{} ({}) at {} ({}); line rate not in the matrix", k,
                                m.nics[k], p.nodes[at].name, where));
  }
  notes.push_back(options.p2p ? "GPU peer-to-peer access assumed available (the matrix does not say; "
                                "--no-p2p stages every transfer through host memory)"
                              : "GPU peer-to-peer access off (--no-p2p): transfers staged through "
                                "host memory");
  notes.push_back("latencies assumed: NVLink 1.5 us GPU to GPU, PCIe hop 1 us, host memory 0.5 us");

  COMPASS_TRY(compute_missing_routes(p));
  COMPASS_TRY(validate(p));
  return p;
}

}  // namespace compass::measure
