// A session's trace survives writeTrace + readTrace
// unchanged (rounds, sequence, origins, ledger entries, K/V rows and verify
// logits / attention bit for bit), and a truncated, corrupted or foreign file
// gives an Error naming the path and the problem.
#include <gtest/gtest.h>
#include <torch/types.h>
#include <unistd.h>

#include "core/control/trace_capture.h"
#include "core/error.h"
#include "core/model/safetensors.h"
#include "core/trace/trace_file.h"
#include "core/trace/trace_json.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

using namespace testing_support;

// A fresh, empty directory per test, removed afterwards.
class TraceDir {
 public:
  explicit TraceDir(const std::string& name)
      : path_(fs::temp_directory_path() / ("kvscope_trace_test_" + std::to_string(::getpid()) + "_" + name)) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TraceDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<LedgerEntry> entriesOf(const KvLedger& ledger, CacheRole role) {
  std::vector<LedgerEntry> out;
  for (const LedgerEntry& e : ledger.entries()) {
    if (e.cache == role) out.push_back(e);
  }
  return out;
}

bool validUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t j = 1; j < n; ++j) {
      if ((static_cast<unsigned char>(s[i + j]) >> 6) != 0x2) return false;
    }
    i += n;
  }
  return true;
}

void expectSameTrace(const TraceData& ta, const TraceData& tb) {
  EXPECT_EQ(ta.info, tb.info);
  const SessionRecord& a = ta.record;
  const SessionRecord& b = tb.record;
  EXPECT_EQ(a.sequence, b.sequence);
  EXPECT_EQ(a.origins, b.origins);
  EXPECT_EQ(a.prompt_length, b.prompt_length);
  EXPECT_EQ(a.fault, b.fault);
  EXPECT_EQ(a.target_layers, b.target_layers);
  EXPECT_EQ(a.drafter_layers, b.drafter_layers);
  // Token texts: see TokenTextOfByteTokensSurvives for partial UTF-8 sequences.
  ASSERT_EQ(ta.token_text.size(), tb.token_text.size());
  for (const auto& [id, text] : ta.token_text) {
    ASSERT_TRUE(tb.token_text.count(id)) << id;
    if (validUtf8(text)) EXPECT_EQ(tb.token_text.at(id), text) << "token text of id " << id;
  }
  ASSERT_EQ(a.rounds.size(), b.rounds.size());
  for (size_t i = 0; i < a.rounds.size(); ++i) {
    // Every field, doubles compared exactly.
    EXPECT_EQ(toJson(a.rounds[i]), toJson(b.rounds[i])) << "round " << i;
    EXPECT_EQ(a.rounds[i].q_draft, b.rounds[i].q_draft);
    EXPECT_EQ(a.rounds[i].uniforms, b.rounds[i].uniforms);
    EXPECT_EQ(a.rounds[i].verify_ms, b.rounds[i].verify_ms);
  }
  ASSERT_EQ(a.verify.size(), b.verify.size());
  for (const auto& [round, va] : a.verify) {
    ASSERT_TRUE(b.verify.count(round)) << "round " << round;
    const VerifyRecord& vb = b.verify.at(round);
    EXPECT_EQ(va.first_query_position, vb.first_query_position);
    ASSERT_EQ(va.logits.defined(), vb.logits.defined());
    if (va.logits.defined()) EXPECT_TRUE(torch::equal(va.logits, vb.logits)) << "logits of round " << round;
    ASSERT_EQ(va.attention.size(), vb.attention.size());
    for (size_t layer = 0; layer < va.attention.size(); ++layer) {
      EXPECT_TRUE(torch::equal(va.attention[layer], vb.attention[layer])) << "round " << round << " layer " << layer;
    }
    ASSERT_EQ(va.masks.size(), vb.masks.size());
    for (size_t layer = 0; layer < va.masks.size(); ++layer) {
      EXPECT_TRUE(torch::equal(va.masks[layer], vb.masks[layer])) << "mask of round " << round << " layer " << layer;
    }
  }
  // Cache events: the same operations, referring to the same ledger entries.
  ASSERT_EQ(a.events.events().size(), b.events.events().size());
  for (size_t i = 0; i < a.events.events().size(); ++i) {
    EXPECT_EQ(toJson(a.events.events()[i]), toJson(b.events.events()[i])) << "cache event " << i;
  }
  // Ledger: the same entries in the same order, each with bit-identical K/V rows.
  EXPECT_EQ(a.ledger.entries().size(), b.ledger.entries().size());
  for (CacheRole role : {CacheRole::Target, CacheRole::Drafter}) {
    const auto ea = entriesOf(a.ledger, role), eb = entriesOf(b.ledger, role);
    ASSERT_EQ(ea.size(), eb.size()) << cacheRoleName(role);
    for (size_t i = 0; i < ea.size(); ++i) {
      auto ja = toJson(ea[i]), jb = toJson(eb[i]);
      ja.erase("row");
      jb.erase("row");
      EXPECT_EQ(ja, jb) << cacheRoleName(role) << " entry " << i;
      EXPECT_TRUE(torch::equal(a.ledger.keys(ea[i].row), b.ledger.keys(eb[i].row))) << "K row of entry " << i;
      EXPECT_TRUE(torch::equal(a.ledger.values(ea[i].row), b.ledger.values(eb[i].row))) << "V row of entry " << i;
    }
    // Any round's cache rebuilt from the read ledger equals the original's.
    for (int64_t round = 0; round < static_cast<int64_t>(a.rounds.size()); ++round) {
      const auto la = a.ledger.liveAfterRound(role, round), lb = b.ledger.liveAfterRound(role, round);
      ASSERT_EQ(la.size(), lb.size());
      if (la.empty()) continue;
      EXPECT_TRUE(torch::equal(a.ledger.stackKeys(la), b.ledger.stackKeys(lb))) << "round " << round;
      EXPECT_TRUE(torch::equal(a.ledger.stackValues(la), b.ledger.stackValues(lb))) << "round " << round;
    }
  }
}

std::unique_ptr<Session> recordedSession(const std::string& drafter, Bookkeeping bookkeeping, bool use_cache) {
  std::shared_ptr<const Drafter> d;
  if (drafter == "ngram") {
    d = std::make_shared<NgramDrafter>(2);
  } else {
    d = std::make_shared<ModelDrafter>(fixtureModel(drafter), drafter);
  }
  SessionOptions o = fastOptions(3, 14, use_cache, sampledSettings(0.9, 40, 0.95), /*seed=*/11);
  o.record_attention = true;
  o.record_logits = true;
  o.bookkeeping = bookkeeping;
  o.ignore_eos = true;
  auto session = std::make_unique<Session>(fixtureModel("llama-tiny"), d,
                                           fixtureTokenizer("llama-tiny")->encode("Once upon a time"), o,
                                           std::vector<int64_t>{2});
  session->runToEnd();
  return session;
}

TEST(SessionTrace, RoundTripIsIdentical) {
  TraceDir dir("roundtrip");
  struct Variant {
    std::string drafter;
    Bookkeeping bookkeeping;
    bool use_cache;
  };
  for (const Variant& v : {Variant{"llama-tiny-draft", Bookkeeping::Exact, true},
                           Variant{"llama-tiny-draft", Bookkeeping::Seed, true},
                           Variant{"ngram", Bookkeeping::Exact, true},
                           Variant{"llama-tiny-draft", Bookkeeping::Exact, false}}) {
    const std::string label = v.drafter + " " + bookkeepingName(v.bookkeeping) + (v.use_cache ? " cached" : " uncached");
    SCOPED_TRACE(label);
    const auto session = recordedSession(v.drafter, v.bookkeeping, v.use_cache);
    ASSERT_TRUE(session->finished());
    const auto original = captureTrace(*session, fixtureTokenizer("llama-tiny").get(), {{"note", label}});
    // The capture holds what the session did.
    EXPECT_EQ(original.record.sequence, session->sequence());
    EXPECT_EQ(original.record.rounds.size(), session->rounds().size());
    EXPECT_EQ(original.record.ledger.entries().size(), session->ledger().entries().size());
    EXPECT_EQ(original.record.verify.size(), session->rounds().size() - 1);
    EXPECT_EQ(original.info["note"], label);
    EXPECT_FALSE(original.token_text.empty());
    if (v.use_cache) EXPECT_FALSE(original.record.ledger.entries().empty());

    const std::string path = dir.file("session.kvtrace");
    writeTrace(path, original);
    const TraceData back = readTrace(path);
    expectSameTrace(original, back);

    // Written atomically: nothing but the trace is left in the directory.
    int files = 0;
    for (const auto& entry : fs::directory_iterator(dir.path())) {
      ++files;
      EXPECT_EQ(entry.path().filename().string(), "session.kvtrace");
    }
    EXPECT_EQ(files, 1);
    // A plain safetensors file: our validating reader opens it, metadata and all.
    const auto st = SafetensorsFile::open(path);
    EXPECT_TRUE(st->metadata().count("kvscope"));
    if (v.use_cache) EXPECT_NE(st->find("ledger.target.k"), nullptr);
    EXPECT_NE(st->find("round.1.logits"), nullptr);
    EXPECT_NE(st->find("round.1.attention.0"), nullptr);

    // Written again from what was read: the same file, byte for byte.
    const std::string again = dir.file("again.kvtrace");
    writeTrace(again, back);
    EXPECT_EQ(readBytes(again), readBytes(path));
    fs::remove(again);
  }
}

// Byte-fallback tokens (e.g. <0x87>) display as a partial UTF-8 sequence;
// the trace must give back the same bytes, not U+FFFD.
TEST(SessionTrace, TokenTextOfByteTokensSurvives) {
  TraceDir dir("token_text");
  const auto session = recordedSession("llama-tiny-draft", Bookkeeping::Exact, true);
  const auto tokenizer = fixtureTokenizer("llama-tiny");
  auto original = captureTrace(*session, tokenizer.get());
  // Make sure the case is present whatever the session sampled.
  for (int64_t id : {3 + 0x87, 3 + 0xC3, 3 + 0x41}) original.token_text[id] = tokenizer->tokenText(id);
  ASSERT_FALSE(validUtf8(original.token_text.at(3 + 0x87)));
  writeTrace(dir.file("t.kvtrace"), original);
  const auto back = readTrace(dir.file("t.kvtrace"));
  EXPECT_EQ(back.token_text, original.token_text);
}

// Expects readTrace(path) to throw an Error whose message names the path and
// contains one of `problems`.
void expectTraceError(const std::string& path, const std::vector<std::string>& problems, const std::string& what) {
  try {
    readTrace(path);
    ADD_FAILURE() << what << ": readTrace accepted it";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path), std::string::npos) << what << ": the message does not name the file: " << message;
    bool named = false;
    for (const auto& p : problems) named = named || message.find(p) != std::string::npos;
    EXPECT_TRUE(named) << what << ": unexpected message: " << message;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": threw a non-kvscope exception: " << e.what();
  }
}

class SessionTraceErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    auto session = recordedSession("llama-tiny-draft", Bookkeeping::Exact, true);
    path_ = dir_.file("good.kvtrace");
    writeTrace(path_, captureTrace(*session, nullptr));
    bytes_ = readBytes(path_);
    ASSERT_GT(bytes_.size(), 1000u);
  }

  // The good file with one byte of its "kvscope" metadata JSON XOR-ed.
  // `needle` locates the byte (first occurrence after the metadata starts,
  // plus offset).
  std::string flipped(const std::string& needle, size_t offset, const std::string& name, bool in_metadata = true) {
    const size_t meta = in_metadata ? bytes_.find("\"kvscope\":\"") : 0;
    EXPECT_NE(meta, std::string::npos);
    const size_t at = bytes_.find(needle, meta);
    EXPECT_NE(at, std::string::npos) << needle;
    std::string bad = bytes_;
    bad[at + offset] = static_cast<char>(bad[at + offset] ^ 0x01);
    const std::string path = dir_.file(name);
    writeBytes(path, bad);
    return path;
  }

  TraceDir dir_{"errors"};
  std::string path_;
  std::string bytes_;
};

TEST_F(SessionTraceErrors, GoodFileReads) { EXPECT_NO_THROW(readTrace(path_)); }

TEST_F(SessionTraceErrors, TruncatedFilesAreRefused) {
  const size_t header = 8 + static_cast<size_t>(static_cast<unsigned char>(bytes_[0]) |
                                                (static_cast<unsigned char>(bytes_[1]) << 8) |
                                                (static_cast<unsigned char>(bytes_[2]) << 16));
  struct Cut {
    size_t keep;
    std::vector<std::string> problems;
  };
  for (const Cut& cut : {Cut{bytes_.size() - 1, {"truncated"}}, Cut{(header + bytes_.size()) / 2, {"truncated"}},
                         Cut{header + 3, {"truncated"}}, Cut{header / 2, {"past the end", "truncated"}},
                         Cut{5, {"truncated"}}, Cut{0, {"empty file", "truncated"}}}) {
    const std::string path = dir_.file("cut_" + std::to_string(cut.keep) + ".kvtrace");
    writeBytes(path, bytes_.substr(0, cut.keep));
    expectTraceError(path, cut.problems, "truncated to " + std::to_string(cut.keep) + " bytes");
  }
}

TEST_F(SessionTraceErrors, FlippedMetadataBytesAreRefused) {
  // The metadata JSON's opening brace: not JSON any more.
  expectTraceError(flipped("\"kvscope\":\"{", 11, "brace.kvtrace"), {"not JSON"}, "flipped brace");
  // The format name and the version.
  expectTraceError(flipped("kvscope-trace", 2, "format.kvtrace"), {"not a kvscope trace"}, "flipped format");
  // (Flipping the digit would turn 4 into 5, an unknown version, or with
  // another bit into an older one this build still reads: flip the key.)
  expectTraceError(flipped("\\\"version\\\":4", 2, "version.kvtrace"), {"version (none) is not supported"},
                   "flipped version");
  expectTraceError(flipped("\\\"version\\\":4", 12, "version5.kvtrace"), {"version 5 is not supported"},
                   "version 5");
  // A required key and an enum value deep inside.
  expectTraceError(flipped("\\\"rounds\\\"", 3, "rounds.kvtrace"), {"corrupted trace"}, "flipped key");
  expectTraceError(flipped("\\\"born_phase\\\":\\\"", 17, "phase.kvtrace"), {"corrupted trace", "unknown phase"},
                   "flipped phase name");
  expectTraceError(flipped("\\\"origins\\\":[\\\"", 15, "origin.kvtrace"), {"corrupted trace", "unknown token origin"},
                   "flipped origin");
  // A structural character of the outer safetensors header.
  expectTraceError(flipped("\"__metadata__\"", 0, "outer.kvtrace", false), {"not JSON", "header"}, "flipped header quote");
}

// Files of the versions before batches read as they are: a one-sequence
// trace is laid out the same in versions 2, 3 and 4.
TEST_F(SessionTraceErrors, OlderVersionsStillRead) {
  const std::string needle = "\\\"version\\\":4";
  const size_t at = bytes_.find(needle, bytes_.find("\"kvscope\":\""));
  ASSERT_NE(at, std::string::npos);
  for (char version : {'2', '3'}) {
    std::string older = bytes_;
    older[at + needle.size() - 1] = version;
    const std::string path = dir_.file(std::string("version") + version + ".kvtrace");
    writeBytes(path, older);
    EXPECT_NO_THROW(readTrace(path)) << "version " << version;
  }
}

TEST_F(SessionTraceErrors, ForeignFilesAreRefused) {
  // A model checkpoint: valid safetensors, but no kvscope metadata.
  expectTraceError(modelDir("llama-tiny") + "/model.safetensors", {"not a kvscope trace"}, "model file");
  // Not safetensors at all.
  expectTraceError(modelDir("llama-tiny") + "/config.json", {"header", "truncated", "past the end"}, "JSON file");
  expectTraceError(dir_.file("missing.kvtrace"), {"cannot open"}, "missing file");
}

TEST_F(SessionTraceErrors, MissingTensorIsRefused) {
  // Rename a tensor in the header (same length): the ledger's rows are gone.
  std::string bad = bytes_;
  const size_t at = bad.find("ledger.target.k");
  ASSERT_NE(at, std::string::npos);
  bad.replace(at, 15, "ledger.xarget.k");
  const std::string path = dir_.file("renamed.kvtrace");
  writeBytes(path, bad);
  expectTraceError(path, {"missing tensor 'ledger.target.k'"}, "renamed tensor");
}

TEST_F(SessionTraceErrors, OverwritingKeepsAGoodFileOnFailure) {
  // A failed write (into a directory that does not exist) leaves nothing
  // behind, and a good trace rewritten in place is still good.
  const std::string nowhere = dir_.file("no_such_dir/x.kvtrace");
  EXPECT_THROW(writeTrace(nowhere, readTrace(path_)), Error);
  writeTrace(path_, readTrace(path_));
  EXPECT_EQ(readBytes(path_), bytes_);
}

}  // namespace
}  // namespace kvscope
