#include "bench/prompt_set.h"

#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/file_text.h"
#include "nlohmann/json.hpp"

namespace tandem::bench {

const PromptSet& DefaultPromptSet() {
  // Written for this benchmark. Lengths grow within each category so the set covers both a
  // short prefill and one of several hundred tokens; the answers they invite are long enough
  // to decode the full --max-tokens.
  static const PromptSet kSet = {
      {"code", "Write a Python function that reverses a linked list."},
      {"code", "Explain what this C expression computes and when it overflows: (a + b) / 2"},
      {"code",
       "Write a Go HTTP handler that accepts a JSON body {\"name\": string, \"age\": int}, validates that the "
       "name is not empty and the age is between 0 and 150, and answers 400 with a message naming the bad field."},
      {"code",
       "Review this C++ code and list every bug you find, with a fix for each:\n\n"
       "std::vector<int> Evens(const std::vector<int>& v) {\n"
       "  std::vector<int> out;\n"
       "  for (size_t i = 0; i <= v.size(); i++)\n"
       "    if (v[i] % 2 == 0) out.push_back(v[i]);\n"
       "  return out;\n"
       "}\n"
       "int* Make() { int x = 5; return &x; }\n"},
      {"code",
       "Write a SQL schema for a library: books (title, authors, ISBN, year), members, and loans with due "
       "dates. Then write queries for: the members who have an overdue book today, the ten most borrowed books "
       "of the last year, and the authors whose every book is on loan right now. Explain the indexes you add."},
      {"code",
       "Here is a Rust function that parses key=value lines. Rewrite it so that it returns an error naming the "
       "line number of the first malformed line instead of panicking, add tests, and explain the changes.\n\n"
       "use std::collections::HashMap;\n\n"
       "pub fn parse(text: &str) -> HashMap<String, String> {\n"
       "    let mut map = HashMap::new();\n"
       "    for line in text.lines() {\n"
       "        let line = line.trim();\n"
       "        if line.is_empty() || line.starts_with('#') {\n"
       "            continue;\n"
       "        }\n"
       "        let mut parts = line.splitn(2, '=');\n"
       "        let key = parts.next().unwrap().trim().to_string();\n"
       "        let value = parts.next().unwrap().trim().to_string();\n"
       "        map.insert(key, value);\n"
       "    }\n"
       "    map\n"
       "}\n\n"
       "The callers today do this:\n\n"
       "let config = parse(&std::fs::read_to_string(path).unwrap());\n"
       "let port: u16 = config[\"port\"].parse().unwrap();\n"},
      {"english", "Why is the sky blue?"},
      {"english", "Describe a walk along a beach in winter, in about two hundred words."},
      {"english",
       "A friend is moving to a city where they know nobody. Write them a letter with practical advice for the "
       "first month: finding their way around, meeting people, and not feeling lonely in the evenings."},
      {"english",
       "Summarize the arguments for and against a four-day working week, for employees, for employers and for "
       "the wider economy, then say which evidence would settle the question and how one would collect it."},
      {"english",
       "Read this passage and answer the questions after it.\n\n"
       "The lighthouse keeper had kept the same routine for thirty-one years. At dusk he climbed the hundred "
       "and twelve steps, trimmed the wick, polished the lens and wrote the weather in the log. When the "
       "lamp was replaced by an electric one that switched itself on, the company wrote to thank him and "
       "offered him a cottage in the town. He accepted, and for a month he walked to the harbour every "
       "evening at dusk to watch the light come on without him. Then one evening he did not go, and the "
       "next morning he began to repair the boats drawn up on the shingle, which nobody had asked him to do.\n\n"
       "1. What changed in the keeper's life, and what stayed the same?\n"
       "2. Why do you think he stopped walking to the harbour?\n"
       "3. Continue the story for three more paragraphs in the same style."},
      {"english",
       "You are writing the user guide of a home weather station. It has an outdoor sensor (temperature, "
       "humidity, wind speed and direction, rain), an indoor display with a touch screen, and a phone app. "
       "The sensor runs on two AA batteries and a small solar panel and talks to the display over 868 MHz "
       "radio up to 100 metres in the open. The display keeps 30 days of history and uploads it over Wi-Fi "
       "to the app. Write the chapters: unpacking and what is in the box; choosing where to mount the "
       "sensor (height, shade, distance from walls and trees); pairing the sensor with the display; "
       "connecting the display to Wi-Fi; reading the screens; alarms for frost and strong wind; replacing "
       "the batteries; troubleshooting when readings stop or look wrong. Use short sentences and numbered "
       "steps."},
      {"chinese", "为什么秋天树叶会变黄？"},
      {"chinese", "请用三百字左右描写一个下雨的早晨，城市里的人们在做什么。"},
      {"chinese", "给一位刚开始学习编程的高中生写一封信，告诉他如何安排学习时间、怎样面对挫折，以及哪些习惯值得从一开始就养成。"},
      {"chinese",
       "比较城市生活和乡村生活的优缺点，从住房、交通、教育、医疗、工作机会和人际关系六个方面分别论述，"
       "最后谈谈你认为年轻人应该如何选择。"},
      {"chinese",
       "阅读下面的短文，然后回答问题。\n\n"
       "老街的尽头有一家修表铺，店主姓陈，已经在这里坐了四十年。街坊们的手表、闹钟、挂钟坏了，都拿来找他。"
       "后来人人都用手机看时间，来修表的人越来越少，陈师傅却每天照常七点开门，把工具一件件摆好。"
       "有一天，一个小女孩拿来一只旧怀表，说是爷爷留下的，已经不走了。陈师傅修了整整一个星期，"
       "怀表重新走起来的那天，小女孩在店门口站了很久。\n\n"
       "1. 陈师傅为什么每天照常开门？\n"
       "2. 小女孩为什么在店门口站了很久？\n"
       "3. 用同样的风格把这个故事续写三段。"},
      {"chinese",
       "你正在为一家社区图书馆编写新馆员培训手册。图书馆有儿童阅览区、成人借阅区、自习室和一个小型报告厅，"
       "每周举办两次儿童故事会和一次读书分享会。借阅规则是：每位读者最多借十本书，借期三十天，可续借一次；"
       "逾期每本每天罚款一角。请写出以下章节：开馆和闭馆的流程；办理借书证；借书、还书和续借；"
       "处理逾期和图书损坏；组织故事会和读书分享会；自习室的座位管理；遇到读者投诉时怎么办；"
       "火灾和突发疾病等紧急情况的处理。每一章用简短的句子和编号的步骤来写，语气亲切。"},
  };
  return kSet;
}

absl::StatusOr<PromptSet> ParsePromptSetJsonl(const std::string& text, const std::string& file) {
  PromptSet out;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = absl::StrCat(file, ":", number, ": ");
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return absl::InvalidArgumentError(where + "not a JSON object (one {\"category\", \"prompt\"} per line)");
    }
    BenchPrompt p;
    for (const auto& [key, value] : j.items()) {
      std::string* field = key == "category" ? &p.category : key == "prompt" ? &p.prompt : nullptr;
      if (field == nullptr) return absl::InvalidArgumentError(where + "unknown key \"" + key + "\"");
      if (!value.is_string() || value.get<std::string>().empty()) {
        return absl::InvalidArgumentError(where + key + ": expected a non-empty string");
      }
      *field = value.get<std::string>();
    }
    if (p.category.empty()) return absl::InvalidArgumentError(where + "category: missing");
    if (p.prompt.empty()) return absl::InvalidArgumentError(where + "prompt: missing");
    out.push_back(std::move(p));
  }
  if (out.empty()) return absl::InvalidArgumentError(file + ": no prompts");
  return out;
}

absl::StatusOr<PromptSet> LoadPromptSetJsonl(const std::string& path) {
  std::optional<std::string> text = ReadFileText(path);
  if (!text) return absl::NotFoundError("cannot read prompt file " + path);
  return ParsePromptSetJsonl(*text, path);
}

std::vector<std::string> PromptCategories(const PromptSet& prompts) {
  std::vector<std::string> out;
  for (const BenchPrompt& p : prompts) {
    bool seen = false;
    for (const std::string& c : out) seen = seen || c == p.category;
    if (!seen) out.push_back(p.category);
  }
  return out;
}

}  // namespace tandem::bench
