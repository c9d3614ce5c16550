// Reading a ClusterConfig out of a parsed TOML document: every key is looked
// up by name with its expected type, and whatever is left over is an unknown
// key (an error: a misspelt key must not silently fall back to a default).
// The semantic checks are in cluster_config_validate.cc.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/status_macros.h"
#include "runtime/config/cluster_config.h"
#include "runtime/config/toml_parser.h"

namespace splitspec::config {
namespace {

// "a string", "an integer", ...
std::string WithArticle(TomlValue::Kind kind) {
  const std::string name = TomlKindName(kind);
  return absl::StrCat(name[0] == 'a' || name[0] == 'i' ? "an " : "a ", name);
}

// Reads the keys of one TOML table into struct fields, recording each field's
// origin; Finish() refuses the keys nobody asked for.
class TableReader {
 public:
  // `prefix` names the table in field paths: "coordinator", "target_group[1]".
  TableReader(const TomlTable& table, std::string prefix, const std::string& base_dir,
              ClusterConfig* config)
      : table_(table), prefix_(std::move(prefix)), base_dir_(base_dir), config_(config) {}

  absl::Status String(const std::string& key, std::string* out) {
    ASSIGN_OR_RETURN(const TomlValue* v, Get(key, TomlValue::Kind::kString));
    if (v != nullptr) *out = v->string_value;
    return absl::OkStatus();
  }

  // A string naming a file or folder: relative ones resolve against the
  // config file's folder; empty stays empty.
  absl::Status Path(const std::string& key, std::string* out) {
    RETURN_IF_ERROR(String(key, out));
    if (!out->empty() && std::filesystem::path(*out).is_relative()) {
      *out = (std::filesystem::path(base_dir_) / *out).lexically_normal().string();
    }
    return absl::OkStatus();
  }

  absl::Status Int(const std::string& key, int* out) {
    ASSIGN_OR_RETURN(const TomlValue* v, Get(key, TomlValue::Kind::kInteger));
    if (v == nullptr) return absl::OkStatus();
    if (v->integer_value < INT32_MIN || v->integer_value > INT32_MAX) {
      return Error(v->line, key, absl::StrCat(v->integer_value, " is out of range"));
    }
    *out = static_cast<int>(v->integer_value);
    return absl::OkStatus();
  }

  absl::Status StringList(const std::string& key, std::vector<std::string>* out) {
    ASSIGN_OR_RETURN(const TomlValue* v, Get(key, TomlValue::Kind::kArray));
    if (v == nullptr) return absl::OkStatus();
    out->clear();
    for (const TomlValue& e : v->elements) {
      if (e.kind != TomlValue::Kind::kString) {
        return Error(e.line, key,
                     absl::StrCat("expected an array of strings, found ", WithArticle(e.kind)));
      }
      out->push_back(e.string_value);
    }
    return absl::OkStatus();
  }

  // A sub-table: nullptr when absent; an error if the key is a value or an
  // array of tables.
  absl::StatusOr<const TomlTable*> Table(const std::string& key) {
    used_.insert(key);
    if (const TomlValue* v = table_.FindValue(key))
      return Error(v->line, key, "expected a [table], found a value");
    if (!table_.FindTableArray(key).empty()) {
      return Error(table_.FindTableArray(key)[0]->line, key,
                   absl::StrCat("expected [", key, "], found [[", key, "]]"));
    }
    return table_.FindTable(key);
  }

  // An array of tables `[[key]]`: empty when absent.
  absl::StatusOr<const std::vector<std::unique_ptr<TomlTable>>*> TableArray(
      const std::string& key) {
    used_.insert(key);
    if (const TomlValue* v = table_.FindValue(key))
      return Error(v->line, key, "expected [[tables]], found a value");
    if (const TomlTable* t = table_.FindTable(key)) {
      return Error(t->line, key,
                   absl::StrCat("expected [[", key, "]] (an array of tables), found [", key, "]"));
    }
    return &table_.FindTableArray(key);
  }

  // Every key of the table must have been asked for.
  absl::Status Finish() const {
    for (const std::string& key : table_.Keys()) {
      if (used_.contains(key)) continue;
      int line = table_.line;
      if (const TomlValue* v = table_.FindValue(key)) line = v->line;
      if (const TomlTable* t = table_.FindTable(key)) line = t->line;
      if (!table_.FindTableArray(key).empty()) line = table_.FindTableArray(key)[0]->line;
      return absl::InvalidArgumentError(
          absl::StrCat(config_->source, ":", line, ": ", Field(key), ": unknown key", Where()));
    }
    return absl::OkStatus();
  }

 private:
  std::string Field(const std::string& key) const {
    return prefix_.empty() ? key : absl::StrCat(prefix_, ".", key);
  }
  std::string Where() const {
    return prefix_.empty() ? " at the top level" : absl::StrCat(" in ", prefix_);
  }

  absl::Status Error(int line, const std::string& key, const std::string& problem) const {
    return absl::InvalidArgumentError(
        absl::StrCat(config_->source, ":", line, ": ", Field(key), ": ", problem));
  }

  // The value at `key` if present and of kind `kind`; nullptr if absent.
  absl::StatusOr<const TomlValue*> Get(const std::string& key, TomlValue::Kind kind) {
    used_.insert(key);
    const TomlValue* v = table_.FindValue(key);
    if (v == nullptr) {
      if (table_.Has(key))
        return Error(table_.line, key,
                     absl::StrCat("expected ", WithArticle(kind), ", found a table"));
      return nullptr;
    }
    if (v->kind != kind) {
      return Error(v->line, key,
                   absl::StrCat("expected ", WithArticle(kind), ", found ", WithArticle(v->kind)));
    }
    config_->origins[Field(key)] = absl::StrCat(config_->source, ":", v->line);
    return v;
  }

  const TomlTable& table_;
  std::string prefix_;
  const std::string& base_dir_;
  ClusterConfig* config_;
  std::set<std::string> used_;
};

absl::Status ReadCoordinator(const TomlTable& table, const std::string& base_dir,
                             ClusterConfig* config) {
  CoordinatorConfig& c = config->coordinator;
  TableReader r(table, "coordinator", base_dir, config);
  RETURN_IF_ERROR(r.String("host", &c.host));
  RETURN_IF_ERROR(r.String("control", &c.control));
  RETURN_IF_ERROR(r.String("advertise", &c.advertise));
  RETURN_IF_ERROR(r.String("http", &c.http));
  RETURN_IF_ERROR(r.String("api_key_env", &c.api_key_env));
  ASSIGN_OR_RETURN(const TomlTable* limits, r.Table("limits"));
  if (limits != nullptr) {
    TableReader l(*limits, "coordinator.limits", base_dir, config);
    RETURN_IF_ERROR(l.Int("max_queued_requests", &c.limits.max_queued_requests));
    RETURN_IF_ERROR(l.Int("max_new_tokens", &c.limits.max_new_tokens));
    RETURN_IF_ERROR(l.Int("context_length", &c.limits.context_length));
    RETURN_IF_ERROR(l.Finish());
  }
  return r.Finish();
}

absl::Status ReadTargetGroup(const TomlTable& table, int index, const std::string& base_dir,
                             ClusterConfig* config) {
  TargetGroupConfig& g = config->target_groups[index];
  TableReader r(table, absl::StrCat("target_group[", index, "]"), base_dir, config);
  RETURN_IF_ERROR(r.String("name", &g.name));
  RETURN_IF_ERROR(r.Int("tp", &g.tp));
  RETURN_IF_ERROR(r.StringList("devices", &g.devices));
  RETURN_IF_ERROR(r.Int("threads", &g.threads));
  RETURN_IF_ERROR(r.String("host", &g.host));
  RETURN_IF_ERROR(r.StringList("hosts", &g.hosts));
  RETURN_IF_ERROR(r.String("data_endpoint", &g.data_endpoint));
  RETURN_IF_ERROR(r.String("kv_cache_memory", &g.kv_cache_memory));
  RETURN_IF_ERROR(r.String("kv_cache_type", &g.kv_cache_type));
  return r.Finish();
}

absl::Status ReadDraftPool(const TomlTable& table, int index, const std::string& base_dir,
                           ClusterConfig* config) {
  DraftPoolConfig& p = config->draft_pools[index];
  TableReader r(table, absl::StrCat("draft_pool[", index, "]"), base_dir, config);
  RETURN_IF_ERROR(r.String("name", &p.name));
  RETURN_IF_ERROR(r.Int("count", &p.count));
  RETURN_IF_ERROR(r.String("drafter", &p.drafter));
  RETURN_IF_ERROR(r.Path("draft_model", &p.draft_model));
  RETURN_IF_ERROR(r.String("vocab_mapping", &p.vocab_mapping));
  RETURN_IF_ERROR(r.Int("k", &p.k));
  RETURN_IF_ERROR(r.Int("lookahead", &p.lookahead));
  RETURN_IF_ERROR(r.StringList("devices", &p.devices));
  RETURN_IF_ERROR(r.Int("threads", &p.threads));
  RETURN_IF_ERROR(r.String("host", &p.host));
  RETURN_IF_ERROR(r.String("kv_cache_memory", &p.kv_cache_memory));
  RETURN_IF_ERROR(r.String("placement", &p.placement));
  return r.Finish();
}

absl::Status ReadRoot(const TomlTable& root, const std::string& base_dir, ClusterConfig* config) {
  TableReader r(root, "", base_dir, config);
  ASSIGN_OR_RETURN(const TomlTable* cluster, r.Table("cluster"));
  if (cluster != nullptr) {
    TableReader c(*cluster, "cluster", base_dir, config);
    RETURN_IF_ERROR(c.Path("run_dir", &config->run_dir));
    RETURN_IF_ERROR(c.Finish());
  }
  ASSIGN_OR_RETURN(const TomlTable* coordinator, r.Table("coordinator"));
  if (coordinator != nullptr) RETURN_IF_ERROR(ReadCoordinator(*coordinator, base_dir, config));
  ASSIGN_OR_RETURN(const TomlTable* security, r.Table("security"));
  if (security != nullptr) {
    TableReader t(*security, "security", base_dir, config);
    RETURN_IF_ERROR(t.String("mode", &config->security.mode));
    RETURN_IF_ERROR(t.Path("keys_dir", &config->security.keys_dir));
    RETURN_IF_ERROR(t.String("tp_network", &config->security.tp_network));
    RETURN_IF_ERROR(t.Finish());
  }
  ASSIGN_OR_RETURN(const TomlTable* models, r.Table("models"));
  if (models != nullptr) {
    TableReader m(*models, "models", base_dir, config);
    RETURN_IF_ERROR(m.Path("target", &config->models.target));
    RETURN_IF_ERROR(m.Path("draft", &config->models.draft));
    RETURN_IF_ERROR(m.Finish());
  }
  // A file that lists groups (or pools) replaces the default one.
  ASSIGN_OR_RETURN(const auto* groups, r.TableArray("target_group"));
  if (!groups->empty()) config->target_groups.assign(groups->size(), TargetGroupConfig{});
  for (size_t i = 0; i < groups->size(); ++i) {
    RETURN_IF_ERROR(ReadTargetGroup(*(*groups)[i], static_cast<int>(i), base_dir, config));
  }
  ASSIGN_OR_RETURN(const auto* pools, r.TableArray("draft_pool"));
  if (!pools->empty()) config->draft_pools.assign(pools->size(), DraftPoolConfig{});
  for (size_t i = 0; i < pools->size(); ++i) {
    RETURN_IF_ERROR(ReadDraftPool(*(*pools)[i], static_cast<int>(i), base_dir, config));
  }
  return r.Finish();
}

}  // namespace

bool DraftPoolConfig::RunsInTargets() const {
  if (count == 0 || drafter == "none") return false;
  const bool model_free = drafter == "lookup" || drafter == "ngram";
  return placement == "target" || (placement == "auto" && model_free);
}

int DraftPoolConfig::WorkerCount() const {
  return drafter == "none" || RunsInTargets() ? 0 : count;
}

absl::StatusOr<ClusterConfig> ParseClusterConfig(absl::string_view text, const std::string& source,
                                                 const std::string& base_dir) {
  ASSIGN_OR_RETURN(TomlTable root, ParseToml(text, source));
  ClusterConfig config;
  config.source = source;
  RETURN_IF_ERROR(ReadRoot(root, base_dir, &config));
  RETURN_IF_ERROR(ValidateClusterConfig(config));
  return config;
}

absl::StatusOr<ClusterConfig> LoadClusterConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the cluster config ", path));
  std::stringstream text;
  text << in.rdbuf();
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(path, error);
  const std::string base_dir = error ? std::string(".") : absolute.parent_path().string();
  return ParseClusterConfig(text.str(), path, base_dir);
}

void SetFieldOrigin(ClusterConfig* config, const std::string& field, const std::string& origin) {
  config->origins[field] = origin;
}

}  // namespace splitspec::config
