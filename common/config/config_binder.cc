#include "common/config/config_binder.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace tandem::config {
namespace {

constexpr size_t kMaxConfigBytes = 1 << 20;
constexpr int kMaxDepth = 8;

template <typename T>
Status ParseNumber(const std::string& text, T& out, const std::string& name) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  T parsed{};
  auto [ptr, ec] = std::from_chars(begin, end, parsed);
  if (ec != std::errc() || ptr != end || text.empty()) {
    return InvalidArgumentError("config '" + name + "': not a valid number: '" + text + "'");
  }
  out = parsed;
  return Status::Ok();
}

Status ParseBool(const std::string& text, bool& out, const std::string& name) {
  if (text == "true" || text == "1" || text == "yes" || text == "on") {
    out = true;
  } else if (text == "false" || text == "0" || text == "no" || text == "off") {
    out = false;
  } else {
    return InvalidArgumentError("config '" + name + "': not a boolean: '" + text + "'");
  }
  return Status::Ok();
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

std::string ConfigBinder::FlagName(const std::string& name) {
  std::string flag = "--" + name;
  for (char& c : flag) {
    if (c == '.' || c == '_') c = '-';
  }
  return flag;
}

Status ConfigBinder::UnknownChoice(const std::string& name, const std::string& text,
                                   const std::vector<std::string>& names) {
  return InvalidArgumentError("config '" + name + "': '" + text + "' is not one of " + JoinNames(names));
}

Status ConfigBinder::CheckRecord(const Entry& e, const Record& record, const std::string& where) {
  for (const std::string& key : e.record_keys) {
    if (record.count(key) == 0) return InvalidArgumentError(where + ": '" + e.name + "' item lacks '" + key + "'");
  }
  std::vector<std::string> keys = e.record_keys;
  keys.insert(keys.end(), e.optional_record_keys.begin(), e.optional_record_keys.end());
  for (const auto& [key, value] : record) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      return InvalidArgumentError(where + ": '" + e.name + "' item has an unknown key '" + key +
                                  "' (keys: " + JoinNames(keys) + ")");
    }
  }
  return Status::Ok();
}

// The item text is never quoted in errors: record members may be secrets.
StatusOr<ConfigBinder::Record> ConfigBinder::ParseRecordFlag(const Entry& e, const std::string& text) {
  const std::string where = "flag " + FlagName(e.name);
  Record record;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string part = text.substr(start, end - start);
    const size_t eq = part.find('=');
    if (eq == std::string::npos) {
      std::string form;
      for (const std::string& key : e.record_keys) form += (form.empty() ? "" : ",") + key + "=...";
      return InvalidArgumentError(where + ": each item is " + form);
    }
    if (!record.emplace(part.substr(0, eq), part.substr(eq + 1)).second) {
      return InvalidArgumentError(where + ": '" + part.substr(0, eq) + "' given twice in one item");
    }
    start = end + 1;
  }
  TANDEM_RETURN_IF_ERROR(CheckRecord(e, record, where));
  return record;
}

ConfigBinder::Entry& ConfigBinder::Add(const std::string& name, const std::string& help) {
  TANDEM_CHECK(Find(name) == nullptr) << "duplicate config field " << name;
  entries_.push_back(Entry{});
  entries_.back().name = name;
  entries_.back().help = help;
  return entries_.back();
}

ConfigBinder::Entry* ConfigBinder::Find(const std::string& name) {
  for (Entry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

void ConfigBinder::Field(const std::string& name, bool& value, const std::string& help) {
  Entry& e = Add(name, help);
  e.set = [&value, name](const std::string& s) { return ParseBool(s, value, name); };
  e.get = [&value] { return std::string(value ? "true" : "false"); };
}

void ConfigBinder::Field(const std::string& name, int& value, const std::string& help) {
  Entry& e = Add(name, help);
  e.set = [&value, name](const std::string& s) { return ParseNumber(s, value, name); };
  e.get = [&value] { return std::to_string(value); };
}

void ConfigBinder::Field(const std::string& name, int64_t& value, const std::string& help) {
  Entry& e = Add(name, help);
  e.set = [&value, name](const std::string& s) { return ParseNumber(s, value, name); };
  e.get = [&value] { return std::to_string(value); };
}

void ConfigBinder::Field(const std::string& name, double& value, const std::string& help) {
  Entry& e = Add(name, help);
  e.set = [&value, name](const std::string& s) { return ParseNumber(s, value, name); };
  e.get = [&value] {
    std::ostringstream out;
    out << value;
    return out.str();
  };
}

void ConfigBinder::Field(const std::string& name, std::string& value, const std::string& help) {
  Entry& e = Add(name, help);
  e.set = [&value](const std::string& s) {
    value = s;
    return Status::Ok();
  };
  e.get = [&value] { return value; };
}

void ConfigBinder::Secret(const std::string& name, std::string& value, const std::string& help) {
  Field(name, value, help);
  entries_.back().get = [&value] { return value.empty() ? std::string() : std::string("(hidden)"); };
}

void ConfigBinder::Field(const std::string& name, std::vector<std::string>& value, const std::string& help) {
  Entry& e = Add(name, help);
  e.is_list = true;
  e.set = [&value](const std::string& s) {
    value = {s};
    return Status::Ok();
  };
  e.set_list = [&value](const std::vector<std::string>& v) { value = v; };
  e.get = [&value] {
    std::string out;
    for (const auto& v : value) out += (out.empty() ? "" : ",") + v;
    return out;
  };
}

void ConfigBinder::AddFlags(CLI::App& app) {
  app.add_option("--config", config_path_, "YAML config file (flags override it)");
  for (Entry& e : entries_) {
    e.option = app.add_option(FlagName(e.name), e.flag_values, e.help + " [" + e.get() + "]");
    if (!e.record_keys.empty()) e.option->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    if (!e.is_list) e.option->expected(1);
  }
}

Status ConfigBinder::ApplyYaml(const std::string& yaml_text, const std::string& origin) {
  if (yaml_text.size() > kMaxConfigBytes) {
    return InvalidArgumentError(origin + ": config larger than 1 MiB");
  }
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const std::exception& e) {
    return InvalidArgumentError(origin + ": not valid YAML: " + e.what());
  }
  if (root.IsNull()) return Status::Ok();
  if (!root.IsMap()) return InvalidArgumentError(origin + ": top level must be a map");
  std::function<Status(const YAML::Node&, const std::string&, int)> walk =
      [&](const YAML::Node& node, const std::string& prefix, int depth) -> Status {
    if (depth > kMaxDepth) return InvalidArgumentError(origin + ": nesting too deep");
    for (const auto& kv : node) {
      std::string key = prefix + kv.first.as<std::string>("");
      const YAML::Node& v = kv.second;
      Entry* e = Find(key);
      if (v.IsMap() && e == nullptr) {
        TANDEM_RETURN_IF_ERROR(walk(v, key + ".", depth + 1));
        continue;
      }
      if (e == nullptr) return InvalidArgumentError(origin + ": unknown config key '" + key + "'");
      if (!e->record_keys.empty()) {
        if (!v.IsSequence()) return InvalidArgumentError(origin + ": '" + key + "' must be a list of maps");
        std::vector<Record> items;
        for (const auto& item : v) {
          if (!item.IsMap()) return InvalidArgumentError(origin + ": '" + key + "' items must be maps");
          Record record;
          for (const auto& member : item) {
            if (!member.second.IsScalar()) {
              return InvalidArgumentError(origin + ": '" + key + "' item members must be scalars");
            }
            record[member.first.as<std::string>("")] = member.second.Scalar();
          }
          TANDEM_RETURN_IF_ERROR(CheckRecord(*e, record, origin));
          items.push_back(std::move(record));
        }
        e->set_records(items);
      } else if (v.IsSequence()) {
        if (!e->is_list) return InvalidArgumentError(origin + ": '" + key + "' is not a list");
        std::vector<std::string> items;
        for (const auto& item : v) {
          if (!item.IsScalar()) return InvalidArgumentError(origin + ": '" + key + "' items must be scalars");
          items.push_back(item.Scalar());
        }
        e->set_list(items);
      } else if (v.IsScalar()) {
        TANDEM_RETURN_IF_ERROR(e->set(v.Scalar()).WithContext(origin));
      } else {
        return InvalidArgumentError(origin + ": '" + key + "' has an unsupported value");
      }
    }
    return Status::Ok();
  };
  return walk(root, "", 0);
}

Status ConfigBinder::Apply() {
  if (!config_path_.empty()) {
    std::ifstream in(config_path_, std::ios::binary);
    if (!in) return NotFoundError("cannot open config file " + config_path_);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    TANDEM_RETURN_IF_ERROR(ApplyYaml(text, config_path_));
  }
  for (Entry& e : entries_) {
    if (e.option == nullptr || e.option->count() == 0) continue;
    if (!e.record_keys.empty()) {
      std::vector<Record> items;
      for (const std::string& text : e.flag_values) {
        TANDEM_ASSIGN_OR_RETURN(Record record, ParseRecordFlag(e, text));
        items.push_back(std::move(record));
      }
      e.set_records(items);
    } else if (e.is_list) {
      e.set_list(e.flag_values);
    } else {
      TANDEM_RETURN_IF_ERROR(e.set(e.flag_values.back()).WithContext("flag " + FlagName(e.name)));
    }
  }
  return Status::Ok();
}

std::optional<int> ConfigBinder::ParseCommandLine(const std::string& program, const std::string& description, int argc,
                                                  const char* const* argv,
                                                  const std::function<void(CLI::App&)>& add_more) {
  CLI::App app{program + ": " + description, program};
  AddFlags(app);
  if (add_more) add_more(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  Status applied = Apply();
  if (!applied.ok()) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), applied.ToString().c_str());
    return 2;
  }
  return std::nullopt;
}

std::vector<std::string> ConfigBinder::Names() const {
  std::vector<std::string> names;
  for (const Entry& e : entries_) names.push_back(e.name);
  return names;
}

std::string ConfigBinder::Dump() const {
  std::string out;
  for (const Entry& e : entries_) out += e.name + ": " + e.get() + "\n";
  return out;
}

}  // namespace tandem::config
