// Hostile .kvtrace files (docs/hostile-inputs.md): every cross-reference the trace validator
// checks, traces of every fault still accepted, malformed metadata refused
// with the field named, and a save killed with SIGKILL at any point leaves
// the old file readable.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <torch/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <random>
#include <thread>

#include "base/hostile_support.h"
#include "core/cache/fault.h"
#include "core/control/trace_capture.h"
#include "core/error.h"
#include "core/model/safetensors.h"
#include "core/snapshot/snapshot_builder.h"
#include "core/trace/trace_file.h"
#include "core/trace/trace_validator.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

using namespace testing_support;

constexpr double kSeconds = 1.0;

std::unique_ptr<Session> faultySession(Fault fault, bool greedy, const std::string& drafter = "llama-tiny-draft",
                                       bool use_cache = true, const std::string& target = "llama-tiny") {
  std::shared_ptr<const Drafter> d;
  if (drafter == "ngram") {
    d = std::make_shared<NgramDrafter>(2);
  } else {
    d = std::make_shared<ModelDrafter>(fixtureModel(drafter), drafter);
  }
  SessionOptions o = fastOptions(3, 12, use_cache, greedy ? SamplingSettings{} : sampledSettings(0.9, 40, 0.95), 7);
  o.record_attention = true;
  o.record_logits = true;
  o.fault = fault;
  o.ignore_eos = true;
  if (needsPagedCache(fault)) o.cache_layout = StorageLayout{true, 2};  // blocks a rollback frees
  auto session = std::make_unique<Session>(fixtureModel(target), d,
                                           fixtureTokenizer("llama-tiny")->encode("Once upon a time"), o,
                                           std::vector<int64_t>{2});
  session->runToEnd();
  return session;
}

class HostileTrace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    good_ = new TraceData(captureTrace(*faultySession(Fault::None, false), fixtureTokenizer("llama-tiny").get(),
                                       {{"note", "hostile"}}));
  }
  static void TearDownTestSuite() {
    delete good_;
    good_ = nullptr;
  }
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "kvscope-trace-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  // The good trace after `mutate`, written and read back: expects an Error
  // naming the file and every part, within a second.
  void expectRefused(const std::function<void(TraceData&)>& mutate, const std::vector<std::string>& parts) {
    TraceData bad = *good_;
    mutate(bad);
    const std::string path = file("bad.kvtrace");
    writeTrace(path, bad);
    expectReadRefused(path, parts);
  }

  static void expectReadRefused(const std::string& path, std::vector<std::string> parts) {
    parts.push_back(path);
    parts.push_back("corrupted trace");
    const double start = hostile::cpuSeconds();
    try {
      readTrace(path);
      ADD_FAILURE() << "readTrace accepted it";
    } catch (const Error& e) {
      const std::string message = e.what();
      for (const auto& part : parts) EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' missing in: " << message;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a kvscope::Error: " << e.what();
    }
    EXPECT_LT(hostile::cpuSeconds() - start, kSeconds) << "CPU seconds";
  }

  // The good trace's file with its metadata text (and tensors) edited by hand:
  // for what writeTrace cannot produce (deep JSON, wrong JSON types).
  std::string rewritten(const std::function<void(std::string&)>& edit_metadata,
                        const std::function<void(std::vector<StWriteTensor>&)>& edit_tensors = {}) {
    const std::string source = file("source.kvtrace");
    writeTrace(source, *good_);
    const auto st = SafetensorsFile::open(source);
    std::vector<StWriteTensor> tensors;
    for (const StTensorInfo& info : st->tensors())
      tensors.push_back({info.name, info.dtype, info.shape, st->data(info), static_cast<size_t>(info.end - info.begin)});
    std::string metadata = st->metadata().at("kvscope");
    edit_metadata(metadata);
    if (edit_tensors) edit_tensors(tensors);
    const std::string path = file("edited.kvtrace");
    writeSafetensors(path, tensors, {{"kvscope", metadata}, {"format", "pt"}});
    return path;
  }

  void expectAccepted(const TraceData& trace) {
    const std::string path = file("accepted.kvtrace");
    writeTrace(path, trace);
    try {
      readTrace(path);
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
  }

  static void replaceOnce(std::string& text, const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  }

  static TraceData* good_;
  fs::path dir_;
};

TraceData* HostileTrace::good_ = nullptr;

TEST_F(HostileTrace, GoodTraceReadsAndValidates) {
  const std::string path = file("good.kvtrace");
  writeTrace(path, *good_);
  EXPECT_NO_THROW(readTrace(path));
  ASSERT_GE(good_->record.target_layers, 2);
  ASSERT_FALSE(good_->record.verify.empty());
  ASSERT_FALSE(good_->record.verify.begin()->second.attention.empty());
}

// Every fault of the bug zoo, greedy and sampled, model and n-gram drafter:
// the validator must not refuse a trace kvscope itself wrote.
TEST_F(HostileTrace, TracesOfEveryFaultAreAccepted) {
  std::vector<Fault> faults{Fault::None};
  for (const FaultInfo& info : allFaults()) {
    if (!needsBatch(info.fault)) faults.push_back(info.fault);  // a batch is not saved as a trace yet
  }
  for (Fault fault : faults) {
    for (bool greedy : {true, false}) {
      SCOPED_TRACE(std::string(faultInfo(fault).name) + (greedy ? " greedy" : " sampled"));
      // Window faults need a sliding window: Gemma 2 (local and global layers) drafted by Mistral.
      const auto session = needsSlidingWindow(fault)
                               ? faultySession(fault, greedy, "mistral-sw-tiny", true, "gemma2-tiny")
                               : faultySession(fault, greedy);
      expectAccepted(captureTrace(*session, fixtureTokenizer("llama-tiny").get()));
    }
  }
  for (Fault fault : {Fault::None, Fault::PruneShort}) {
    SCOPED_TRACE(std::string("sliding windows, ") + faultInfo(fault).name);
    expectAccepted(captureTrace(*faultySession(fault, true, "mistral-sw-tiny", true, "gemma2-tiny"), nullptr));
  }
  SCOPED_TRACE("n-gram drafter, then no cache");
  expectAccepted(captureTrace(*faultySession(Fault::None, false, "ngram"), nullptr));
  expectAccepted(captureTrace(*faultySession(Fault::None, false, "llama-tiny-draft", false), nullptr));
}

TEST_F(HostileTrace, AttentionLayersDisagreeInHeads) {
  expectRefused(
      [](TraceData& t) {
        auto& attention = t.record.verify.begin()->second.attention;
        attention.back() = torch::zeros({2 * attention.front().size(0), 1024, 1024});
      },
      {"attention layer 1 heads", "disagrees"});
}

TEST_F(HostileTrace, AttentionLayersDisagreeInQueries) {
  expectRefused(
      [](TraceData& t) {
        auto& attention = t.record.verify.begin()->second.attention;
        attention.back() = torch::zeros({attention.front().size(0), 1, 1});
      },
      {"attention layer 1 queries", "disagrees"});
}

TEST_F(HostileTrace, MaskDoesNotMatchAttention) {
  expectRefused(
      [](TraceData& t) {
        VerifyRecord& v = t.record.verify.begin()->second;
        ASSERT_FALSE(v.masks.empty());
        v.masks[0] = torch::ones({v.attention[0].size(1), v.attention[0].size(2) + 3}, torch::kBool);
      },
      {"mask layer 0", "keys"});
}

TEST_F(HostileTrace, LogitsRowsDisagreeWithQueries) {
  expectRefused(
      [](TraceData& t) {
        VerifyRecord& v = t.record.verify.begin()->second;
        v.logits = torch::zeros({v.logits.size(0) + 1, v.logits.size(1)});
      },
      {"logits rows"});
}

TEST_F(HostileTrace, MoreAttentionLayersThanTheModel) {
  expectRefused(
      [](TraceData& t) {
        auto& attention = t.record.verify.begin()->second.attention;
        attention.push_back(attention.back());
      },
      {"layers of attention or masks, but the target has"});
}

TEST_F(HostileTrace, VerifyOfARoundThatDoesNotExist) {
  expectRefused(
      [](TraceData& t) {
        auto node = t.record.verify.extract(t.record.verify.begin());
        node.key() = 999;
        t.record.verify.insert(std::move(node));
      },
      {"verify record for round 999", "rounds 0 to 8"});
}

// The investigation a trace carries is held against its record before a view
// sizes anything by it: what names rows, layers, rounds or events the trace
// never recorded is dropped with a warning naming the field.
DiffReport hostileInvestigation(int64_t audit_row, int64_t cause_event, int64_t layer) {
  DiffReport diff;
  diff.mode = "lockstep";
  CacheAudit audit;
  audit.moment = {1, Phase::Prune};
  audit.rows_per_layer = {3, 3};
  RowVerdict v;
  v.layer = 0;
  v.row = audit_row;
  v.state = RowState::Stale;
  audit.rows.push_back(v);
  diff.audit_at_divergence = audit;
  RootCause cause;
  cause.event_index = cause_event;
  cause.round = 1;
  cause.phase = Phase::Prune;
  cause.layers = {layer};
  cause.rows = {2};
  cause.what = "a cause";
  diff.root_cause = cause;
  return diff;
}

TEST_F(HostileTrace, InvestigationNamingRowsTheTraceNeverHadIsDropped) {
  TraceData trace = *good_;
  trace.info["investigation"]["diff"] = toJson(hostileInvestigation(400000000, 1000000, 1000), true);
  SnapshotBuilder builder;
  const auto started = std::chrono::steady_clock::now();
  const auto snapshot = builder.build(trace);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), 1.0);
  ASSERT_TRUE(snapshot->diff != nullptr);
  EXPECT_FALSE(snapshot->diff->audit_at_divergence.has_value());
  EXPECT_FALSE(snapshot->diff->root_cause.has_value());
  ASSERT_EQ(snapshot->notes.size(), 2u);
  EXPECT_NE(snapshot->notes[0].find("audit_at_divergence names a row's row 400000000"), std::string::npos) << snapshot->notes[0];
  EXPECT_NE(snapshot->notes[1].find("root_cause names event 1000000"), std::string::npos) << snapshot->notes[1];
}

TEST_F(HostileTrace, InvestigationThatFitsIsKept) {
  TraceData trace = *good_;
  trace.info["investigation"]["diff"] = toJson(hostileInvestigation(2, 0, 1), true);
  SnapshotBuilder builder;
  const auto snapshot = builder.build(trace);
  ASSERT_TRUE(snapshot->diff != nullptr);
  EXPECT_TRUE(snapshot->diff->audit_at_divergence.has_value());
  EXPECT_TRUE(snapshot->diff->root_cause.has_value());
  EXPECT_TRUE(snapshot->notes.empty()) << snapshot->notes.front();
}

TEST_F(HostileTrace, TokenTextKeyedByHugeId) {
  expectRefused([](TraceData& t) { t.token_text[1000000000] = "x"; }, {"token_text id 1000000000 is outside the vocabulary [0, 512)"});
}

TEST_F(HostileTrace, SequenceIdOutsideTheVocabulary) {
  expectRefused([](TraceData& t) { t.record.sequence.back() = 123456; }, {"token 22 of the sequence 123456 is outside the vocabulary [0, 512)"});
}

TEST_F(HostileTrace, PromptLongerThanTheSequence) {
  expectRefused([](TraceData& t) { t.record.prompt_length = static_cast<int64_t>(t.record.sequence.size()) + 1; },
                {"prompt_length"});
}

TEST_F(HostileTrace, EmittedTokensDisagreeWithTheSequence) {
  expectRefused([](TraceData& t) { t.record.rounds.back().emitted.push_back(5); }, {"emitted tokens make"});
}

TEST_F(HostileTrace, RoundsOutOfOrder) {
  expectRefused([](TraceData& t) { std::swap(t.record.rounds[1].index, t.record.rounds[2].index); },
                {"rounds[1] says it is round 2"});
}

TEST_F(HostileTrace, HugeLayerCount) {
  expectRefused([](TraceData& t) { t.record.target_layers = 1000000000; },
                {"record.target_layers must be an integer in [1, 1024]"});
}

TEST_F(HostileTrace, LayerCountDisagreesWithEvents) {
  expectRefused([](TraceData& t) { t.record.drafter_layers += 1; }, {"drafter model has"});
}

TEST_F(HostileTrace, EventNamesAMissingLedgerEntry) {
  expectRefused(
      [](TraceData& t) {
        auto events = t.record.events.events();
        for (CacheEvent& e : events)
          if (!e.written.empty()) {
            e.written[0] = t.record.ledger.size() + 5;
            break;
          }
        t.record.events.restore(events);
      },
      {"ledger entry is", "outside"});
}

TEST_F(HostileTrace, EventRowCountsDisagreeWithReplay) {
  expectRefused(
      [](TraceData& t) {
        auto events = t.record.events.events();
        events.back().rows_after[0] += 7;
        t.record.events.restore(events);
      },
      {"replaying it gives"});
}

TEST_F(HostileTrace, DanglingBlockWithANegativeBlock) {
  expectRefused(
      [](TraceData& t) {
        auto events = t.record.events.events();
        events.back().dangling_blocks.push_back({-3, 0, 2, -1});
        t.record.events.restore(events);
      },
      {"dangling_blocks", "negative block"});
}

TEST_F(HostileTrace, LedgerEntryBornAfterTheLastRound) {
  expectRefused(
      [](TraceData& t) {
        std::vector<LedgerEntry> entries = t.record.ledger.entries();
        entries[0].born_round = 500;
        t.record.ledger.restore(entries, t.record.ledger.keyRows(), t.record.ledger.valueRows());
      },
      {"ledger entry 0 born_round is 500"});
}

TEST_F(HostileTrace, LedgerRowsOfTheWrongLayerCount) {
  expectRefused(
      [](TraceData& t) {
        std::vector<at::Tensor> k = t.record.ledger.keyRows(), v = t.record.ledger.valueRows();
        for (auto* rows : {&k, &v})
          for (at::Tensor& row : *rows) row = torch::cat({row, row});  // twice the layers
        t.record.ledger.restore(t.record.ledger.entries(), k, v);
      },
      {"K/V rows hold", "layers"});
}

TEST_F(HostileTrace, GuiStateOutOfRange) {
  expectRefused([](TraceData& t) { t.info["state"] = {{"current_round", 0}, {"next_phase", 99}}; },
                {"info.state.next_phase is 99"});
}

TEST_F(HostileTrace, MetadataNested100000Deep) {
  const std::string path = rewritten([](std::string& meta) {
    replaceOnce(meta, "\"info\":{", "\"info\":{\"deep\":" + std::string(100000, '[') + std::string(100000, ']') + ",");
  });
  try {
    readTrace(path);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than 64 levels at /info/deep/0/0"), std::string::npos) << e.what();
  }
}

TEST_F(HostileTrace, MetadataNumbersOfTheWrongKind) {
  struct Case {
    std::string from, to, part;
  };
  const Case cases[] = {
      {"\"target_layers\":", "\"target_layers\":1e300,\"x\":", "/record/target_layers"},
      {"\"target_layers\":", "\"target_layers\":2.5,\"x\":", "record.target_layers must be an integer"},
      {"\"prompt_length\":", "\"prompt_length\":\"4\",\"x\":", "prompt_length must be an integer"},
      {"\"round\":1,", "\"round\":1.5,", "field 'round' must be an integer"},
      {"\"version\":4", "\"version\":\"4\"", "version \"4\" is not supported"},
      {"\"token_text\":{", "\"token_text\":{\"abc\":\"x\",", "token_text key 'abc' is not a token id"},
      {"\"token_bytes\":{", "\"token_bytes\":{\"7\":[300],", "must be an integer in [0, 255]"},
      {"\"sequence\":[", "\"sequence\":[-5,", "sequence[0] must be an integer"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.to);
    const std::string path = rewritten([&](std::string& meta) {
      // An inserted member needs a comma unless the object was empty.
      const size_t at = meta.find(c.from);
      ASSERT_NE(at, std::string::npos) << c.from;
      std::string to = c.to;
      if (to.back() == ',' && meta[at + c.from.size()] == '}') to.pop_back();
      meta.replace(at, c.from.size(), to);
    });
    try {
      readTrace(path);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.part), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a kvscope::Error: " << e.what();
    }
  }
}

TEST_F(HostileTrace, IntegerTensorWhereFloatsBelong) {
  const std::string path = rewritten([](std::string&) {},
                                     [](std::vector<StWriteTensor>& tensors) {
                                       for (StWriteTensor& t : tensors)
                                         if (t.name == "round.1.logits") t.dtype = StDType::I32;
                                     });
  try {
    readTrace(path);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'round.1.logits' is stored as I32, not as floats"), std::string::npos) << e.what();
  }
}

// --- atomic save -------------------------------------------------------------

// The child half of SaveKilledAtRandomPointsKeepsTheOldFile, run in a fresh
// process (exec of this binary): saves the trace in $KVSCOPE_SAVE_SOURCE over
// $KVSCOPE_SAVE_TARGET again and again, padded to tens of MB, until killed.
TEST(AtomicTraceSave, ChildSavingLoop) {
  const char* source = std::getenv("KVSCOPE_SAVE_SOURCE");
  const char* target = std::getenv("KVSCOPE_SAVE_TARGET");
  if (!source || !target) GTEST_SKIP() << "only run as the child of SaveKilledAtRandomPointsKeepsTheOldFile";
  TraceData trace = readTrace(source);
  trace.info["padding"] = std::string(40 << 20, 'p');
  writeTrace(target, trace);  // one whole save first: its size tells the parent what "whole" is
  std::ofstream(std::string(target) + ".started") << "saving\n";
  for (int64_t i = 0;; ++i) {
    trace.info["save"] = i;
    writeTrace(target, trace);
  }
}

struct ChildGuard {
  pid_t pid;
  ~ChildGuard() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

TEST(AtomicTraceSave, SaveKilledAtRandomPointsKeepsTheOldFile) {
  std::string pattern = (fs::temp_directory_path() / "kvscope-save-XXXXXX").string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  const fs::path dir = pattern;
  const std::string source = (dir / "source.kvtrace").string();
  const std::string target = (dir / "target.kvtrace").string();
  writeTrace(source, captureTrace(*faultySession(Fault::None, true), nullptr, {{"save", -1}}));
  fs::copy_file(source, target);

  std::mt19937 rng(13);
  int killed_mid_save = 0;
  auto tempExists = [&] {
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.path().filename().string().find(".tmp-") != std::string::npos) return true;
    return false;
  };
  for (int round = 0; round < 8; ++round) {
    const std::string env_source = "KVSCOPE_SAVE_SOURCE=" + source;
    const std::string env_target = "KVSCOPE_SAVE_TARGET=" + target;
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      char* argv[] = {const_cast<char*>("kvscope_core_tests"),
                      const_cast<char*>("--gtest_filter=AtomicTraceSave.ChildSavingLoop"), nullptr};
      char* envp[] = {const_cast<char*>(env_source.c_str()), const_cast<char*>(env_target.c_str()), nullptr};
      ::execve("/proc/self/exe", argv, envp);
      ::_exit(127);
    }
    ChildGuard guard{child};  // a failed assertion must not leave it saving forever
    // Once it is saving in a loop (a save of ~40 MB takes 0.1-0.3 s), kill
    // it: on even rounds while some file is half written (whichever file the
    // writer writes), on odd rounds at a random moment (serializing, writing,
    // fsyncing, renaming).
    const auto start = std::chrono::steady_clock::now();
    while (!fs::exists(target + ".started") && std::chrono::steady_clock::now() - start < std::chrono::seconds(60))
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(fs::exists(target + ".started")) << "the child never started saving";
    fs::remove(target + ".started");
    if (round % 2 == 0) {
      const uintmax_t whole = fs::file_size(target);
      auto halfWritten = [&] {
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(dir)) {
          const std::string name = entry.path().filename().string();
          if (name.rfind("target.kvtrace", 0) != 0) continue;
          const uintmax_t size = fs::file_size(entry.path(), ec);
          if (!ec && size > 0 && size < whole * 9 / 10) return true;
        }
        return false;
      };
      bool caught = false;
      while (!(caught = halfWritten()) && std::chrono::steady_clock::now() - start < std::chrono::seconds(60)) {
      }
      ASSERT_TRUE(caught) << "never saw a save in progress";
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(20, 1500)(rng)));
    }
    killed_mid_save += tempExists();
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    guard.pid = -1;
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the child ended on its own: " << status;

    // Whatever moment it died at, the target is a whole trace: the old one or a new one.
    TraceData read;
    ASSERT_NO_THROW(read = readTrace(target)) << "round " << round;
    EXPECT_TRUE(read.info.contains("save"));
    // What a killed save leaves is its temp file, never a broken target.
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.path().filename().string().find(".tmp-") != std::string::npos) fs::remove(entry.path());
  }
  std::cout << "[ info ] " << killed_mid_save << " of 8 kills landed while a temp file was being written\n";
  EXPECT_GT(killed_mid_save, 0) << "no kill landed during a save";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvscope
