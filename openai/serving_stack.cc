#include "openai/serving_stack.h"

#include <algorithm>

#include "common/status.h"

namespace tandem::openai {

absl::StatusOr<std::unique_ptr<ServingStack>> ServingStack::Start(engine::StepDriver* driver,
                                                                  const tokenizer::Tokenizer* tokenizer,
                                                                  ServeMetrics* metrics, ServingStackOptions o) {
  std::unique_ptr<ServingStack> s(new ServingStack());
  // Before anything starts: a template we cannot interpret is a configuration error.
  if (tokenizer != nullptr && !o.chat_template_dir.empty()) {
    ASSIGN_OR_RETURN(s->chat_prompt_, tokenizer::ChatPrompt::Load(o.chat_template_dir));
  } else {
    s->chat_prompt_ = tokenizer::ChatPrompt::ChatML();
  }
  o.server.chat_prompt = s->chat_prompt_;
  const engine::ModelConfig& cfg = driver->model().config();
  if (o.engine.max_model_len <= 0) {
    o.engine.max_model_len = static_cast<int32_t>(
        cfg.max_position_embeddings > 0 ? std::min<int64_t>(4096, cfg.max_position_embeddings) : 4096);
  }
  o.engine.on_step = [metrics](const engine::StepMetrics& m) { metrics->ObserveStep(m); };
  o.engine.on_finish = [metrics](const engine::RequestMetrics& m) { metrics->ObserveFinishedRequest(m); };
  ASSIGN_OR_RETURN(s->engine_, engine::LLMEngine::Create(driver, tokenizer, o.engine));
  s->max_model_len_ = o.engine.max_model_len;

  o.server.max_in_flight = o.max_in_flight > 0 ? o.max_in_flight : o.engine.max_num_seqs + o.engine.max_waiting + 8;
  o.server.max_model_len = o.engine.max_model_len;
  o.server.vocab_size = cfg.vocab_size;
  s->server_ = std::make_unique<OpenAIServer>(s->engine_.get(), tokenizer, metrics, o.server);
  RETURN_IF_ERROR(s->server_->Start());  // the destructor shuts the engine down
  return s;
}

ServingStack::~ServingStack() {
  Stop();
  server_.reset();
  if (handlers_left_) (void)engine_.release();  // a handler left running may still call it
  engine_.reset();
}

void ServingStack::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (engine_) engine_->Shutdown();  // aborts what is left, so the streaming handlers end
  if (server_ && !server_->Stop()) handlers_left_ = true;
}

}  // namespace tandem::openai
