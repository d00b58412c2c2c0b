// Log-probabilities of tokens under one row of logits, as OpenAI's `logprobs` / `top_logprobs`
// report them: log_softmax of the row at a token, and the most likely tokens of the row. Pure
// functions of the row, tested against a log-softmax computed by hand.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace tandem::engine {

// One token's log-probability and the most likely alternatives at its position.
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  // (token id, logprob), most likely first, ties by lower id; as many as were asked for. The
  // token itself is listed here too when it is among them.
  std::vector<std::pair<int32_t, float>> top;
};

// log(sum(exp(logits))) of a row, in double with the maximum taken out (no overflow for any
// finite row). -infinity entries contribute nothing.
double LogSumExp(const float* logits, int64_t vocab);

// log_softmax(logits)[token] with the `num_top` most likely tokens (fewer when the vocabulary is
// smaller), given the row's LogSumExp (computed once when several tokens share a row).
TokenLogprob TokenLogprobOf(const float* logits, int64_t vocab, double log_sum_exp, int32_t token, int32_t num_top);

}  // namespace tandem::engine
