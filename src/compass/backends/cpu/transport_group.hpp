#pragma once
// The processes of a multi-process run, seen through the transport that bootstrapped them, as
// a launch::ProcessGroup (what the CUDA backend's one-process-per-GPU path needs: exchanges and
// failure announcements). A failure another process announces is kept and returned by every
// later call.

#include <string>
#include <vector>

#include "compass/backends/cpu/transport.hpp"
#include "compass/backends/launch/process_group.hpp"

namespace compass::backends::cpu {

class TransportGroup final : public launch::ProcessGroup, private TransportSink {
 public:
  /// `t` must outlive the group.
  TransportGroup(Transport& t, int local_rank) : t_(t), local_rank_(local_rank) {}
  int rank() const override { return t_.rank(); }
  int size() const override { return t_.size(); }
  int local_rank() const override { return local_rank_; }
  Result<std::vector<std::string>> all_gather(const std::string& mine, double timeout_s) override;
  Status peers_ok() override;
  void announce_failure(const std::string& what) override;

 private:
  void on_message(const Message& m) override;
  void on_data(int) override {}

  Transport& t_;
  int local_rank_ = 0;
  std::string failure_;
};

}  // namespace compass::backends::cpu
