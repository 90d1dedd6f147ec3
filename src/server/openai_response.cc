// ResponseBuilder: engine events into OpenAI response bodies and stream
// chunks (content, reasoning apart, tool calls, logprobs, usage, timings).
#include <fmt/format.h>

#include "server/openai_api.h"

namespace pc {

using nlohmann::json;

ResponseBuilder::ResponseBuilder(const ApiRequest& req, const Tokenizer& tok, std::string id, int64_t created_s, int index)
    : req_(req), tok_(tok), id_(std::move(id)), created_s_(created_s), index_(index) {
  if (req_.kind == ApiKind::kCompletion) {
    logprobs_ = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
                 {"text_offset", json::array()}};
  } else {
    logprobs_ = {{"content", json::array()}};
    if (!req_.reasoning_open.empty() || !req_.reasoning_direct.empty())
      split_.emplace(req_.reasoning_open, req_.reasoning_close, req_.reasoning_starts_inside, req_.reasoning_trail,
                      req_.reasoning_direct);
    if (req_.tool_syntax) tool_stream_.emplace(req_.tool_syntax, req_.tool_call_ids, &req_.tools);
  }
  if (req_.echo) text_ = req_.echo_text;
  text_offset_ = text_.size();
}

json ResponseBuilder::Envelope() const {
  const bool chat = req_.kind == ApiKind::kChat;
  const char* object = chat ? (req_.stream ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return {{"id", id_}, {"object", object}, {"created", created_s_}, {"model", req_.model}};
}

json ResponseBuilder::Choice(const std::string& text, const json& logprobs, const json& finish,
                             const std::string& reasoning, const json& tool_calls) const {
  json c = {{"index", index_}, {"logprobs", logprobs}, {"finish_reason", finish}};
  const bool calls = tool_calls.is_array() && !tool_calls.empty();
  if (req_.kind == ApiKind::kCompletion) {
    c["text"] = text;
  } else if (req_.stream) {
    c["delta"] = json::object();
    if (!reasoning.empty()) c["delta"]["reasoning_content"] = reasoning;
    if (!text.empty()) c["delta"]["content"] = text;
    if (calls) c["delta"]["tool_calls"] = tool_calls;
  } else {
    c["message"] = {{"role", "assistant"}, {"content", text.empty() && calls ? json(nullptr) : json(text)}};
    if (!reasoning.empty()) c["message"]["reasoning_content"] = reasoning;
    if (calls) c["message"]["tool_calls"] = tool_calls;
  }
  return c;
}

// Content past the reasoning split, through the tool-call parse (last: the
// reply ended; the calls are then in calls_).
ToolCallStream::Delta ResponseBuilder::ContentDelta(const std::string& content, bool last) {
  if (!tool_stream_) return {content, json::array()};
  ToolCallStream::Delta d = tool_stream_->Push(content);
  if (last) {
    ToolCallStream::Delta rest = tool_stream_->Finish(&calls_);
    d.content += rest.content;
    for (json& e : rest.tool_calls) d.tool_calls.push_back(std::move(e));
  }
  return d;
}

namespace {
json ToolCallsJson(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (const ToolCall& c : calls)
    out.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return out;
}
}  // namespace

namespace {
json Bytes(const std::string& s) {
  json b = json::array();
  for (unsigned char ch : s) b.push_back(static_cast<int>(ch));
  return b;
}
}  // namespace

std::string ResponseBuilder::TokenName(int32_t id) const {
  return req_.tokens_as_ids ? "token_id:" + std::to_string(id) : tok_.Piece(id);
}

// One token's logprobs in the shape of the request kind.
json ResponseBuilder::LogprobEntry(const StreamEvent& ev) const {
  const std::string piece = TokenName(ev.token);
  if (req_.kind == ApiKind::kCompletion) {
    json top = json::object();
    for (const auto& [id, lp] : ev.top) top[TokenName(id)] = lp;
    return {{"tokens", {piece}}, {"token_logprobs", {ev.logprob}}, {"top_logprobs", {top}}, {"text_offset", {text_offset_}}};
  }
  json top = json::array();
  for (const auto& [id, lp] : ev.top) {
    const std::string p = TokenName(id);
    top.push_back({{"token", p}, {"logprob", lp}, {"bytes", Bytes(p)}});
  }
  return {{"token", piece}, {"logprob", ev.logprob}, {"bytes", Bytes(piece)}, {"top_logprobs", top}};
}

std::string ResponseBuilder::first_chunk() {
  json j = Envelope();
  json c = {{"index", index_}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  j["choices"] = json::array({c});
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string ResponseBuilder::OnToken(const StreamEvent& ev) {
  json lp = nullptr;
  if (req_.engine.want_logprobs) {
    json entry = LogprobEntry(ev);
    if (req_.kind == ApiKind::kCompletion) {
      for (const char* k : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) logprobs_[k].push_back(entry[k][0]);
      lp = entry;
    } else {
      logprobs_["content"].push_back(entry);
      lp = {{"content", json::array({entry})}};
    }
  }
  text_ += ev.text;
  text_offset_ += ev.text.size();
  tokens_.push_back(ev.token);
  std::string reasoning, content = ev.text;
  if (split_) std::tie(reasoning, content) = split_->Push(ev.text);
  reasoning_ += reasoning;
  ToolCallStream::Delta d = ContentDelta(content, false);
  content_ += d.content;
  if (!req_.stream) return {};
  json j = Envelope();
  j["choices"] = json::array({Choice(d.content, lp, nullptr, reasoning, d.tool_calls)});
  if (req_.return_tokens) j["choices"][0]["tokens"] = {ev.token};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// "tool_calls" when the reply ended by itself with calls in it.
std::string ResponseBuilder::FinishReason(const StreamEvent& done) const {
  if (!calls_.empty() && done.finish == pc::FinishReason::kStop) return "tool_calls";
  return ApiFinishReason(done.finish);
}

json ResponseBuilder::Usage(const StreamEvent& d) const {
  return {{"prompt_tokens", d.num_prompt_tokens},
          {"completion_tokens", d.num_generated_tokens},
          {"total_tokens", d.num_prompt_tokens + d.num_generated_tokens},
          {"prompt_tokens_details", {{"cached_tokens", d.num_cached_tokens}}}};
}

json ResponseBuilder::Timings(const StreamEvent& d) const {
  const RequestTimings& t = d.timings;
  return {{"queue_ms", t.queue_ms},
          {"prefill_ms", t.prefill_ms},
          {"ttft_ms", t.ttft_ms},
          {"e2e_ms", t.e2e_ms},
          {"decode_ms_per_token", t.mean_itl_ms()},
          {"prompt_tokens", d.num_prompt_tokens},
          {"prefilled_tokens", d.num_prompt_tokens - d.num_cached_tokens},
          {"cached_tokens", d.num_cached_tokens},
          {"cached_tokens_by_tier", d.cached_by_tier.empty() ? json{{"pool", d.num_cached_tokens}} : json(d.cached_by_tier)},
          {"tier_load_ms", d.tier_load_ms},
          {"generated_tokens", d.num_generated_tokens},
          // llama.cpp's names for the drafted and accepted tokens
          {"draft_n", d.num_draft_tokens},
          {"draft_n_accepted", d.num_accepted_draft_tokens}};
}

std::vector<std::string> ResponseBuilder::OnDoneChunks(const StreamEvent& done) {
  std::vector<std::string> out;
  if (req_.kind == ApiKind::kChat) {  // what the splitter and the call parse held back
    std::string reasoning, content;
    if (split_) std::tie(reasoning, content) = split_->Flush();
    ToolCallStream::Delta d = ContentDelta(content, true);
    if (!reasoning.empty() || !d.content.empty() || !d.tool_calls.empty()) {
      json k = Envelope();
      k["choices"] = json::array({Choice(d.content, nullptr, nullptr, reasoning, d.tool_calls)});
      out.push_back(k.dump(-1, ' ', false, json::error_handler_t::replace));
    }
  }
  json j = Envelope();
  j["choices"] = json::array({Choice("", nullptr, FinishReason(done))});
  j["timings"] = Timings(done);
  out.push_back(j.dump(-1, ' ', false, json::error_handler_t::replace));
  if (req_.include_usage) {
    json u = Envelope();
    u["choices"] = json::array();
    u["usage"] = Usage(done);
    u["timings"] = Timings(done);
    out.push_back(u.dump(-1, ' ', false, json::error_handler_t::replace));
  }
  return out;
}

json ResponseBuilder::OnDoneResponse(const StreamEvent& done) {
  json j = Envelope();
  const bool lp = req_.engine.want_logprobs;
  if (req_.kind == ApiKind::kChat) {
    std::string reasoning, content;
    if (split_) std::tie(reasoning, content) = split_->Flush();
    reasoning_ += reasoning;
    content_ += ContentDelta(content, true).content;
    j["choices"] = json::array({Choice(content_, lp ? logprobs_ : json(nullptr), FinishReason(done), reasoning_, ToolCallsJson(calls_))});
  } else {
    j["choices"] = json::array({Choice(text_, lp ? logprobs_ : json(nullptr), ApiFinishReason(done.finish))});
  }
  if (req_.return_tokens) j["choices"][0]["tokens"] = tokens_;
  j["usage"] = Usage(done);
  j["timings"] = Timings(done);
  return j;
}

}  // namespace pc
