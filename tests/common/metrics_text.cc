#include "tests/common/metrics_text.h"

#include <cstdlib>
#include <map>
#include <sstream>

namespace tandem::testing {
namespace {

struct Family {
  bool help = false;
  std::string type;
};

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The series part of a sample line (name and labels) and the text after it. Label values may
// hold spaces and escaped quotes, so the labels end at the first '}' outside quotes.
bool SplitSample(const std::string& line, std::string* series, std::string* rest) {
  size_t i = 0;
  while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
  if (i < line.size() && line[i] == '{') {
    bool quoted = false;
    for (++i; i < line.size(); ++i) {
      if (quoted && line[i] == '\\') {
        ++i;
      } else if (line[i] == '"') {
        quoted = !quoted;
      } else if (!quoted && line[i] == '}') {
        break;
      }
    }
    if (i == line.size()) return false;
    ++i;
  }
  if (i >= line.size() || line[i] != ' ') return false;
  *series = line.substr(0, i);
  *rest = line.substr(i + 1);
  return true;
}

std::optional<double> ParseValue(const std::string& text) {
  const std::string v = text.substr(0, text.find(' '));  // a timestamp may follow
  // strtod reads "+Inf", "-Inf" and "NaN" as the format writes them.
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') return std::nullopt;
  return d;
}

// The family a sample belongs to: histogram and summary samples carry a suffix.
std::string FamilyOf(const std::string& name, const std::map<std::string, Family>& families) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    if (!EndsWith(name, suffix)) continue;
    const std::string base = name.substr(0, name.size() - std::string(suffix).size());
    auto it = families.find(base);
    if (it != families.end() && (it->second.type == "histogram" || it->second.type == "summary")) return base;
  }
  return name;
}

}  // namespace

Problems ExpositionProblems(const std::string& text) {
  Problems problems;
  std::map<std::string, Family> families;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      const bool help = line[2] == 'H';
      const std::string rest = line.substr(7);
      const size_t sp = rest.find(' ');
      const std::string name = rest.substr(0, sp);
      const std::string value = sp == std::string::npos ? "" : rest.substr(sp + 1);
      Family& f = families[name];
      if (help) {
        if (f.help) problems.push_back(name + ": HELP given twice");
        if (value.empty()) problems.push_back(name + ": empty HELP");
        f.help = true;
      } else {
        if (!f.type.empty()) problems.push_back(name + ": TYPE given twice");
        f.type = value;
        if (value == "counter" && !EndsWith(name, "_total")) problems.push_back(name + ": a counter not ending in _total");
        // promtool's rule the other way round: a scrape's rate() over a "_total" gauge is nonsense.
        if (value != "counter" && EndsWith(name, "_total")) problems.push_back(name + ": a " + value + " ending in _total");
      }
      continue;
    }
    if (line[0] == '#') continue;
    std::string series, rest;
    if (!SplitSample(line, &series, &rest)) {
      problems.push_back("not a sample: " + line);
      continue;
    }
    const std::string name = series.substr(0, series.find('{'));
    const std::string family = FamilyOf(name, families);
    auto it = families.find(family);
    if (it == families.end() || !it->second.help) problems.push_back(series + ": no HELP before it");
    if (it == families.end() || it->second.type.empty()) problems.push_back(series + ": no TYPE before it");
    if (!ParseValue(rest)) problems.push_back(series + ": value '" + rest + "' is not a number");
  }
  for (const auto& [name, f] : families) {
    if (!f.help || f.type.empty()) problems.push_back(name + ": HELP or TYPE missing");
  }
  return problems;
}

std::optional<double> SeriesValue(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::string s, rest;
    if (line.empty() || line[0] == '#' || !SplitSample(line, &s, &rest)) continue;
    if (s == series) return ParseValue(rest);
  }
  return std::nullopt;
}

Problems SeriesMismatches(const std::string& text, const Series& want) {
  Problems out;
  for (const auto& [series, value] : want) {
    const std::optional<double> got = SeriesValue(text, series);
    if (got == value) continue;
    std::ostringstream line;
    line << series << ": want " << value << ", ";
    if (got) {
      line << "got " << *got;
    } else {
      line << "absent";
    }
    out.push_back(line.str());
  }
  return out;
}

}  // namespace tandem::testing
