#include "engine/tokenizer/jinja/template.h"

#include <gtest/gtest.h>

namespace tandem::jinja {
namespace {

using Json = nlohmann::ordered_json;

TEST(JinjaTemplate, ParseOnceRenderMany) {
  auto t = Template::Parse("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}");
  ASSERT_TRUE(t.ok()) << t.status();
  const Json msgs = Json::array({{{"role", "user"}, {"content", "hi"}}});
  EXPECT_EQ(*t->Render(Json{{"messages", msgs}, {"add_generation_prompt", true}}), "<user>hi<assistant>");
  EXPECT_EQ(*t->Render(Json{{"messages", msgs}}), "<user>hi");
  // A copy shares the parsed program.
  const Template copy = *t;
  EXPECT_EQ(*copy.Render(Json{{"messages", Json::array()}}), "");
}

TEST(JinjaTemplate, ContextMustBeAnObject) {
  auto t = Template::Parse("x");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->Render(Json::array()).ok());
}

TEST(JinjaTemplate, OptionsTurnOffTrimming) {
  TemplateOptions raw;
  raw.trim_blocks = false;
  raw.lstrip_blocks = false;
  auto t = Template::Parse("  {% if true %}\nx{% endif %}", raw);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t->Render(Json::object()), "  \nx");
}

TEST(JinjaTemplate, ErrorsNameTheLine) {
  auto t = Template::Parse("{% if x %}\n{{ x.y( }}\n{% endif %}");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("line 2"), absl::string_view::npos) << t.status();
  auto r = Template::Parse("a\n\n{{ 'x' + none }}");
  ASSERT_TRUE(r.ok());
  auto out = r->Render(Json::object());
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("line 3"), absl::string_view::npos) << out.status();
}

}  // namespace
}  // namespace tandem::jinja
