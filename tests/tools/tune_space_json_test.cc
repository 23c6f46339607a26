// The JSON form of `fleetjit tune --space`: a full document parses into
// what it says, and every malformed field is refused with its name.
#include "tools/tune_space_json.h"

#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/common/seed.h"

namespace fleetjit::cli {
namespace {

TEST(TuneSpaceJsonTest, ParsesEveryField) {
  std::mt19937_64 rng = ::fleetjit::testing::SeededRng("TuneSpaceJson");
  const uint64_t n = 1 + rng() % (1u << 30);
  const uint32_t smem = static_cast<uint32_t>(rng() % 100000);
  const double a = static_cast<double>(rng() % 1000) / 8.0;
  const std::string doc =
      absl::StrCat(R"({
    "kernel": "tiled_axpy",
    "options": ["-std=c++17"],
    "name_expressions": ["k<float>"],
    "macro_sets": ["-DTILE=1024", "-DTILE=4096 -DSTAGES=2"],
    "shapes": [128, [256, 2], {"block": [64, 4, 1], "shared_bytes": )",
                   smem, R"(, "cluster": [2]}],
    "grid": {"extent": [)",
                   n, R"(, 3], "divisor": ["TILE", "block.y"]},
    "args": [{"f32": )",
                   a, R"(}, {"buffer": 4096, "fill": "random"},
             {"buffer": 8192, "fill": 205, "output": true}, {"i32": -7},
             {"u64": 18446744073709551615}],
    "warmup": 2, "samples": 11, "noise_threshold": 0.2, "timeout_ms": 500
  })");
  auto spec = ParseTuneSpec(doc);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->kernel, "tiled_axpy");
  EXPECT_EQ(spec->options, std::vector<std::string>{"-std=c++17"});
  EXPECT_EQ(spec->name_expressions, std::vector<std::string>{"k<float>"});
  ASSERT_EQ(spec->macro_sets.size(), 2u);
  EXPECT_EQ(spec->macro_sets[1], "-DTILE=4096 -DSTAGES=2");
  ASSERT_EQ(spec->shapes.size(), 3u);
  EXPECT_EQ(spec->shapes[0].block, (std::array<uint32_t, 3>{128, 0, 0}));
  EXPECT_EQ(spec->shapes[1].block, (std::array<uint32_t, 3>{256, 2, 0}));
  EXPECT_EQ(spec->shapes[2].block, (std::array<uint32_t, 3>{64, 4, 1}));
  EXPECT_EQ(spec->shapes[2].shared_bytes, smem);
  EXPECT_EQ(spec->shapes[2].cluster, (std::array<uint32_t, 3>{2, 0, 0}));
  EXPECT_EQ(spec->grid_extent, (std::array<uint64_t, 3>{n, 3, 0}));
  EXPECT_EQ(spec->grid_divisor[0], "TILE");
  EXPECT_EQ(spec->grid_divisor[1], "block.y");
  ASSERT_EQ(spec->args.size(), 5u);
  EXPECT_EQ(spec->args[0].kind, FJ_ARG_F32);
  EXPECT_DOUBLE_EQ(spec->args[0].f, a);
  EXPECT_EQ(spec->args[1].kind, FJ_ARG_POINTER);
  EXPECT_EQ(spec->args[1].bytes, 4096u);
  EXPECT_FALSE(spec->args[1].output);
  EXPECT_TRUE(spec->args[2].output);
  EXPECT_EQ(spec->args[2].fill, TuneArgSpec::Fill::kByte);
  EXPECT_EQ(spec->args[2].fill_byte, 205);
  EXPECT_EQ(spec->args[3].i, -7);
  EXPECT_EQ(static_cast<uint64_t>(spec->args[4].i), UINT64_MAX);
  EXPECT_EQ(spec->warmup, 2u);
  EXPECT_EQ(spec->samples, 11u);
  EXPECT_EQ(spec->timeout_ms, 500u);
  EXPECT_DOUBLE_EQ(spec->noise_threshold, 0.2);

  auto fixed = ParseTuneSpec(
      R"({"shapes": [32], "grid": [7, 2], "args": [{"buffer": 4, "output": true}]})");
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(fixed->grid, (std::array<uint32_t, 3>{7, 2, 0}));
}

TEST(TuneSpaceJsonTest, BadFieldsAreNamed) {
  const std::string out = R"({"buffer": 16, "output": true})";
  struct Case {
    std::string doc;
    const char* field;
  } cases[] = {
      {"[1, 2]", "top level"},
      {"{not json", "not valid JSON"},
      {absl::StrCat(R"({"shapes": [32], "args": [)", out,
                    R"(], "sampels": 3})"),
       "sampels"},
      {absl::StrCat(R"({"args": [)", out, "]}"), "shapes"},
      {absl::StrCat(R"({"shapes": [], "args": [)", out, "]}"), "shapes"},
      {absl::StrCat(R"({"shapes": [32, [1,2,3,4]], "args": [)", out, "]}"),
       "shapes[1]"},
      {absl::StrCat(R"({"shapes": [{"block": -1}], "args": [)", out, "]}"),
       "shapes[0].block"},
      {absl::StrCat(R"({"shapes": [{"blok": 32}], "args": [)", out, "]}"),
       "shapes[0].blok"},
      {absl::StrCat(
           R"({"shapes": [{"block": 32, "shared_bytes": "x"}], "args": [)", out,
           "]}"),
       "shapes[0].shared_bytes"},
      {absl::StrCat(R"({"macro_sets": ["-DA=1", 2], "shapes": [32], "args": [)",
                    out, "]}"),
       "macro_sets[1]"},
      {absl::StrCat(R"({"shapes": [32], "grid": {"divisor": "BM"}, "args": [)",
                    out, "]}"),
       "grid.extent"},
      {absl::StrCat(R"({"shapes": [32], "grid": "big", "args": [)", out, "]}"),
       "grid"},
      {R"({"shapes": [32]})", "args"},
      {R"({"shapes": [32], "args": [{"i32": 1}]})", "output"},
      {absl::StrCat(R"({"shapes": [32], "args": [{"i33": 1}, )", out, "]}"),
       "args[0].i33"},
      {absl::StrCat(R"({"shapes": [32], "args": [{"i32": 3000000000}, )", out,
                    "]}"),
       "args[0].i32"},
      {absl::StrCat(R"({"shapes": [32], "args": [{"u32": -1}, )", out, "]}"),
       "args[0].u32"},
      {absl::StrCat(R"({"shapes": [32], "args": [{"f32": "x"}, )", out, "]}"),
       "args[0].f32"},
      {R"({"shapes": [32], "args": [{"buffer": 0, "output": true}]})",
       "args[0].buffer"},
      {R"({"shapes": [32], "args": [{"buffer": 8, "fill": "nan", "output": true}]})",
       "args[0].fill"},
      {R"({"shapes": [32], "args": [{"buffer": 8, "output": 1}]})",
       "args[0].output"},
      {R"({"shapes": [32], "args": [{"buffer": 8, "output": true, "x": 1}]})",
       "args[0].x"},
      {absl::StrCat(R"({"shapes": [32], "noise_threshold": -1, "args": [)", out,
                    "]}"),
       "noise_threshold"},
      {absl::StrCat(R"({"shapes": [32], "samples": 1.5, "args": [)", out, "]}"),
       "samples"},
      {absl::StrCat(R"({"kernel": 3, "shapes": [32], "args": [)", out, "]}"),
       "kernel"},
      // Past FJ_TUNE_MAX_COUNT: each wait is bounded, not their number.
      {absl::StrCat(R"({"shapes": [32], "warmup": 4294967295, "args": [)", out,
                    "]}"),
       "warmup"},
      {absl::StrCat(R"({"shapes": [32], "samples": 10001, "args": [)", out,
                    "]}"),
       "samples"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.doc);
    auto r = ParseTuneSpec(c.doc);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), c.field))
        << r.status().message() << " should name " << c.field;
  }
}

}  // namespace
}  // namespace fleetjit::cli
