// Renders every model's chat template (and the templates under
// tests/data/tokenizer/templates) over the conversations in
// make_template_refs.py and compares with python3-jinja2's output: identical
// text, or the same raise_exception message.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/tokenizer/chat_template.h"
#include "tests/common/tokenizer/test_data.h"

namespace tandem::tokenizer {
namespace {

TEST(ChatTemplateReferenceTest, MatchesPythonJinja2) {
  const std::string path = test_data::RefsDir() + "/chat_templates.json";
  if (!test_data::RequireFile(path)) return;
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json ref = nlohmann::json::parse(ss.str());
  const auto& cases = ref["cases"];
  ASSERT_GE(cases.size(), 100u);
  int failures = 0, rendered = 0, raised = 0;
  for (const auto& c : cases) {
    const std::string label = c["template"].get<std::string>() + "/" + c["conversation"].get<std::string>() +
                              " agp=" + (c["add_generation_prompt"].get<bool>() ? "1" : "0") +
                              " extra=" + c["extra"].dump();
    auto tmpl = ChatTemplate::FromSource(c["source"].get<std::string>());
    ASSERT_TRUE(tmpl.ok()) << label << ": " << tmpl.status().ToString();
    ChatRenderOptions options;
    options.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    if (c["bos_token"].is_string()) options.bos_token = c["bos_token"].get<std::string>();
    if (c["eos_token"].is_string()) options.eos_token = c["eos_token"].get<std::string>();
    options.tools = c["tools"];
    options.extra_context = c["extra"];
    const auto out = tmpl->Render(c["messages"], options);
    if (c.contains("output")) {
      ++rendered;
      if (!out.ok()) {
        ++failures;
        ADD_FAILURE() << label << ": render failed: " << out.status().ToString();
      } else if (*out != c["output"].get<std::string>()) {
        ++failures;
        ADD_FAILURE() << label << ":\n--- got ---\n" << *out << "\n--- want ---\n" << c["output"].get<std::string>();
      }
    } else {
      ++raised;
      if (out.ok()) {
        ++failures;
        ADD_FAILURE() << label << ": expected error '" << c["error"].get<std::string>() << "', got output";
      } else if (!c.contains("jinja_error")) {
        EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << label;
        EXPECT_EQ(out.status().message(), c["error"].get<std::string>()) << label;
      }
    }
    if (failures > 10) break;
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(rendered, 100);
  EXPECT_GT(raised, 3);
}

}  // namespace
}  // namespace tandem::tokenizer
