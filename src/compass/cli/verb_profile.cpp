// compass profile dump|diff|check: write any preset or profile as a complete loadable file,
// list what differs between two profiles, and validate a file listing every error.

#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compass/cli/common.hpp"
#include "compass/hardware/profile_diff.hpp"
#include "compass/hardware/profile_io.hpp"

namespace compass::cli {

namespace {

struct DumpOptions {
  std::string profile;
  std::string out;
  bool force = false;
};

struct DiffOptions {
  std::string a, b;
  JsonOutput json;
  bool force = false;
};

struct CheckOptions {
  std::string file;
  JsonOutput json;
  bool force = false;
};

void run_dump(const DumpOptions& o) {
  const hardware::Profile p = load_profile(o.profile);
  if (o.out.empty()) {
    out("{}", hardware::profile_to_json(p));
    return;
  }
  unwrap(hardware::save_profile_file(p, o.out, o.force));
  out("wrote {} ({} GPUs, {} links, {} routes)\n", o.out, p.gpu_count(), p.links.size(),
             p.routes.size());
}

void run_diff(const DiffOptions& o) {
  o.json.check_writable(o.force);
  const hardware::Profile a = load_profile(o.a);
  const hardware::Profile b = load_profile(o.b);
  const auto diffs = hardware::diff_profiles(a, b);
  if (o.json.any()) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& d : diffs) out.push_back({{"path", d.path}, {"a", d.a}, {"b", d.b}});
    o.json.emit(out, o.force);
  }
  if (!o.json.to_stdout()) {
    out("a: {}\nb: {}\n", o.a, o.b);
    for (const auto& d : diffs) out("{}\n  a: {}\n  b: {}\n", d.path, d.a, d.b);
    out("{} difference{}\n", diffs.size(), diffs.size() == 1 ? "" : "s");
  }
  // Like diff(1): 0 when identical, 1 when they differ (2 stays for bad input).
  if (!diffs.empty()) throw ExitCode{1};
}

void run_check(const CheckOptions& o) {
  o.json.check_writable(o.force);
  const std::vector<Error> errors = hardware::check_profile_file(o.file);
  if (o.json.any()) {
    nlohmann::ordered_json out;
    out["file"] = o.file;
    out["ok"] = errors.empty();
    out["errors"] = nlohmann::ordered_json::array();
    for (const Error& e : errors) out["errors"].push_back(e.message);
    o.json.emit(out, o.force);
  }
  if (o.json.to_stdout()) {
    // the JSON above is the whole output
  } else if (errors.empty()) {
    const hardware::Profile p = unwrap(hardware::load_profile_file(o.file));
    out("{}: ok ({} GPUs, {} nodes, {} links, {} routes)\n", o.file, p.gpu_count(),
               p.nodes.size(), p.links.size(), p.routes.size());
  } else {
    for (const Error& e : errors) out("{}\n", e.message);
  }
  if (!errors.empty())
    throw UsageError(fmt::format("{}: {} error{}", o.file, errors.size(),
                                 errors.size() == 1 ? "" : "s"));
}

}  // namespace

void add_profile_verb(CLI::App& app) {
  auto* sub = app.add_subcommand("profile", "Dump, compare and check machine profiles");
  sub->require_subcommand(1);

  auto dump = std::make_shared<DumpOptions>();
  auto* d = sub->add_subcommand(
      "dump", "Write a preset or profile file as a complete, loadable profile (stdout or --out)");
  d->add_option("profile", dump->profile, "Preset name or profile file")->required();
  d->add_option("--out", dump->out, "Write to this file instead of stdout");
  d->add_flag("--force", dump->force, "Overwrite --out if it exists");
  d->callback([dump] { run_dump(*dump); });

  auto diff = std::make_shared<DiffOptions>();
  auto* f = sub->add_subcommand(
      "diff", "List what differs between two profiles by JSON path (exit 1 when they differ)");
  f->add_option("a", diff->a, "Preset name or profile file")->required();
  f->add_option("b", diff->b, "Preset name or profile file")->required();
  diff->json.add_to(f, "the differences");
  add_force_flag(f, diff->force, "--json-out");
  f->callback([diff] { run_diff(*diff); });

  auto check = std::make_shared<CheckOptions>();
  auto* c = sub->add_subcommand(
      "check", "Validate a profile file, listing every error with its JSON path (exit 2 if any)");
  c->add_option("file", check->file, "Profile file")->required();
  check->json.add_to(c, "the result and every error");
  add_force_flag(c, check->force, "--json-out");
  c->callback([check] { run_check(*check); });
}

}  // namespace compass::cli
