// OpenAI request parsing and response shaping, separate from HTTP so it can
// be tested directly. Parsing validates every field it uses (type and range)
// and answers an ApiError naming the field; fields it does not know are
// ignored, as OpenAI clients send extras.
// Thread-safety: pure functions over their arguments.
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "engine/engine.h"
#include "server/chat_template.h"
#include "server/reasoning_split.h"
#include "server/tool_calls.h"
#include "tokenizer/tokenizer.h"

namespace pc {

struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;  // the offending field, if any
  nlohmann::json ToJson() const;
};

enum class ApiKind { kCompletion, kChat };

struct ApiRequest {
  ApiKind kind = ApiKind::kCompletion;
  EngineRequest engine;
  std::string model;
  bool stream = false;
  bool include_usage = false;
  bool echo = false;
  bool return_tokens = false;  // llama.cpp's field: add the generated token ids
  bool tokens_as_ids = false;  // vLLM's return_tokens_as_token_ids: logprob tokens as "token_id:N"
  int n = 1;  // choices: n engine requests, seeds seed, seed + 1, ... (the prompt is computed once: the prefix cache)
  std::string echo_text;  // completions with echo: the prompt, prepended to the text
  // Chat: the reasoning block's markers when the reply's reasoning goes to
  // reasoning_content (open empty: kept in content), and whether the prompt
  // left the block open for the model.
  std::string reasoning_open, reasoning_close;
  std::string reasoning_trail, reasoning_direct;  // ReasoningStyle's trail and direct
  bool reasoning_starts_inside = false;
  // Chat with tools (tool_choice not "none", a syntax read off the template):
  // the reply's calls are parsed into tool_calls; ids for them.
  const ToolSyntax* tool_syntax = nullptr;
  std::vector<std::string> tool_call_ids;
  nlohmann::json tools;  // the request's tools (their parameters type arguments written one element each)
};

struct ParseContext {
  const Tokenizer* tok = nullptr;
  const ChatTemplate* chat_template = nullptr;  // required for chat requests
  size_t n_ctx = 0;
  uint64_t default_seed = 0;  // used when the request has none
  const ToolSyntax* tool_syntax = nullptr;  // read off chat_template (tool calls)
};

// A chat body's prompt: the rendered text and its tokens.
struct ChatPromptTokens {
  std::string text;
  std::vector<int32_t> ids;
  std::optional<ToolRequest> tools;  // the body's tools (rendered by the template)
};
// The prompt a chat request with this body would run (messages,
// add_generation_prompt, continue_final_message, chat_template_kwargs), for
// /tokenize and /apply-template; or the error to send.
// text: the body as sent, for the key order of its objects (else sorted).
std::optional<ChatPromptTokens> RenderChatRequest(const nlohmann::json& body, const ParseContext& ctx, ApiError* err,
                                                  std::string_view text = {});

// Parses a raw body; returns the request or the error to send.
std::optional<ApiRequest> ParseApiRequest(ApiKind kind, const std::string& body, const ParseContext& ctx,
                                          ApiError* err);

// Builds responses and SSE chunks for one request as its events arrive.
class ResponseBuilder {
 public:
  // index: the choice this builder writes (n > 1 has one builder each).
  ResponseBuilder(const ApiRequest& req, const Tokenizer& tok, std::string id, int64_t created_s, int index = 0);
  // One token event: its SSE chunk payload (JSON text) for streaming, or
  // accumulated for the final response.
  std::string OnToken(const StreamEvent& ev);
  // The done event: the final chunk(s) for streaming (JSON payloads, without
  // "data: "), or the whole response object.
  std::vector<std::string> OnDoneChunks(const StreamEvent& done);
  nlohmann::json OnDoneResponse(const StreamEvent& done);
  std::string first_chunk();  // chat streams announce the role first
  const std::string& text() const { return text_; }

 private:
  nlohmann::json Usage(const StreamEvent& done) const;
  std::string FinishReason(const StreamEvent& done) const;
  nlohmann::json Timings(const StreamEvent& done) const;
  nlohmann::json LogprobEntry(const StreamEvent& ev) const;
  std::string TokenName(int32_t id) const;  // the piece, or "token_id:N"
  nlohmann::json Envelope() const;
  nlohmann::json Choice(const std::string& text, const nlohmann::json& logprobs, const nlohmann::json& finish,
                        const std::string& reasoning = "", const nlohmann::json& tool_calls = nullptr) const;

  const ApiRequest& req_;
  const Tokenizer& tok_;
  std::string id_;
  int64_t created_s_;
  std::string text_;
  nlohmann::json logprobs_;  // accumulated for non-streaming
  std::vector<int32_t> tokens_;
  size_t text_offset_ = 0;
  int index_ = 0;
  std::optional<ReasoningSplitter> split_;  // chat replies with reasoning apart
  std::optional<ToolCallStream> tool_stream_;  // chat replies with tools
  std::vector<ToolCall> calls_;
  // Content after the reasoning split and the tool-call parse.
  ToolCallStream::Delta ContentDelta(const std::string& content, bool last);
  std::string reasoning_, content_;         // their parts so far
};

// The text of a finish reason as OpenAI spells it.
std::string ApiFinishReason(FinishReason r);

}  // namespace pc
