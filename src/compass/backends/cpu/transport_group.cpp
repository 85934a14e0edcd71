#include "compass/backends/cpu/transport_group.hpp"

#include <fmt/format.h>

namespace compass::backends::cpu {

Result<std::vector<std::string>> TransportGroup::all_gather(const std::string& mine,
                                                            double timeout_s) {
  COMPASS_TRY(peers_ok());
  return t_.all_gather(mine, timeout_s);
}

Status TransportGroup::peers_ok() {
  if (failure_.empty())
    if (auto polled = t_.poll(*this); !polled.ok()) failure_ = polled.error().message;
  if (failure_.empty()) return Status::success();
  return make_error("{}", failure_);
}

void TransportGroup::announce_failure(const std::string& what) {
  for (int r = 0; r < t_.size(); ++r)
    if (r != t_.rank()) t_.post(r, Message{MessageKind::abort, -1, t_.rank(), what});
}

void TransportGroup::on_message(const Message& m) {
  if (m.kind == MessageKind::abort && failure_.empty())
    failure_ = fmt::format("stopped because rank {} failed: {}", m.from, m.text);
}

}  // namespace compass::backends::cpu
