// Byte-level acceptance: hand-written valid and invalid documents per schema.
#include "common/grammar/byte_matcher.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::grammar {
namespace {

std::shared_ptr<const Grammar> Compile(const std::string& schema) {
  const std::string spec =
      schema == "json_object" ? R"({"type":"json_object"})" : R"({"type":"json_schema","schema":)" + schema + "}";
  auto g = Grammar::Compile(spec);
  TANDEM_CHECK(g.ok()) << g.status().ToString();
  return *g;
}

// The whole document is accepted and complete.
bool Valid(const std::shared_ptr<const Grammar>& g, const std::string& doc) {
  ByteMatcher m(g);
  return m.Accept(doc) && m.IsComplete();
}

// Accepted as text fed in pieces (token boundaries anywhere), complete at the end.
bool ValidInPieces(const std::shared_ptr<const Grammar>& g, const std::string& doc, size_t piece) {
  ByteMatcher m(g);
  for (size_t i = 0; i < doc.size(); i += piece) {
    if (!m.Accept(doc.substr(i, piece))) return false;
  }
  return m.IsComplete();
}

void Check(const std::string& schema, const std::vector<std::string>& valid, const std::vector<std::string>& invalid) {
  auto g = Compile(schema);
  for (const auto& doc : valid) {
    EXPECT_TRUE(Valid(g, doc)) << schema << " should accept " << doc;
    for (size_t piece : {1, 2, 3}) EXPECT_TRUE(ValidInPieces(g, doc, piece)) << schema << " in pieces: " << doc;
  }
  for (const auto& doc : invalid) EXPECT_FALSE(Valid(g, doc)) << schema << " should reject " << doc;
}

TEST(ByteMatcherTest, JsonObject) {
  Check("json_object",
        {R"({})", R"({"a":1})", R"({ "a" : [1, 2.5e3, "x", true, null, {"b": {}}] })", "{\n  \"k\": -0.5\n}",
         R"({"":""})", R"({"\u00e9\n":"\"\\\/\b\f\r\t"})"},
        {R"([])", R"("a")", R"({"a":1,})", R"({"a" 1})", R"({a:1})", R"({"a":01})", R"({"a":1.})", R"({} )",
         R"( {})", R"({"a":tru})", R"({"a":"x)", "{\"a\":\"\x01\"}", R"({"a":"\x"})", R"({"a":"\ud800"})",
         R"({"a":1e})"});
}

TEST(ByteMatcherTest, WhitespaceIsBounded) {
  auto g = Compile("json_object");
  EXPECT_TRUE(Valid(g, "{" + std::string(kMaxWhitespace, ' ') + "}"));
  EXPECT_FALSE(Valid(g, "{" + std::string(kMaxWhitespace + 1, ' ') + "}"));
}

TEST(ByteMatcherTest, NumbersAreBounded) {
  auto g = Compile(R"({"type":"number"})");
  EXPECT_TRUE(Valid(g, std::string(kMaxIntegerDigits, '9')));
  EXPECT_FALSE(Valid(g, std::string(kMaxIntegerDigits + 1, '9')));
  EXPECT_TRUE(Valid(g, "-1." + std::string(kMaxFractionDigits, '5') + "E+12"));
  EXPECT_FALSE(Valid(g, "1." + std::string(kMaxFractionDigits + 1, '5')));
  EXPECT_FALSE(Valid(g, "1e123"));
  auto i = Compile(R"({"type":"integer"})");
  EXPECT_TRUE(Valid(i, "-12"));
  EXPECT_TRUE(Valid(i, "0"));
  EXPECT_FALSE(Valid(i, "1.5"));
  EXPECT_FALSE(Valid(i, "1e3"));
  EXPECT_FALSE(Valid(i, "-"));
}

TEST(ByteMatcherTest, Utf8IsValidatedAcrossPieces) {
  auto g = Compile(R"({"type":"string"})");
  EXPECT_TRUE(ValidInPieces(g, "\"h\xC3\xA9llo \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80\"", 1));
  EXPECT_FALSE(Valid(g, "\"\xC3\""));           // truncated character
  EXPECT_FALSE(Valid(g, "\"\xC0\xAF\""));       // overlong
  EXPECT_FALSE(Valid(g, "\"\xED\xA0\x80\""));   // surrogate
  EXPECT_FALSE(Valid(g, "\"\xF4\x90\x80\x80\""));  // past U+10FFFF
  EXPECT_FALSE(Valid(g, "\"\x80\""));           // stray continuation
}

TEST(ByteMatcherTest, StringLengthCountsCodePoints) {
  Check(R"({"type":"string","minLength":2,"maxLength":3})",
        {"\"ab\"", "\"\xC3\xA9\xC3\xA9\xC3\xA9\"", R"("\n\u0041b")", "\"a\xF0\x9F\x98\x80\""},
        {"\"a\"", "\"abcd\"", R"("\n\n\n\n")"});
}

TEST(ByteMatcherTest, PropertiesInOrderRequiredAndOptional) {
  Check(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},"required":["b"]})",
        {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({"a":1,"b":"x","c":true})", R"({"b":"x","c":false})"},
        {R"({})", R"({"a":1})", R"({"b":"x","a":1})", R"({"b":"x","b":"y"})", R"({"b":"x","d":1})",
         R"({"c":true,"b":"x"})"});
}

TEST(ByteMatcherTest, AdditionalProperties) {
  Check(R"({"type":"object","properties":{"ab":{"type":"integer"}},"additionalProperties":{"type":"null"}})",
        {R"({"ab":1})", R"({"a":null})", R"({"abc":null,"x":null})", R"({"ab":1,"z":null})", R"({})",
         R"({"z":null,"ab":1})"},
        {R"({"ab":null})", R"({"ab":1,"ab":2})", R"({"a\"":null})", R"({"q":1})"});
}

TEST(ByteMatcherTest, EnumsAndConst) {
  Check(R"({"enum":["red","re",1,12,null,{"k":[1]}]})", {R"("red")", R"("re")", "1", "12", "null", R"({"k":[1]})"},
        {R"("r")", "123", "2", R"({"k": [1]})", R"("red" )"});
  Check(R"({"const":"x"})", {R"("x")"}, {R"("y")", R"("xx")"});
}

TEST(ByteMatcherTest, AnyOfAndTypeLists) {
  Check(R"({"anyOf":[{"type":"string","maxLength":2},{"type":"integer"},{"type":"object","properties":{"a":{"type":"null"}},"required":["a"]}]})",
        {R"("ab")", "7", R"({"a":null})"}, {R"("abc")", "1.5", R"({})", "null"});
  Check(R"({"anyOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a","b"]}]})",
        {R"({"a":"x"})", R"({"a":"x","b":2})"}, {R"({"b":2})", R"({"a":"x","b":"y"})"});
  Check(R"({"type":["integer","null"]})", {"5", "null"}, {R"("5")", "true"});
}

TEST(ByteMatcherTest, ArraysWithBoundsAndTuples) {
  Check(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":2})", {"[1]", "[1, 2]", "[ 1 ]"},
        {"[]", "[1,2,3]", "[1,]", "[,1]"});
  Check(R"({"type":"array","prefixItems":[{"type":"string"},{"type":"boolean"}],"items":false})",
        {"[]", R"(["a"])", R"(["a",true])"}, {R"([true])", R"(["a",true,1])"});
}

TEST(ByteMatcherTest, RecursiveRefs) {
  Check(R"({"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/n"}}},"required":["v"]}},"$ref":"#/$defs/n"})",
        {R"({"v":1})", R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4,"kids":[]}]}]})"},
        {R"({"v":1,"kids":[{}]})", R"({"kids":[]})"});
}

TEST(ByteMatcherTest, NestingStopsAtTheLimit) {
  auto g = Compile("json_object");
  std::string ok = "{\"a\":" + std::string(kMaxNesting - 2, '[') + "{}" + std::string(kMaxNesting - 2, ']') + "}";
  EXPECT_TRUE(Valid(g, ok));
  std::string deep = "{\"a\":" + std::string(kMaxNesting - 1, '[') + "{}" + std::string(kMaxNesting - 1, ']') + "}";
  EXPECT_FALSE(Valid(g, deep));
}

TEST(ByteMatcherTest, RejectedBytesLeaveTheStateUnchanged) {
  auto g = Compile("json_object");
  ByteMatcher m(g);
  ASSERT_TRUE(m.Accept("{\"a\":"));
  const ParseState before = m.state();
  EXPECT_FALSE(m.Accept("1}x"));
  EXPECT_TRUE(m.state() == before);
  EXPECT_TRUE(m.Accept("1}"));
  EXPECT_TRUE(m.IsComplete());
}

}  // namespace
}  // namespace tandem::grammar
