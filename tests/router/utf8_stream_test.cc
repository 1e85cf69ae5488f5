#include "router/utf8_stream.h"

#include <gtest/gtest.h>

namespace tandem::router {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8Test, ValidityTable) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("\xC3\xA9"));           // é
  EXPECT_TRUE(IsValidUtf8("\xE2\x82\xAC"));       // €
  EXPECT_TRUE(IsValidUtf8("\xF0\x9F\x98\x80"));   // 😀
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));   // U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xC3"));              // truncated
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));      // overlong 3-byte
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate D800
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xFF"));
  EXPECT_FALSE(IsValidUtf8("\x80"));
}

TEST(Utf8Test, AssemblerHoldsPartialSequences) {
  Utf8Assembler a;
  EXPECT_EQ(a.Add("ab\xF0\x9F"), "ab");
  EXPECT_EQ(a.held_bytes(), 2u);
  EXPECT_EQ(a.Add("\x98"), "");
  EXPECT_EQ(a.Add("\x80z"), "\xF0\x9F\x98\x80z");
  EXPECT_EQ(a.Finish(), "");
}

TEST(Utf8Test, AssemblerReplacesInvalidAndTruncatedTail) {
  Utf8Assembler a;
  EXPECT_EQ(a.Add("a\xFF"
                  "b"),
            "a" + kFffd + "b");
  EXPECT_EQ(a.Add("\xE2\x82"), "");
  EXPECT_EQ(a.Add("x"), kFffd + "x");  // an interrupted sequence is one U+FFFD
  EXPECT_EQ(a.Add("\xC3"), "");
  EXPECT_EQ(a.Finish(), kFffd);
}

TEST(Utf8Test, SanitizeMakesEverythingValid) {
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  const std::string clean = SanitizeUtf8(all);
  EXPECT_TRUE(IsValidUtf8(clean));
  EXPECT_EQ(clean.substr(0, 128), all.substr(0, 128));
}

}  // namespace
}  // namespace tandem::router
