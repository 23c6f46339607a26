// The newcomer corpus's machinery without a GPU (tools/corpus.h; the corpus
// is bench/corpus/, its format bench/corpus/README.md):
//  - the expression evaluator against the table run.py's is tested on too
//    (tests/data/corpus_expr_cases.json);
//  - the sample corpus (tests/data/corpus_sample) resolved, and manifests
//    that cannot run refused, naming what is wrong;
//  - every manifest of every set folder (bench/corpus/set*/, found anew each
//    run) checked at every size, every layer kernel built for sm_90 under
//    tma, cp_async and sync, for sm_80 and sm_75, every plain twin for
//    sm_90, sm_80 and sm_75 (a size whose defines differ: sm_90 under tma),
//    and every launch (layer and twin, each size) passed through
//    fj_launch's argument checks on the fake CUDA driver.
#include "tools/corpus.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/common/fake_cuda/fake_cuda.h"
#include "tests/common/temp_dir.h"
#include "tests/common/test_paths.h"

namespace fleetjit::cli::corpus {
namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

// The repository: where the build recorded it, else the working directory
// (a staged tree run from the repository's root on the GPU host).
std::string SourceDir() {
  std::error_code ec;
  if (fs::is_directory(fs::path(FJ_SOURCE_DIR) / "tests/data", ec))
    return FJ_SOURCE_DIR;
  return fs::current_path(ec).string();
}
std::string SampleDir() { return SourceDir() + "/tests/data/corpus_sample"; }

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

TEST(CorpusExpression, MatchesTheTableBothEvaluatorsRead) {
  const Json table =
      Json::parse(Read(SourceDir() + "/tests/data/corpus_expr_cases.json"));
  Env env;
  for (const auto& [k, v] : table["env"].items()) {
    env[k] = v.is_number_integer() ? Value::Int(v.get<int64_t>())
                                   : Value::Float(v.get<double>());
  }
  int n = 0;
  for (const Json& c : table["cases"]) {
    const std::string expr = c[0].get<std::string>();
    const Json& want = c[1];
    SCOPED_TRACE(expr);
    absl::StatusOr<Value> got = Evaluate(expr, env);
    if (want.is_object()) {
      ASSERT_FALSE(got.ok()) << "gave " << DefineText(*got);
      EXPECT_TRUE(absl::StrContains(got.status().message(),
                                    want["error"].get<std::string>()))
          << got.status();
      EXPECT_TRUE(absl::StrContains(got.status().message(), expr))
          << "the error quotes the expression: " << got.status();
    } else {
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->is_int, want.is_number_integer());
      if (got->is_int) {
        EXPECT_EQ(got->i, want.get<int64_t>());
      } else {
        EXPECT_DOUBLE_EQ(got->d, want.get<double>());
      }
    }
    ++n;
  }
  EXPECT_GT(n, 40);
}

TEST(CorpusExpression, JsonNumbersAndDefineText) {
  Env env{{"N", Value::Int(5000)}};
  EXPECT_EQ(EvaluateJson(Json(256), env)->i, 256);
  EXPECT_FALSE(EvaluateJson(Json(0.5), env)->is_int);
  EXPECT_FALSE(EvaluateJson(Json(true), env).ok());
  EXPECT_FALSE(EvaluateJson(Json(uint64_t{1} << 63), env).ok());
  EXPECT_EQ(DefineText(Value::Int(-12)), "-12");
  EXPECT_EQ(DefineText(Value::Float(1e-5)), "1e-05");
  EXPECT_EQ(DefineText(Value::Float(0.5)), "0.5");
  EXPECT_EQ(DefineText(Value::Float(2)), "2.0");
  EXPECT_EQ(DefineText(*Evaluate("N / 4", env)), "1250.0");
}

TEST(CorpusManifest, TheSampleResolvesAtEachSize) {
  absl::StatusOr<Manifest> m = LoadManifest(SampleDir() + "/gather_scale.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->id(), "corpus_sample/gather_scale");
  ASSERT_EQ(m->sizes.size(), 2u);
  absl::StatusOr<Problem> p = Resolve(*m, 0, 132);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->label, "1024 x 2048");
  EXPECT_EQ(p->bytes, 2ull * 1024 * 2048 * 2 + 1024 * 8);
  ASSERT_EQ(p->buffers.size(), 4u);
  const Buffer* x = p->Find("x");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->shape, (std::vector<int64_t>{1024, 2048}));
  EXPECT_EQ(x->bytes, 1024ull * 2048 * 2);
  EXPECT_STREQ(x->dtype->name, "bf16");
  EXPECT_EQ(x->init, "randn");
  EXPECT_FALSE(x->output);
  const Buffer* idx = p->Find("idx");
  EXPECT_EQ(idx->init, "perm");
  EXPECT_EQ(idx->init_args, (std::vector<int64_t>{1024}));
  const Buffer* sums = p->Find("sums");
  EXPECT_TRUE(sums->output);
  EXPECT_EQ(sums->init, "");
  EXPECT_DOUBLE_EQ(sums->atol, 0.001);
  EXPECT_DOUBLE_EQ(sums->rtol, 0.0001);
  EXPECT_EQ(p->layer.grid[0], 1024u);  // min(R, 8 * sms)
  EXPECT_EQ(p->layer.block[0], 128u);
  EXPECT_EQ(p->layer.block[1], 1u);
  EXPECT_EQ(p->layer.defines, (std::vector<std::string>{"-DTILE=256"}));
  ASSERT_EQ(p->layer.args.size(), 7u);
  EXPECT_EQ(p->layer.args[0].kind, Arg::kTensor);
  EXPECT_EQ(p->layer.args[0].box, (std::vector<int64_t>{1, 256}));
  EXPECT_EQ(p->layer.args[0].oob, FJ_OOB_ZEROS);
  EXPECT_EQ(p->layer.args[5].kind, Arg::kI32);
  EXPECT_EQ(p->layer.args[5].i, 2048);  // C
  EXPECT_EQ(p->layer.args[6].kind, Arg::kF32);
  EXPECT_EQ(p->layer.args[6].f, 0.5);
  EXPECT_TRUE(p->plain.defines.empty());
  EXPECT_TRUE(absl::EndsWith(p->plain.source_path, "gather_scale_plain.cu"));

  p = Resolve(*m, 1, 8);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->layer.grid[0], 64u);
  EXPECT_EQ(p->layer.defines, (std::vector<std::string>{"-DTILE=200"}));
  EXPECT_EQ(p->layer.args[0].box, (std::vector<int64_t>{1, 200}));
}

// Each edit of the sample (a JSON pointer set to a value, or removed) is
// refused with a message that contains the text.
TEST(CorpusManifest, RefusesWhatCannotRunNamingIt) {
  const std::string path = SampleDir() + "/gather_scale.json";
  const Json sample = Json::parse(Read(path));
  struct Edit {
    const char* pointer;
    Json value;  // null: remove the key
    const char* error;
    bool at_resolve;  // caught when a size is resolved, not at load
  };
  const std::vector<Edit> edits = {
      {"/torch", nullptr, "'torch' is missing", false},
      {"/sizes", Json::array(), "sizes: a non-empty list", false},
      {"/sizes/0/vars/sms", 3, "'sms' cannot be a variable's name", false},
      {"/sizes/0/vars/R", "4096", "is not a number", false},
      {"/bytes2", 1, "unknown key 'bytes2'", false},
      {"/buffers/x/dtype", "bfloat16", "is not one of f32", false},
      {"/buffers/x/init", nullptr, "an input needs an init", false},
      {"/buffers/x/init", "normal", "'normal' is not one of randn", false},
      {"/buffers/x/atol", 0.1, "only outputs are compared", false},
      {"/buffers/y/rtol", -1, "is not a number >= 0", false},
      {"/buffers/x/shape/0", "R / 2", "not an integer (// divides", true},
      {"/buffers/x/shape/0", "R - R", "extents are >= 1", true},
      {"/buffers/x/shape/1", "Q", "unknown name 'Q'", true},
      {"/buffers/idx/init", "perm(R - 1)", "distinct values", true},
      {"/buffers/idx/init", "randn", "fills floating-point buffers", true},
      {"/buffers/x/init", "randint(0, 4)", "fills integer buffers", true},
      {"/buffers/idx/init", "randint(5, 5)", "is empty or does not fit", true},
      {"/buffers/idx/dtype", "i8", "distinct values that fit i8", true},
      {"/layer/source", "missing.cu", "no file missing.cu", false},
      {"/layer/args/1", Json{{"pointer", "idx"}}, "give exactly one of", false},
      {"/layer/args/1", Json{{"buffer", "idx"}, {"i32", 1}}, "exactly one",
       false},
      {"/layer/args/1", Json{{"buffer", "nope"}}, "no buffer \"nope\"", false},
      {"/layer/args/0/oob", "clamp", "is not one of promise_in_bounds", false},
      {"/layer/args/0/swizzle", 16, "is not 0, 32, 64 or 128", false},
      {"/layer/args/0/box", Json::array({1, 1, 256}), "3 extents for a 2-D",
       true},
      {"/layer/args/0",
       Json{{"tensor", "x"}, {"box", Json::array({1, "C + 8"})}},
       "past the extent", true},
      {"/layer/args/0/view", Json::array({"R", "C", 2}), "does not hold", true},
      {"/layer/args/5", Json{{"i32", "R * 100000000"}}, "does not fit i32",
       true},
      {"/layer/args/5", Json{{"i64", "R / 3"}}, "not an integer", true},
      {"/layer/args/6", Json{{"f32", "1e39"}}, "not a finite f32", true},
      {"/layer/block", Json::array({2048}), "(1..1024)", true},
      {"/layer/block", Json::array({64, 64}), "4096 threads", true},
      {"/layer/grid", Json::array({1, 1, 1, 1}), "4 entries", false},
      {"/layer/smem", "-1", "smem is -1", true},
      {"/layer/defines/9X", 1, "is not a macro name", false},
      {"/plain/args/4", Json{{"i32", "R +"}}, "unexpected the end", true},
  };
  for (const Edit& e : edits) {
    SCOPED_TRACE(absl::StrCat(e.pointer, " = ", e.value.dump()));
    Json data = sample;
    const Json::json_pointer ptr(e.pointer);
    if (e.value.is_null()) {
      data[ptr.parent_pointer()].erase(ptr.back());
    } else {
      data[ptr] = e.value;
    }
    absl::StatusOr<Manifest> m = CheckManifest(data, path);
    if (!e.at_resolve) {
      ASSERT_FALSE(m.ok());
      EXPECT_TRUE(absl::StrContains(m.status().message(), e.error))
          << m.status();
      continue;
    }
    ASSERT_TRUE(m.ok()) << m.status();
    absl::Status st = Resolve(*m, 0, 132).status();
    ASSERT_FALSE(st.ok());
    EXPECT_TRUE(absl::StrContains(st.message(), e.error)) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), "size '1024 x 2048'")) << st;
  }
}

TEST(CorpusManifest, NotJsonNamesTheFile) {
  testing::TempDir tmp("fj_corpus");
  tmp.Write("set1/bad.json", "{\"name\": ");
  absl::StatusOr<Manifest> m = LoadManifest(tmp.Sub("set1/bad.json"));
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(absl::StrContains(m.status().message(), "bad.json: not JSON"))
      << m.status();
}

TEST(CorpusSets, AFolderOfManifestsIsASetAnyOtherARootOfSetFolders) {
  testing::TempDir tmp("fj_corpus");
  for (const char* f :
       {"gather_scale.json", "gather_scale.cu", "gather_scale_plain.cu"}) {
    tmp.Write(absl::StrCat("root/set2/", f), Read(SampleDir() + "/" + f));
    tmp.Write(absl::StrCat("root/set1/", f), Read(SampleDir() + "/" + f));
  }
  tmp.Write("root/results/x.json", "{}");  // not a set*/ folder
  absl::StatusOr<std::vector<std::string>> sets = FindSets({tmp.Sub("root")});
  ASSERT_TRUE(sets.ok()) << sets.status();
  EXPECT_EQ(*sets, (std::vector<std::string>{tmp.Sub("root/set1"),
                                             tmp.Sub("root/set2")}));
  sets = FindSets({SampleDir(), tmp.Sub("root/set2")});
  ASSERT_TRUE(sets.ok());
  EXPECT_EQ(sets->size(), 2u);
  absl::StatusOr<std::vector<Manifest>> ms = LoadSets(*sets);
  ASSERT_TRUE(ms.ok()) << ms.status();
  ASSERT_EQ(ms->size(), 3u);
  EXPECT_EQ((*ms)[0].id(), "corpus_sample/gather_scale");
  EXPECT_EQ((*ms)[1].id(), "corpus_sample/row_quant");
  EXPECT_EQ((*ms)[2].id(), "set2/gather_scale");
  EXPECT_EQ(FindSets({tmp.Sub("nowhere")}).status().code(),
            absl::StatusCode::kNotFound);
}

// Every manifest this run checks: each set folder of bench/corpus, and the
// sample.
std::vector<Manifest> AllManifests() {
  std::vector<std::string> dirs = {SampleDir()};
  absl::StatusOr<std::vector<std::string>> sets =
      FindSets({SourceDir() + "/bench/corpus"});
  EXPECT_TRUE(sets.ok()) << sets.status();
  if (sets.ok()) dirs.insert(dirs.end(), sets->begin(), sets->end());
  absl::StatusOr<std::vector<Manifest>> ms = LoadSets(dirs);
  EXPECT_TRUE(ms.ok()) << ms.status();
  return ms.ok() ? *ms : std::vector<Manifest>{};
}

TEST(CorpusSets, EveryManifestResolvesAtEverySize) {
  int n = 0;
  for (const Manifest& m : AllManifests()) {
    for (size_t s = 0; s < m.sizes.size(); ++s) {
      for (int sms : {132, 78}) {
        absl::Status st = Resolve(m, s, sms).status();
        EXPECT_TRUE(st.ok()) << st;
        ++n;
      }
    }
  }
  EXPECT_GE(n, 4);  // the sample's two sizes at least
}

std::string Tail(fj_status* st) {
  std::string msg = fj_status_message(st, nullptr);
  size_t len = 0;
  const char* log = fj_status_detail(st, fj_str{"build_log", 9}, &len);
  if (log != nullptr) {
    std::string text(log, len);
    if (text.size() > 1500) text = text.substr(text.size() - 1500);
    msg += "\n" + text;
  }
  return msg;
}

struct Target {
  const char* target;
  fj_copy_impl impl;  // AUTO for the plain twins
};

// One test: the builds share a runtime (on the fake driver: the launch
// checks need a device; named targets need none) and its build threads.
TEST(CorpusBuild,
     EverySourceBuildsForNamedTargetsAndEveryLaunchPassesItsChecks) {
  const std::vector<Manifest> all = AllManifests();
  ASSERT_FALSE(all.empty());
  fjfake_reset(1);
  const std::string driver =
      testing::BesideExecutable("../lib/libfj_fake_cuda.so", FJ_FAKE_CUDA_PATH);
  fj_runtime_options ro{};
  ro.struct_size = sizeof(ro);
  ro.libcuda_path = fj_str{driver.data(), driver.size()};
  fj_runtime* rt = nullptr;
  ASSERT_EQ(fj_runtime_create(&ro, &rt), nullptr);
  int32_t devices = 0;
  fj_status_free(fj_device_count(rt, &devices));
  ASSERT_EQ(devices, 1) << "the fake driver did not load from " << driver;

  // 1. Every build, started at once.
  const std::vector<Target> layer_targets = {{"sm_90", FJ_COPY_IMPL_TMA},
                                             {"sm_90", FJ_COPY_IMPL_CP_ASYNC},
                                             {"sm_90", FJ_COPY_IMPL_SYNC},
                                             {"sm_80", FJ_COPY_IMPL_AUTO},
                                             {"sm_75", FJ_COPY_IMPL_AUTO}};
  const std::vector<Target> plain_targets = {{"sm_90", FJ_COPY_IMPL_AUTO},
                                             {"sm_80", FJ_COPY_IMPL_AUTO},
                                             {"sm_75", FJ_COPY_IMPL_AUTO}};
  struct Pending {
    std::string what;
    std::unique_ptr<BuildRequest> request;
    fj_build* build = nullptr;
    const char* target;
    fj_copy_impl impl;
  };
  std::vector<Pending> pending;
  std::set<std::string> keys;
  for (const Manifest& m : all) {
    for (size_t s = 0; s < m.sizes.size(); ++s) {
      absl::StatusOr<Problem> p = Resolve(m, s, 132);
      ASSERT_TRUE(p.ok()) << p.status();
      for (const bool layer : {true, false}) {
        const Launch& l = layer ? p->layer : p->plain;
        for (const Target& t : layer ? layer_targets : plain_targets) {
          // The first size's defines everywhere; another size's (when
          // they differ) for sm_90 under tma alone, to keep the test short.
          if (s > 0 && (std::string(t.target) != "sm_90" ||
                        (layer && t.impl != FJ_COPY_IMPL_TMA))) {
            continue;
          }
          absl::StatusOr<std::unique_ptr<BuildRequest>> r =
              BuildRequest::Make(l, t.target, t.impl, FJ_OUTPUT_CUBIN);
          ASSERT_TRUE(r.ok()) << r.status();
          if (!keys.insert((*r)->Key()).second) continue;
          Pending b;
          b.what = absl::StrCat(
              m.id(), " ", layer ? "layer" : "plain", " (", l.kernel,
              l.defines.empty() ? "" : " " + absl::StrJoin(l.defines, " "),
              ") for ", t.target, " ", fj_copy_impl_name(t.impl));
          b.request = std::move(*r);
          b.target = t.target;
          b.impl = t.impl;
          ASSERT_EQ(fj_module_build_async(rt, &b.request->options(), &b.build),
                    nullptr);
          pending.push_back(std::move(b));
        }
      }
    }
  }
  // 2. Each build's module: the target and implementation asked for.
  std::vector<std::string> failed;
  for (Pending& b : pending) {
    fj_module* mod = nullptr;
    fj_status* st = fj_build_take(b.build, &mod);
    if (st != nullptr && fj_status_code(st) == FJ_UNAVAILABLE &&
        absl::StrContains(fj_status_message(st, nullptr), "NVRTC")) {
      fj_status_free(st);
      for (Pending& p : pending) fj_status_free(fj_build_destroy(p.build));
      fj_status_free(fj_runtime_destroy(rt));
      GTEST_SKIP() << "no NVRTC";
    }
    if (st != nullptr) {
      failed.push_back(b.what + ": " + Tail(st));
      fj_status_free(st);
    } else {
      fj_module_info info{};
      info.struct_size = sizeof(info);
      EXPECT_EQ(fj_module_info_get(mod, &info), nullptr);
      EXPECT_STREQ(info.target, b.target) << b.what;
      if (b.impl != FJ_COPY_IMPL_AUTO)
        EXPECT_EQ(info.copy_impl, b.impl) << b.what;
      EXPECT_GT(info.image_bytes, 0u) << b.what;
      fj_status_free(fj_module_destroy(mod));
    }
    fj_status_free(fj_build_destroy(b.build));
  }
  EXPECT_TRUE(failed.empty()) << failed.size() << " build(s) failed:\n"
                              << absl::StrJoin(failed, "\n\n");

  // 3. Each size's launches (layer under tma, twin) through fj_launch's
  // checks on the fake device (sm_90, 132 SMs): argument count, sizes and
  // kinds, tensor boxes, the launch shape and SMEM. The fake runs nothing.
  int launched = 0;
  for (const Manifest& m : all) {
    for (size_t s = 0; s < m.sizes.size(); ++s) {
      absl::StatusOr<Problem> p = Resolve(m, s, 132);
      ASSERT_TRUE(p.ok()) << p.status();
      std::map<std::string, uint64_t> addresses;
      for (const Buffer& b : p->buffers) {
        uint64_t a = 0;
        ASSERT_EQ(fj_mem_alloc(rt, 0, b.bytes, &a), nullptr) << b.name;
        addresses[b.name] = a;
      }
      for (const bool layer : {true, false}) {
        const Launch& l = layer ? p->layer : p->plain;
        SCOPED_TRACE(absl::StrCat(m.id(), " ", p->label, " ",
                                  layer ? "layer" : "plain"));
        absl::StatusOr<std::unique_ptr<BuildRequest>> r = BuildRequest::Make(
            l, "", layer ? FJ_COPY_IMPL_TMA : FJ_COPY_IMPL_AUTO);
        ASSERT_TRUE(r.ok()) << r.status();
        fj_module* mod = nullptr;
        fj_status* st = fj_module_build(rt, &(*r)->options(), &mod);
        if (st != nullptr) {  // reported above
          fj_status_free(st);
          continue;
        }
        fj_kernel* k = nullptr;
        st = fj_module_get_kernel(mod, fj_str{l.kernel.data(), l.kernel.size()},
                                  0, &k);
        EXPECT_EQ(st, nullptr) << (st ? fj_status_message(st, nullptr) : "");
        fj_status_free(st);
        absl::StatusOr<std::unique_ptr<LaunchArgs>> args =
            LaunchArgs::Make(*p, l, addresses, 0);
        ASSERT_TRUE(args.ok()) << args.status();
        if (k != nullptr) {
          fj_launch_config cfg{};
          cfg.struct_size = sizeof(cfg);
          for (int i = 0; i < 3; ++i) {
            cfg.grid[i] = l.grid[i];
            cfg.block[i] = l.block[i];
          }
          cfg.shared_bytes = l.smem;
          st = fj_launch(k, &cfg, (*args)->args().data(),
                         (*args)->args().size());
          EXPECT_EQ(st, nullptr)
              << l.kernel << ": " << (st ? fj_status_message(st, nullptr) : "");
          fj_status_free(st);
          ++launched;
        }
        fj_status_free(fj_module_destroy(mod));
      }
      for (const auto& [name, a] : addresses)
        fj_status_free(fj_mem_free(rt, a));
    }
  }
  EXPECT_GE(launched, 4);
  fj_status_free(fj_runtime_destroy(rt));
}

}  // namespace
}  // namespace fleetjit::cli::corpus
