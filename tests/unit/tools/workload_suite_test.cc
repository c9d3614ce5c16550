#include "tools/workload_suite.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace splitspec::tools {
namespace {

std::string ErrorOf(const std::string& line) {
  absl::StatusOr<WorkloadRequest> request = ParseWorkloadLine(line, "w.jsonl", 7);
  EXPECT_FALSE(request.ok()) << line;
  EXPECT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument) << line;
  return std::string(request.status().message());
}

TEST(WorkloadParseTest, ReadsCategoryMessagesAndMaxTokens) {
  absl::StatusOr<WorkloadRequest> request = ParseWorkloadLine(
      R"({"category": "qa", "messages": [{"role": "system", "content": "Be brief."},)"
      R"( {"role": "user", "content": "Why?\nBecause."}], "max_tokens": 64, "note": "ignored"})",
      "w.jsonl", 3);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->category, "qa");
  ASSERT_EQ(request->messages.size(), 2u);
  EXPECT_EQ(request->messages[0].role, "system");
  EXPECT_EQ(request->messages[1].content, "Why?\nBecause.");
  EXPECT_EQ(request->max_tokens, 64);
  EXPECT_EQ(request->line, 3);
}

TEST(WorkloadParseTest, MalformedLinesNameFileLineAndField) {
  EXPECT_EQ(ErrorOf(R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 8})"),
            "w.jsonl:7: missing field 'category'");
  EXPECT_EQ(
      ErrorOf(
          R"({"category": 3, "messages": [{"role": "user", "content": "x"}], "max_tokens": 8})"),
      "w.jsonl:7: field 'category' must be a string");
  EXPECT_EQ(ErrorOf(R"({"category": "qa", "messages": [], "max_tokens": 8})"),
            "w.jsonl:7: field 'messages' must be a non-empty array");
  EXPECT_EQ(
      ErrorOf(
          R"({"category": "qa", "messages": [{"role": "bot", "content": "x"}], "max_tokens": 8})"),
      "w.jsonl:7: field 'messages[0].role' must be system, user or assistant, got 'bot'");
  EXPECT_EQ(ErrorOf(R"({"category": "qa", "messages": [{"role": "user"}], "max_tokens": 8})"),
            "w.jsonl:7: missing field 'messages[0].content'");
  EXPECT_EQ(ErrorOf(R"({"category": "qa", "messages": [{"role": "user", "content": "x"}], )"
                    R"("max_tokens": 2.5})"),
            "w.jsonl:7: field 'max_tokens' must be an integer in [1, 4096]");
  EXPECT_EQ(ErrorOf(R"({"category": "qa", "messages": [{"role": "user", "content": "x"}]})"),
            "w.jsonl:7: missing field 'max_tokens'");
  EXPECT_EQ(
      ErrorOf(
          R"({"category": "qa", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0})"),
      "w.jsonl:7: field 'max_tokens' must be an integer in [1, 4096]");
  EXPECT_EQ(ErrorOf("not json").rfind("w.jsonl:7: not a JSON object", 0), 0u);
}

TEST(WorkloadParseTest, ResponseFormatIsKeptAsWrittenAndReadAsOverHttp) {
  const std::string format =
      R"({"type": "json_schema", "json_schema": {"name": "p", "strict": true, "schema": )"
      R"({"type": "object", "properties": {"z": {"type": "integer"}, "a": {"type": "string"}}}}})";
  absl::StatusOr<WorkloadRequest> request = ParseWorkloadLine(
      R"({"category": "x", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, )"
      R"("response_format": )" +
          format + "}",
      "w.jsonl", 2);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->response_format, format);  // "z" before "a", as written
  absl::StatusOr<std::optional<grammar::GrammarSpec>> grammar =
      ResponseFormatGrammar(*request, "w.jsonl");
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  ASSERT_TRUE(grammar->has_value());
  EXPECT_EQ((*grammar)->kind, grammar::GrammarKind::kJsonSchema);
  EXPECT_TRUE((*grammar)->strict);
  EXPECT_EQ(
      (*grammar)->text,
      R"({"type": "object", "properties": {"z": {"type": "integer"}, "a": {"type": "string"}}})");

  EXPECT_EQ(ErrorOf(R"({"category": "x", "prompt": "p", "max_tokens": 8, )"
                    R"("response_format": {"type": "json_object"}})"),
            "w.jsonl:7: field 'response_format' must be an object, on a chat request");
  request->response_format = R"({"type": "yaml"})";
  EXPECT_EQ(ResponseFormatGrammar(*request, "w.jsonl").status().message(),
            "w.jsonl:2: 'response_format.type' must be one of \"text\", \"json_object\", "
            "\"json_schema\", got \"yaml\"");
  request->response_format.clear();
  EXPECT_FALSE(ResponseFormatGrammar(*request, "w.jsonl")->has_value());
}

TEST(WorkloadParseTest, FileSkipsBlankLinesAndReportsTheBadLine) {
  const std::string good =
      R"({"category": "a", "messages": [{"role": "user", "content": "x"}], "max_tokens": 8})";
  absl::StatusOr<std::vector<WorkloadRequest>> requests =
      ParseWorkload(good + "\n\n" + good + "\n", "f.jsonl");
  ASSERT_TRUE(requests.ok()) << requests.status();
  ASSERT_EQ(requests->size(), 2u);
  EXPECT_EQ((*requests)[1].line, 3);
  absl::StatusOr<std::vector<WorkloadRequest>> bad =
      ParseWorkload(good + "\n{\"category\": \"b\"}\n", "f.jsonl");
  EXPECT_EQ(bad.status().message(),
            "f.jsonl:2: missing field 'messages' (a chat request) or 'prompt' (a completion)");
  EXPECT_EQ(LoadWorkload("/nonexistent/w.jsonl").status().code(), absl::StatusCode::kNotFound);
}

TEST(WorkloadParseTest, ReadsACompletionPrompt) {
  absl::StatusOr<WorkloadRequest> request =
      ParseWorkloadLine(R"({"category": "code", "prompt": "def f():", "max_tokens": 16})", "w", 2);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->prompt, "def f():");
  EXPECT_TRUE(request->messages.empty());
  EXPECT_EQ(ErrorOf(R"({"category": "c", "prompt": "", "max_tokens": 4})"),
            "w.jsonl:7: field 'prompt' is empty");
  EXPECT_EQ(ErrorOf(R"({"category": "c", "prompt": 3, "max_tokens": 4})"),
            "w.jsonl:7: field 'prompt' must be a string");
  EXPECT_EQ(ErrorOf(R"({"category": "c", "prompt": "x", "max_tokens": 4, "messages": []})"),
            "w.jsonl:7: give one of 'messages' (chat) and 'prompt' (completion), not both");
}

TEST(WorkloadParseTest, FirstPerCategoryKeepsFileOrder) {
  std::vector<WorkloadRequest> requests;
  for (const char* category : {"a", "b", "a", "a", "b", "c"}) {
    WorkloadRequest request;
    request.category = category;
    requests.push_back(request);
  }
  const std::vector<WorkloadRequest> kept = FirstPerCategory(requests, 2);
  std::string order;
  for (const WorkloadRequest& r : kept) order += r.category;
  EXPECT_EQ(order, "ababc");
  EXPECT_EQ(FirstPerCategory(requests, 0).size(), requests.size());
}

TEST(WorkloadTotalsTest, AggregatesPerCategoryOverSums) {
  WorkloadTotals totals;
  // qa: target-only 100 tokens in 4 s (25 tok/s); ngram 100 tokens in 2 s.
  totals.Add("qa", kTargetOnly, {.tokens = 60, .wall_seconds = 3.0, .steps = 60});
  totals.Add("qa", "ngram k=4",
             {.tokens = 60,
              .wall_seconds = 1.0,
              .verified = 40,
              .accepted = 30,
              .steps = 20,
              .cpu_seconds = 1.5});
  totals.Add("chat", kTargetOnly, {.tokens = 10, .wall_seconds = 1.0, .steps = 10});
  totals.Add("qa", kTargetOnly, {.tokens = 40, .wall_seconds = 1.0, .steps = 40});
  totals.Add("qa", "ngram k=4",
             {.tokens = 40,
              .wall_seconds = 1.0,
              .verified = 10,
              .accepted = 0,
              .steps = 30,
              .tree_steps = 10});
  const std::vector<WorkloadRow> rows = totals.Rows();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].category, "qa");
  EXPECT_EQ(rows[0].configuration, "target-only");
  EXPECT_EQ(rows[0].requests, 2);
  EXPECT_DOUBLE_EQ(rows[0].tok_s, 25.0);
  EXPECT_DOUBLE_EQ(rows[0].ratio_to_target_only, 1.0);
  EXPECT_EQ(rows[1].configuration, "ngram k=4");
  EXPECT_DOUBLE_EQ(rows[1].tok_s, 50.0);
  EXPECT_DOUBLE_EQ(rows[1].ratio_to_target_only, 2.0);
  EXPECT_DOUBLE_EQ(rows[1].acceptance, 0.6);
  EXPECT_DOUBLE_EQ(rows[1].tokens_per_step, 2.0);
  EXPECT_DOUBLE_EQ(rows[1].cpu_ms_per_token, 15.0);  // 1.5 s / 100 tokens
  EXPECT_DOUBLE_EQ(rows[1].tree_share, 0.2);         // 10 tree steps of 50
  EXPECT_EQ(rows[2].category, "chat");               // no ngram row: chat never ran it
  EXPECT_DOUBLE_EQ(rows[2].tok_s, 10.0);
  EXPECT_EQ(WorkloadRowJson(rows[1]),
            "{\"category\":\"qa\",\"configuration\":\"ngram k=4\",\"tok_s\":50.000,"
            "\"ratio_to_target_only\":2.0000,\"ratio_low\":2.0000,\"ratio_high\":2.0000,"
            "\"acceptance\":0.6000,\"tokens_per_step\":2.0000,\"tree_share\":0.2000}");
}

TEST(WorkloadTotalsTest, RatioRangesSpanThePassesAndSkipRowsAPassLacks) {
  auto pass = [](double ngram_tok_s, bool with_chat) {
    WorkloadTotals totals;
    totals.Add("qa", kTargetOnly, {.tokens = 100, .wall_seconds = 1.0, .steps = 100});
    totals.Add("qa", "ngram auto",
               {.tokens = 100, .wall_seconds = 100.0 / ngram_tok_s, .steps = 50});
    if (with_chat) {
      totals.Add("chat", kTargetOnly, {.tokens = 10, .wall_seconds = 1.0, .steps = 10});
      totals.Add("chat", "ngram auto", {.tokens = 10, .wall_seconds = 2.0, .steps = 10});
    }
    return totals.Rows();
  };
  const std::vector<std::vector<WorkloadRow>> passes = {pass(90.0, true), pass(120.0, false),
                                                        pass(105.0, false)};
  std::vector<WorkloadRow> rows = pass(105.0, true);  // stands in for the totals' rows
  SetRatioRanges(passes, rows);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[1].configuration, "ngram auto");
  EXPECT_NEAR(rows[1].ratio_low, 0.9, 1e-12);
  EXPECT_NEAR(rows[1].ratio_high, 1.2, 1e-12);
  EXPECT_DOUBLE_EQ(rows[0].ratio_low, 1.0);  // target-only is 1 in every pass
  EXPECT_DOUBLE_EQ(rows[0].ratio_high, 1.0);
  EXPECT_EQ(rows[3].category, "chat");  // only the first pass ran chat
  EXPECT_DOUBLE_EQ(rows[3].ratio_low, 0.5);
  EXPECT_DOUBLE_EQ(rows[3].ratio_high, 0.5);
}

TEST(GuidanceSummaryTest, CostAndGainPerCategoryFromTheRows) {
  auto row = [](const std::string& category, const std::string& configuration, double tok_s,
                double cpu_ms) {
    WorkloadRow r;
    r.category = category;
    r.configuration = configuration;
    r.tok_s = tok_s;
    r.cpu_ms_per_token = cpu_ms;
    return r;
  };
  const std::vector<WorkloadRow> rows = {
      row("qa", "target-only", 40, 25), row("qa", "ngram k=4", 60, 20),
      row("qa", "target-only cfg", 20, 50), row("qa", "ngram k=4 cfg", 30, 40),
      row("qa", "ngram auto cfg", 25, 45),
      // chat has no guided target-only row: no summary.
      row("chat", "target-only", 10, 100), row("chat", "ngram k=4 cfg", 12, 90)};
  const std::vector<GuidanceSummary> summaries = GuidanceSummaries(rows);
  ASSERT_EQ(summaries.size(), 1u);
  EXPECT_EQ(summaries[0].category, "qa");
  EXPECT_DOUBLE_EQ(summaries[0].cost_tok_s_ratio, 0.5);
  EXPECT_DOUBLE_EQ(summaries[0].cost_cpu_ms_per_token_ratio, 2.0);
  ASSERT_EQ(summaries[0].speculation_gain.size(), 2u);
  EXPECT_EQ(summaries[0].speculation_gain[0].first, "ngram k=4 cfg");
  EXPECT_DOUBLE_EQ(summaries[0].speculation_gain[0].second, 1.5);
  EXPECT_EQ(summaries[0].speculation_gain[1].first, "ngram auto cfg");
  EXPECT_DOUBLE_EQ(summaries[0].speculation_gain[1].second, 1.25);
  EXPECT_EQ(GuidanceSummaryJson(summaries[0], 1.5),
            "{\"category\":\"qa\",\"guidance_scale\":1.5,\"cost\":{\"tok_s_ratio\":0.5000,"
            "\"cpu_ms_per_token_ratio\":2.0000},\"speculation_gain\":{\"ngram k=4 cfg\":1.5000,"
            "\"ngram auto cfg\":1.2500}}");
}

}  // namespace
}  // namespace splitspec::tools
