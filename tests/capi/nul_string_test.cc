// Header rule 6: no fj_str the caller passes may hold a NUL byte (a path,
// library name, URL, key or symbol would be cut at it). One table row per
// string the header's argument structs and functions take; a check that
// the table covers every fj_str field of those structs in the header, so a
// new field without a row fails here.
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/capi_fixture.h"

namespace {

using fleetjit::testing::S;

// A string holding a NUL in the middle: "abc\0def".
const std::string kNul("sm_90\0evil", 10);

// Structs whose fj_str fields the library reads (outputs, such as
// fj_tune_row, and callback parameters are not input strings).
const std::set<std::string> kInputStructs = {
    "fj_runtime_options", "fj_build_options", "fj_module_load_options",
    "fj_link_input",      "fj_link_options",  "fj_tune_options"};

// "struct.field" for every fj_str field (plain, pointer or array) of the
// input structs, read from the header.
std::set<std::string> HeaderStringFields() {
  std::ifstream in(FJ_HEADER_PATH);
  std::stringstream text;
  text << in.rdbuf();
  std::set<std::string> fields;
  const std::regex open(R"(^typedef struct (fj_\w+) \{)");
  const std::regex field(
      R"(^\s*(const\s+)?fj_str\s*\*?\s*(\w+)\s*(\[\d+\])?;)");
  std::string line, current;
  while (std::getline(text, line)) {
    std::smatch m;
    if (std::regex_search(line, m, open)) {
      current = m[1];
    } else if (line.rfind("} fj_", 0) == 0) {
      current.clear();
    } else if (!current.empty() && kInputStructs.count(current) &&
               std::regex_search(line, m, field)) {
      fields.insert(current + "." + m[2].str());
    }
  }
  return fields;
}

class NulStringTest : public fleetjit::testing::CapiRuntimeTest<> {
 protected:
  struct Row {
    std::string field;  // "struct.field", or "function(arg)"
    std::function<fj_status*()> call;
  };

  fj_build_options Build() {
    fj_build_options o{};
    o.struct_size = sizeof(o);
    o.source = S(source_);
    o.target = S(target_);
    return o;
  }

  // Every row: a valid call but for one string, which holds kNul.
  std::vector<Row> Rows() {
    std::vector<Row> rows;
    auto runtime = [&](const char* field,
                       std::function<void(fj_runtime_options&)> poke) {
      rows.push_back({std::string("fj_runtime_options.") + field, [this, poke] {
                        fj_runtime_options o{};
                        o.struct_size = sizeof(o);
                        poke(o);
                        fj_runtime* rt = nullptr;
                        fj_status* st = fj_runtime_create(&o, &rt);
                        if (rt != nullptr) fj_runtime_destroy(rt);
                        return st;
                      }});
    };
    runtime("libcuda_path",
            [](fj_runtime_options& o) { o.libcuda_path = S(kNul); });
    runtime("libnvrtc_path",
            [](fj_runtime_options& o) { o.libnvrtc_path = S(kNul); });
    runtime("target_override",
            [](fj_runtime_options& o) { o.target_override = S(kNul); });
    runtime("cache_dir", [](fj_runtime_options& o) { o.cache_dir = S(kNul); });
    runtime("remote_cache_url",
            [](fj_runtime_options& o) { o.remote_cache_url = S(kNul); });
    runtime("fleet_key", [](fj_runtime_options& o) { o.fleet_key = S(kNul); });

    auto build = [&](const char* field,
                     std::function<void(fj_build_options&)> poke) {
      rows.push_back({std::string("fj_build_options.") + field, [this, poke] {
                        fj_build_options o = Build();
                        poke(o);
                        fj_module* m = nullptr;
                        fj_status* st = fj_module_build(rt_, &o, &m);
                        fj_module_destroy(m);
                        return st;
                      }});
    };
    build("source", [](fj_build_options& o) { o.source = S(kNul); });
    build("name", [](fj_build_options& o) { o.name = S(kNul); });
    build("target", [](fj_build_options& o) { o.target = S(kNul); });
    build("nvrtc_options", [this](fj_build_options& o) {
      o.nvrtc_options = &nul_;
      o.num_nvrtc_options = 1;
    });
    build("name_expressions", [this](fj_build_options& o) {
      o.name_expressions = &nul_;
      o.num_name_expressions = 1;
    });
    build("include_dirs", [this](fj_build_options& o) {
      o.include_dirs = &nul_;
      o.num_include_dirs = 1;
    });

    auto load = [&](const char* field,
                    std::function<void(fj_module_load_options&)> poke) {
      rows.push_back(
          {std::string("fj_module_load_options.") + field, [this, poke] {
             fj_module_load_options o{};
             o.struct_size = sizeof(o);
             o.image = image_.data();
             o.image_size = image_.size();
             poke(o);
             fj_module* m = nullptr;
             fj_status* st = fj_module_load(rt_, &o, &m);
             fj_module_destroy(m);
             return st;
           }});
    };
    load("name", [](fj_module_load_options& o) { o.name = S(kNul); });
    load("target", [](fj_module_load_options& o) { o.target = S(kNul); });

    auto link =
        [&](const char* field,
            std::function<void(fj_link_options&, fj_link_input&)> poke) {
          rows.push_back({field, [this, poke] {
                            fj_link_input in{};
                            in.struct_size = sizeof(in);
                            in.kind = FJ_LINK_SOURCE;
                            in.data = source_.data();
                            in.size = source_.size();
                            fj_link_options o{};
                            o.struct_size = sizeof(o);
                            o.inputs = &in;
                            o.num_inputs = 1;
                            o.target = S(target_);
                            poke(o, in);
                            fj_module* m = nullptr;
                            fj_status* st = fj_module_link(rt_, &o, &m);
                            fj_module_destroy(m);
                            return st;
                          }});
        };
    link("fj_link_input.name",
         [](fj_link_options&, fj_link_input& in) { in.name = S(kNul); });
    link("fj_link_input.nvrtc_options",
         [this](fj_link_options&, fj_link_input& in) {
           in.nvrtc_options = &nul_;
           in.num_nvrtc_options = 1;
         });
    link("fj_link_input.name_expressions",
         [this](fj_link_options&, fj_link_input& in) {
           in.name_expressions = &nul_;
           in.num_name_expressions = 1;
         });
    link("fj_link_options.name",
         [](fj_link_options& o, fj_link_input&) { o.name = S(kNul); });
    link("fj_link_options.target",
         [](fj_link_options& o, fj_link_input&) { o.target = S(kNul); });
    link("fj_link_options.link_options",
         [this](fj_link_options& o, fj_link_input&) {
           o.link_options = &nul_;
           o.num_link_options = 1;
         });
    link("fj_link_options.include_dirs",
         [this](fj_link_options& o, fj_link_input&) {
           o.include_dirs = &nul_;
           o.num_include_dirs = 1;
         });

    auto tune = [&](const char* field,
                    std::function<void(fj_tune_options&)> poke) {
      rows.push_back({std::string("fj_tune_options.") + field, [this, poke] {
                        fj_build_options b = Build();
                        fj_tune_shape shape{};
                        shape.struct_size = sizeof(shape);
                        shape.block[0] = 64;
                        fj_tune_options o{};
                        o.struct_size = sizeof(o);
                        o.build = &b;
                        o.kernel = S(kernel_);
                        o.shapes = &shape;
                        o.num_shapes = 1;
                        poke(o);
                        fj_tune_result* r = nullptr;
                        fj_status* st = fj_tune(rt_, &o, &r);
                        fj_tune_result_free(r);
                        return st;
                      }});
    };
    tune("kernel", [](fj_tune_options& o) { o.kernel = S(kNul); });
    tune("macro_sets", [this](fj_tune_options& o) {
      o.macro_sets = &nul_;
      o.num_macro_sets = 1;
    });
    tune("grid_divisor",
         [](fj_tune_options& o) { o.grid_divisor[1] = S(kNul); });

    rows.push_back({"fj_copy_plan_for_target(target)", [] {
                      fj_copy_plan plan{};
                      plan.struct_size = sizeof(plan);
                      return fj_copy_plan_for_target(S(kNul), FJ_COPY_IMPL_AUTO,
                                                     &plan);
                    }});
    rows.push_back({"fj_module_get_kernel(name)", [this] {
                      fj_kernel* k = nullptr;
                      return fj_module_get_kernel(module_, S(kNul), 0, &k);
                    }});
    rows.push_back({"fj_module_get_global(name)", [this] {
                      fj_global_info info{};
                      info.struct_size = sizeof(info);
                      return fj_module_get_global(module_, S(kNul), 0, &info);
                    }});
    rows.push_back({"fj_module_global_write(name)", [this] {
                      float v = 1;
                      return fj_module_global_write(module_, S(kNul), 0, 0, &v,
                                                    sizeof(v), nullptr);
                    }});
    rows.push_back({"fj_module_global_read(name)", [this] {
                      float v = 1;
                      return fj_module_global_read(module_, S(kNul), 0, 0, &v,
                                                   sizeof(v), nullptr);
                    }});
    return rows;
  }

  void SetUp() override {
    CapiRuntimeTest::SetUp();
    source_ = fleetjit::testing::SaxpySource();
    fj_build_options o = Build();
    FJ_ASSERT_OK(fj_module_build(rt_, &o, &module_));
    // Its image, for fj_module_load's rows.
    const void* data = nullptr;
    size_t size = 0;
    FJ_ASSERT_OK(fj_module_image(module_, &data, &size));
    image_.assign(static_cast<const char*>(data), size);
  }
  void TearDown() override {
    if (module_ != nullptr) fj_module_destroy(module_);
    CapiRuntimeTest::TearDown();
  }

  std::string source_, image_, target_ = "sm_90", kernel_ = "saxpy";
  fj_str nul_ = S(kNul);
  fj_module* module_ = nullptr;
};

TEST_F(NulStringTest, EveryStringRefusesAnEmbeddedNul) {
  std::set<std::string> covered;
  for (const Row& row : Rows()) {
    SCOPED_TRACE(row.field);
    fj_status* st = row.call();
    const std::string message =
        st == nullptr ? "" : fj_status_message(st, nullptr);
    EXPECT_EQ(fj_status_code(st), FJ_INVALID_ARGUMENT) << message;
    EXPECT_NE(message.find("NUL"), std::string::npos) << message;
    // The message names the field (an array's element as name[0]).
    const std::string name =
        row.field.find('(') != std::string::npos
            ? row.field.substr(row.field.find('(') + 1,
                               row.field.size() - row.field.find('(') - 2)
            : row.field.substr(row.field.find('.') + 1);
    EXPECT_NE(message.find(name), std::string::npos) << message;
    fj_status_free(st);
    covered.insert(row.field);
  }
  for (const std::string& field : HeaderStringFields()) {
    EXPECT_TRUE(covered.count(field)) << field << " has no row in this test";
  }
  EXPECT_GE(HeaderStringFields().size(), 20u) << "the header was not read";
}

// The same strings without the NUL are accepted (the rows fail only for it).
TEST_F(NulStringTest, TheSameCallsWithoutTheNulReachFurther) {
  fj_build_options o = Build();
  const std::string cut = kNul.substr(0, kNul.find('\0'));
  o.target = S(cut);
  fj_module* m = nullptr;
  FJ_ASSERT_OK(fj_module_build(rt_, &o, &m));
  FJ_ASSERT_OK(fj_module_destroy(m));
}

}  // namespace
