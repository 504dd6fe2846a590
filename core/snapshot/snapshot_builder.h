#pragma once
// Copies a Session into a SessionSnapshot (plain structs, float vectors).
// Runs on the thread that owns the session. K/V rows and verify attention are
// converted once and shared by every later snapshot.
#include <memory>
#include <string>
#include <vector>

#include "core/snapshot/snapshot.h"

namespace kvscope {

class Session;
struct SessionRecord;
class Tokenizer;
struct TraceData;

// Every id's text as it appears in running text ("<id N>" where the
// tokenizer has none): the vocabulary a snapshot carries.
std::shared_ptr<const std::vector<std::string>> vocabularyOf(const Tokenizer& tokenizer);

// A batch's per-round acceptance, as the Round Timeline marks it: per
// sequence (its rounds), per round of the shown one (`rounds` of them), the
// drafts it accepted, -1 where it has no finished round.
std::vector<std::vector<int64_t>> batchAcceptance(const std::vector<const std::vector<RoundRecord>*>& sequences,
                                                  size_t rounds);

class SnapshotBuilder {
 public:
  // Forget everything converted so far (a new session).
  void reset();
  void setNames(std::string target_name, std::string drafter_name);
  void setVocabulary(const Tokenizer& tokenizer);
  std::shared_ptr<SessionSnapshot> build(const Session& session);
  // A saved trace, no models: names, geometry and token texts come from the
  // file; the snapshot is marked replay_only. A batch's trace shows one
  // sequence (0 unless told), with every sequence's acceptance per round.
  std::shared_ptr<SessionSnapshot> build(const TraceData& trace, int64_t sequence = 0);
  // A record without a session or a trace (another engine's capture): the
  // snapshot is marked replay_only and finished; names, geometry and the
  // vocabulary are the caller's to fill.
  std::shared_ptr<SessionSnapshot> build(const SessionRecord& record);

 private:
  void fillRecord(SessionSnapshot& snapshot, const SessionRecord& record);
  std::string target_name_;
  std::string drafter_name_;
  std::shared_ptr<const std::vector<std::string>> vocab_;
  std::vector<std::shared_ptr<const KvRowData>> rows_;
  std::map<int64_t, std::shared_ptr<const AttentionData>> attention_;
};

}  // namespace kvscope
