// Grammar::Compile: accepted formats and the errors for bad ones (the message names place and keyword).
#include "common/grammar/grammar.h"

#include <string>

#include <gtest/gtest.h>

#include "tests/common/grammar/test_schemas.h"

namespace tandem::grammar {
namespace {

std::string Spec(const std::string& schema) { return R"({"type":"json_schema","schema":)" + schema + "}"; }

// Compile fails with InvalidArgument whose message contains `fragment`.
void ExpectError(const std::string& spec, const std::string& fragment) {
  auto g = Grammar::Compile(spec);
  ASSERT_FALSE(g.ok()) << spec;
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument) << g.status().ToString();
  EXPECT_NE(g.status().message().find(fragment), std::string::npos)
      << "message '" << g.status().message() << "' lacks '" << fragment << "'";
}

TEST(GrammarCompileTest, CompilesEveryTestFormat) {
  for (const auto& f : testing::TestFormats()) {
    auto g = Grammar::Compile(f.spec);
    EXPECT_TRUE(g.ok()) << f.name << ": " << g.status().ToString();
  }
}

TEST(GrammarCompileTest, RejectsMalformedSpecs) {
  ExpectError("", "malformed JSON");
  ExpectError("{\"type\":\"json_object\"", "malformed JSON");
  ExpectError("[1]", "must be a JSON object");
  ExpectError(R"({"type":"text"})", "response_format.type");
  ExpectError(R"({"type":"json_schema"})", "response_format.schema: missing");
  ExpectError(R"({"type":"json_object","extra":1})", "unknown field 'extra'");
  ExpectError(Spec("3"), "schema: a schema must be an object or a boolean");
  ExpectError(Spec("false"), "allows no value");
}

TEST(GrammarCompileTest, NamesUnsupportedKeywordsAndTheirPlace) {
  ExpectError(Spec(R"({"type":"object","properties":{"age":{"type":"string","pattern":"a+"}}})"),
              "schema.properties.age: unsupported keyword 'pattern'");
  ExpectError(Spec(R"({"type":"string","format":"date"})"), "schema: unsupported keyword 'format'");
  ExpectError(Spec(R"({"allOf":[{"type":"string"}]})"), "unsupported keyword 'allOf'");
  ExpectError(Spec(R"({"not":{"type":"string"}})"), "unsupported keyword 'not'");
  ExpectError(Spec(R"({"if":{},"then":{}})"), "unsupported keyword 'if'");
  ExpectError(Spec(R"({"type":"object","patternProperties":{}})"), "unsupported keyword 'patternProperties'");
  ExpectError(Spec(R"({"type":"integer","minimum":0})"), "unsupported keyword 'minimum'");
  ExpectError(Spec(R"({"type":"array","items":{"anyOf":[{"type":"string","uniqueItems":true}]}})"),
              "schema.items.anyOf[0]: unsupported keyword 'uniqueItems'");
}

TEST(GrammarCompileTest, RejectsBadValues) {
  ExpectError(Spec(R"({"type":"object","required":"a"})"), "schema.required: must be an array of strings");
  ExpectError(Spec(R"({"type":"object","properties":{"a":{}},"required":["b"]})"), "schema.required: 'b'");
  ExpectError(Spec(R"({"type":"strin"})"), "schema.type: unknown type 'strin'");
  ExpectError(Spec(R"({"type":[]})"), "schema.type: must be");
  ExpectError(Spec(R"({"type":"array","minItems":3,"maxItems":2})"), "schema.minItems");
  ExpectError(Spec(R"({"type":"array","minItems":-1})"), "schema.minItems: must be an integer");
  ExpectError(Spec(R"({"type":"string","minLength":5,"maxLength":2})"), "schema.minLength");
  ExpectError(Spec(R"({"enum":[]})"), "schema.enum: must be a non-empty array");
  ExpectError(Spec(R"({"type":"string","enum":[1,2]})"), "no value of 'enum'");
  ExpectError(Spec(R"({"anyOf":[]})"), "schema.anyOf: must be a non-empty array");
  ExpectError(Spec(R"({"type":"integer","minLength":1})"), "keyword 'minLength' does not apply");
  ExpectError(Spec(R"({"type":"array","items":[{"type":"string"}]})"), "use 'prefixItems'");
  ExpectError(Spec(R"({"type":"array","prefixItems":[{}],"items":false,"minItems":2})"), "schema.minItems");
  ExpectError(Spec(R"({"$ref":"#/$defs/a","type":"object"})"), "'$ref' cannot be combined with 'type'");
}

TEST(GrammarCompileTest, RejectsBadRefs) {
  ExpectError(Spec(R"({"$ref":"#/$defs/missing"})"), "schema.$ref: cannot resolve '#/$defs/missing'");
  ExpectError(Spec(R"({"$ref":"http://example.com/s.json"})"), "only local references");
  ExpectError(Spec(R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})"),
              "circular");
  ExpectError(Spec(R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"})"),
              "circular");
}

TEST(GrammarCompileTest, RejectsSchemasNoDocumentSatisfies) {
  // A required recursion never ends.
  ExpectError(Spec(R"({"type":"object","properties":{"self":{"$ref":"#"}},"required":["self"]})"),
              "no document satisfies");
  ExpectError(Spec(R"({"type":"array","items":{"$ref":"#"},"minItems":1})"), "no document satisfies");
}

TEST(GrammarCompileTest, BoundsSizeAndNesting) {
  std::string deep(100000, '[');
  ExpectError(deep, "nested deeper than");
  std::string schema;
  for (int i = 0; i < 40; ++i) schema += R"({"type":"array","items":)";
  schema += "{}";
  for (int i = 0; i < 40; ++i) schema += "}";
  // 40 levels compile (an empty array ends any level); generation stops nesting at 32.
  EXPECT_TRUE(Grammar::Compile(Spec(schema)).ok());
  std::string huge = R"({"type":"json_schema","schema":{"enum":[")" + std::string(2 << 20, 'a') + "\"]}}";
  ExpectError(huge, "larger than");
  std::string many = R"({"type":"object","properties":{)";
  for (int i = 0; i < 30000; ++i) many += (i ? "," : "") + ("\"p" + std::to_string(i) + "\":{\"type\":\"string\"}");
  many += "}}";
  ExpectError(Spec(many), "too large");
}

}  // namespace
}  // namespace tandem::grammar
