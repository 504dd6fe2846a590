// Format version 3's recurrent states, checked by name and bound.
#include "core/capture/capture_recurrent.h"

#include "core/capture/capture_limits.h"
#include "core/error.h"
#include "core/model/json_fields.h"

namespace kvscope::capture_recurrent {

namespace {

using Json = nlohmann::json;
namespace limits = capture_limits;

const Json& field(const std::string& path, const std::string& what, const Json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end()) fail(path, what + " has no field '" + key + "'");
  return *it;
}

void requireVersion3(const std::string& path, const std::string& what, const CaptureManifest& manifest) {
  if (manifest.version < 3)
    fail(path, what + " is a version 3 field; this file is version " + std::to_string(manifest.version));
}

CaptureStateKind parseKind(const std::string& path, const std::string& what, const Json& value) {
  if (value == "conv") return CaptureStateKind::Conv;
  if (value == "ssm") return CaptureStateKind::Ssm;
  fail(path, what + " must be \"conv\" or \"ssm\", got " + jsonSnippet(value));
}

std::optional<int64_t> optionalInteger(const std::string& path, const std::string& what, const Json& object,
                                       const char* key, int64_t min, int64_t max) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  return jsonInteger(*it, path, what + "." + key, min, max);
}

CaptureRecurrentState parseState(const std::string& path, const std::string& what, const Json& value, size_t index,
                                 const CaptureModel& model, const std::vector<CaptureRecurrentState>& earlier) {
  if (!value.is_object()) fail(path, what + " must be an object, got " + jsonSnippet(value));
  const int64_t id = jsonInteger(field(path, what, value, "id"), path, what + ".id", 0, kMaxRecurrentStates - 1);
  if (id != static_cast<int64_t>(index))
    fail(path, what + ".id is " + std::to_string(id) + " where " + std::to_string(index) + " was due (ids are 0, 1, 2, ...)");
  CaptureRecurrentState state;
  state.layer = jsonInteger(field(path, what, value, "layer"), path, what + ".layer", 0, model.layers - 1);
  state.kind = parseKind(path, what + ".kind", field(path, what, value, "kind"));
  state.call = optionalInteger(path, what, value, "call", 0, limits::kMaxCalls);
  state.input = optionalInteger(path, what, value, "input", 0, limits::kMaxInputs - 1);
  state.after_position = optionalInteger(path, what, value, "after_position", 0, limits::kMaxPosition);
  state.from = optionalInteger(path, what, value, "from", 0, kMaxRecurrentStates - 1);
  if (state.call.has_value() != state.input.has_value() || state.call.has_value() != state.after_position.has_value())
    fail(path, what + ": call, input and after_position are all set (a state a call computed) or all null");
  if (state.from) {
    // An earlier state only: provenance chains end, and a reader walking one cannot loop.
    if (*state.from >= id) fail(path, what + ".from is " + std::to_string(*state.from) + ", not an earlier state");
    const auto& source = earlier[static_cast<size_t>(*state.from)];
    if (source.layer != state.layer || source.kind != state.kind)
      fail(path, what + ".from names a state of another layer or kind");
  }
  return state;
}

int64_t checkedId(const std::string& path, const std::string& what, const Json& value, const CaptureStateRef& ref,
                  const std::vector<CaptureRecurrentState>& states) {
  if (states.empty()) fail(path, what + " names a state, but recurrent_states holds none for this role");
  const int64_t id = jsonInteger(value, path, what, 0, static_cast<int64_t>(states.size()) - 1);
  const auto& state = states[static_cast<size_t>(id)];
  if (state.layer != ref.layer || state.kind != ref.kind)
    fail(path, what + " is state " + std::to_string(id) + " of layer " + std::to_string(state.layer) + " (" +
                   stateKindName(state.kind) + "), not of layer " + std::to_string(ref.layer) + " (" +
                   stateKindName(ref.kind) + ")");
  return id;
}

CaptureStateRef parseRef(const std::string& path, const std::string& what, const Json& value,
                         const std::vector<CaptureRecurrentState>& states) {
  if (!value.is_object()) fail(path, what + " must be an object, got " + jsonSnippet(value));
  CaptureStateRef ref;
  ref.layer = jsonInteger(field(path, what, value, "layer"), path, what + ".layer", 0, limits::kMaxLayers - 1);
  ref.kind = parseKind(path, what + ".kind", field(path, what, value, "kind"));
  const auto id = value.find("id");
  if (id != value.end()) ref.id = checkedId(path, what + ".id", *id, ref, states);
  return ref;
}

using RefList = std::vector<std::vector<CaptureStateRef>>;

std::optional<RefList> parseRefs(const std::string& path, const std::string& what, const Json& value,
                                 const CaptureManifest& manifest, const CaptureModel& model,
                                 const std::vector<CaptureRecurrentState>& states) {
  if (value.is_null()) return std::nullopt;
  if (!value.is_array() || static_cast<int64_t>(value.size()) != manifest.batch)
    fail(path, what + " must be null or a list of " + std::to_string(manifest.batch) +
                   " lists (one per sequence of the batch), got " + jsonSnippet(value));
  RefList out;
  for (size_t b = 0; b < value.size(); ++b) {
    const std::string at = what + "[" + std::to_string(b) + "]";
    const Json& entries = value[b];
    if (!entries.is_array() || static_cast<int64_t>(entries.size()) > 2 * model.layers)
      fail(path, at + " must be a list of at most " + std::to_string(2 * model.layers) +
                     " states (a conv and an SSM state per layer), got " + jsonSnippet(entries));
    out.emplace_back();
    for (size_t e = 0; e < entries.size(); ++e) {
      const std::string entry_what = at + "[" + std::to_string(e) + "]";
      if (entries[e].is_object() && !entries[e].contains("id")) fail(path, entry_what + " has no field 'id'");
      out.back().push_back(parseRef(path, entry_what, entries[e], states));
    }
  }
  return out;
}

}  // namespace

std::string stateKindName(CaptureStateKind kind) { return kind == CaptureStateKind::Conv ? "conv" : "ssm"; }

void parseRecurrentStates(const std::string& path, const Json& manifest_json, CaptureManifest& manifest) {
  const auto it = manifest_json.find("recurrent_states");
  if (it == manifest_json.end() || it->is_null()) return;
  requireVersion3(path, "recurrent_states", manifest);
  if (!it->is_object()) fail(path, "recurrent_states must be an object (one entry per role), got " + jsonSnippet(*it));
  for (auto role_it = it->begin(); role_it != it->end(); ++role_it) {
    const std::string what = "recurrent_states." + role_it.key();
    CaptureRole role;
    if (role_it.key() == "target") role = CaptureRole::Target;
    else if (role_it.key() == "drafter") role = CaptureRole::Drafter;
    else fail(path, what + ": a role is \"target\" or \"drafter\"");
    const CaptureModel* model = manifest.model(role);
    if (!model) fail(path, what + ": models has no such role");
    const Json& list = role_it.value();
    if (!list.is_array() || static_cast<int64_t>(list.size()) > kMaxRecurrentStates)
      fail(path, what + " must be a list of at most " + std::to_string(kMaxRecurrentStates) + " states, got " +
                     jsonSnippet(list));
    auto& states = manifest.recurrent_states[static_cast<int>(role)];
    states.reserve(list.size());
    for (size_t i = 0; i < list.size(); ++i)
      states.push_back(parseState(path, what + "[" + std::to_string(i) + "]", list[i], i, *model, states));
  }
}

std::optional<CaptureCallRecurrent> parseCallRecurrent(const std::string& path, const std::string& what,
                                                       const Json& call_json, const CaptureCall& call,
                                                       const CaptureManifest& manifest) {
  const auto it = call_json.find("recurrent");
  if (it == call_json.end() || it->is_null()) return std::nullopt;
  const std::string at = what + ": recurrent";
  requireVersion3(path, at, manifest);
  if (!it->is_object()) fail(path, at + " must be an object, got " + jsonSnippet(*it));
  const CaptureModel& model = *manifest.model(call.role);
  const auto& states = manifest.recurrent_states[static_cast<int>(call.role)];
  CaptureCallRecurrent out;
  out.before = parseRefs(path, at + ".before", field(path, at, *it, "before"), manifest, model, states);
  out.after = parseRefs(path, at + ".after", field(path, at, *it, "after"), manifest, model, states);
  const auto intermediate = it->find("intermediate");
  if (intermediate == it->end() || intermediate->is_null()) return out;
  const std::string inter_what = at + ".intermediate";
  if (!intermediate->is_array() || static_cast<int64_t>(intermediate->size()) != manifest.batch)
    fail(path, inter_what + " must be a list of " + std::to_string(manifest.batch) + " lists, got " +
                   jsonSnippet(*intermediate));
  const auto inputs = static_cast<int64_t>(call.input_ids.size());
  for (size_t b = 0; b < intermediate->size(); ++b) {
    const std::string seq_what = inter_what + "[" + std::to_string(b) + "]";
    const Json& entries = (*intermediate)[b];
    if (!entries.is_array() || static_cast<int64_t>(entries.size()) > 2 * model.layers)
      fail(path, seq_what + " must be a list of at most " + std::to_string(2 * model.layers) + " entries, got " +
                     jsonSnippet(entries));
    out.intermediate.emplace_back();
    for (size_t e = 0; e < entries.size(); ++e) {
      const std::string entry_what = seq_what + "[" + std::to_string(e) + "]";
      const CaptureStateRef ref = parseRef(path, entry_what, entries[e], states);
      const Json& ids = field(path, entry_what, entries[e], "ids");
      if (!ids.is_array() || static_cast<int64_t>(ids.size()) != inputs)
        fail(path, entry_what + ".ids must be a list of " + std::to_string(inputs) + " ids (one per input), got " +
                       jsonSnippet(ids));
      std::vector<int64_t> parsed;
      parsed.reserve(ids.size());  // == inputs <= kMaxInputs
      for (size_t i = 0; i < ids.size(); ++i)
        parsed.push_back(checkedId(path, entry_what + ".ids[" + std::to_string(i) + "]", ids[i], ref, states));
      out.intermediate.back().emplace_back(ref, std::move(parsed));
    }
  }
  return out;
}

}  // namespace kvscope::capture_recurrent
