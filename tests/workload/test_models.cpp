#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "compass/workload/model_config.hpp"

namespace compass::workload {
namespace {

TEST(Models, BuiltinsAreValidAndNamedUniquely) {
  const auto models = builtin_models();
  ASSERT_EQ(models.size(), 10u);
  for (std::size_t i = 0; i < models.size(); ++i) {
    EXPECT_TRUE(validate(models[i]).ok()) << models[i].name;
    for (std::size_t j = i + 1; j < models.size(); ++j) EXPECT_NE(models[i].name, models[j].name);
  }
}

TEST(Models, PublishedValues) {
  const ModelConfig g = *resolve_model("gpt3-175b");
  EXPECT_EQ(g.hidden, 12288);
  EXPECT_EQ(g.ffn, 49152);
  EXPECT_EQ(g.heads, 96);
  EXPECT_EQ(g.kv_heads, 96);
  EXPECT_EQ(g.layers, 96);
  EXPECT_EQ(g.vocab, 50257);
  EXPECT_FALSE(g.swiglu);
  EXPECT_EQ(g.qkv_out(), 3 * 12288);
  EXPECT_EQ(g.fc1_out(), 49152);

  // Llama 3.1 405B's published config.json.
  const ModelConfig big = *resolve_model("llama3-405b");
  EXPECT_EQ(big.hidden, 16384);
  EXPECT_EQ(big.ffn, 53248);
  EXPECT_EQ(big.heads, 128);
  EXPECT_EQ(big.kv_heads, 8);
  EXPECT_EQ(big.layers, 126);
  EXPECT_EQ(big.vocab, 128256);
  EXPECT_TRUE(big.swiglu);

  const ModelConfig l = *resolve_model("llama2-70b");
  EXPECT_EQ(l.hidden, 8192);
  EXPECT_EQ(l.ffn, 28672);
  EXPECT_EQ(l.heads, 64);
  EXPECT_EQ(l.kv_heads, 8);
  EXPECT_EQ(l.layers, 80);
  EXPECT_EQ(l.vocab, 32000);
  EXPECT_TRUE(l.swiglu);
  EXPECT_EQ(l.head_dim(), 128);
  EXPECT_EQ(l.qkv_out(), 8192 + 2 * 8 * 128);
  EXPECT_EQ(l.fc1_out(), 2 * 28672);

  const ModelConfig l3 = *resolve_model("llama3-8b");
  EXPECT_EQ(l3.ffn, 14336);
  EXPECT_EQ(l3.kv_heads, 8);
  EXPECT_EQ(l3.vocab, 128256);
  EXPECT_EQ(l3.qkv_out(), 4096 + 2 * 8 * 128);

  const ModelConfig l2 = *resolve_model("llama2-7b");
  EXPECT_EQ(l2.ffn, 11008);
  EXPECT_EQ(l2.qkv_out(), 3 * 4096);
}

TEST(Models, UnknownNameListsKnownNames) {
  const auto r = resolve_model("gpt5");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("gpt5"), std::string::npos);
  EXPECT_NE(r.error().message.find("llama3-70b"), std::string::npos);
}

TEST(Models, JsonRoundTripForEveryBuiltin) {
  for (const auto& m : builtin_models()) {
    const auto back = model_from_json(model_to_json(m), "mem");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(*back, m);
  }
}

TEST(Models, KvHeadsDefaultsToHeadsAndSwigluToFalse) {
  const auto r = model_from_json(
      R"({"name":"tiny","hidden":256,"ffn":1024,"heads":4,"layers":2,"vocab":1000})", "t.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->kv_heads, 4);
  EXPECT_FALSE(r->swiglu);
}

struct BadCase {
  const char* json;
  const char* expect;  // substring of the error
};

TEST(Models, BadJsonNamesFileAndField) {
  const BadCase cases[] = {
      {R"({"name":"x","hidden":256,"ffn":1024,"heads":4,"layers":2,"vocab":1000)", "malformed"},
      {R"([1,2])", "object"},
      {R"({"hidden":256,"ffn":1024,"heads":4,"layers":2,"vocab":1000})", "'name'"},
      {R"({"name":"x","ffn":1024,"heads":4,"layers":2,"vocab":1000})", "'hidden'"},
      {R"({"name":"x","hidden":-256,"ffn":1024,"heads":4,"layers":2,"vocab":1000})", "'hidden'"},
      {R"({"name":"x","hidden":256,"ffn":0,"heads":4,"layers":2,"vocab":1000})", "'ffn'"},
      {R"({"name":"x","hidden":256,"ffn":1024,"heads":4.5,"layers":2,"vocab":1000})", "'heads'"},
      {R"({"name":"x","hidden":256,"ffn":1024,"heads":"4","layers":2,"vocab":1000})", "'heads'"},
      {R"({"name":"x","hidden":256,"ffn":1024,"heads":4,"vocab":1000})", "'layers'"},
      {R"({"name":"x","hidden":256,"ffn":1024,"heads":4,"layers":2})", "'vocab'"},
      {R"({"name":"x","hidden":256,"ffn":1024,"heads":4,"layers":2,"vocab":1,"swiglu":1})",
       "'swiglu'"},
      {R"({"name":"x","hidden":256,"ffn":1024,"heads":3,"layers":2,"vocab":1000})", "heads=3"},
      {R"({"name":"x","hidden":256,"ffn":1024,"heads":4,"kv_heads":3,"layers":2,"vocab":1})",
       "kv_heads=3"},
      {R"({"name":"x","hidden":256,"ffn":1024,"heads":4,"layers":2,"vocab":1,"extra":1})",
       "'extra'"},
      {R"({"name":"x","hidden":99999999999999999999,"ffn":1,"heads":1,"layers":1,"vocab":1})",
       "'hidden'"},
  };
  for (const auto& c : cases) {
    const auto r = model_from_json(c.json, "bad.json");
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_NE(r.error().message.find("bad.json"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(c.expect), std::string::npos)
        << c.json << " -> " << r.error().message;
  }
}

TEST(Models, ResolveFromFile) {
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("compass_models_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / "m.json").string();
  ModelConfig m = *resolve_model("llama3-8b");
  m.name = "my-llama";
  m.layers = 4;
  {
    std::ofstream out(path);
    out << model_to_json(m);
  }
  const auto r = resolve_model(path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, m);

  const auto missing = resolve_model((dir / "nope.json").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("nope.json"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace compass::workload
