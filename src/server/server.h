// The OpenAI-compatible HTTP front end over an Engine (cpp-httplib).
//   POST /v1/completions, /v1/chat/completions (SSE when stream: true)
//   GET  /v1/models, /health, /metrics (Prometheus text)
//   POST /tokenize, /detokenize
// With API keys, every /v1 and tokenizer route needs "Authorization: Bearer
// KEY"; the key's tenant is folded into the cache salt on the server side, so
// tenants never share cached blocks (and cannot probe each other's prompts by
// timing). A client that disconnects from a stream cancels its request.
// Thread-safety: handlers run on the HTTP thread pool; Stop may be called
// from any thread (a signal handler thread, say).
#pragma once
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "server/chat_template.h"
#include "server/tool_syntax.h"
#include "server/openai_api.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace pc {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (Bind returns it)
  std::string model_name = "promptcache";
  std::shared_ptr<const ChatTemplate> chat_template;  // null: built-in chatml
  std::map<std::string, std::string> api_keys;  // key -> tenant; empty: no auth
  size_t num_http_threads = 0;                  // 0: enough for every running and waiting request
  int keepalive_ms = 500;  // SSE comment interval while a stream waits (detects gone clients)
  size_t max_body_bytes = size_t{16} << 20;
  double retry_after_s = 1;  // Retry-After on 429
};

// "KEY TENANT" per line ('#' comments, blank lines ignored).
Result<std::map<std::string, std::string>> LoadApiKeyFile(const std::string& path);

class Server {
 public:
  Server(Engine& engine, const Tokenizer& tok, ServerOptions opt);
  ~Server();
  // Binds the listening socket; returns the port.
  Result<int> Bind();
  // Serves until Stop; returns once every handler has finished.
  void Run();
  // Closes the listener and ends the handlers (cutting streams short: drain
  // first, see num_inflight).
  void Stop();
  bool draining() const { return draining_; }
  // Generation requests whose response has not been fully sent.
  int num_inflight() const { return num_inflight_; }
  void set_draining() { draining_ = true; }

 private:
  void Routes();
  // The caller's tenant ("" without API keys), or nullopt after a 401.
  std::optional<std::string> Authenticate(const httplib::Request& req, httplib::Response& res);
  void HandleGenerate(int kind, const httplib::Request& req, httplib::Response& res);
  // The request's n choices submitted; empty after sending the error.
  std::vector<std::shared_ptr<RequestStream>> SubmitChoices(const ApiRequest& parsed, httplib::Response& res);
  // A non-streamed answer: every choice to its end (the client's socket
  // polled meanwhile); false with *err when one failed or was cancelled.
  bool CollectChoices(const ApiRequest& parsed, const std::string& id, int64_t created,
                      const std::vector<std::shared_ptr<RequestStream>>& streams, const httplib::Request& req,
                      nlohmann::json* combined, ApiError* err);
  void HandleTokenize(const httplib::Request& req, httplib::Response& res);
  void HandleApplyTemplate(const httplib::Request& req, httplib::Response& res);
  // A chat body rendered and tokenized as a chat request would be, or an error sent.
  std::optional<ChatPromptTokens> RenderChat(const nlohmann::json& body, const std::string& text, httplib::Response& res);
  void HandleDetokenize(const httplib::Request& req, httplib::Response& res);

  Engine& engine_;
  const Tokenizer& tok_;
  ServerOptions opt_;
  ToolSyntax tool_syntax_;  // read off the chat template once
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> request_counter_{0};
  std::atomic<int> num_inflight_{0};
  // Run and Stop meet here: httplib's stop() does nothing before listen has
  // begun, so a Stop that comes first must make Run return at once, and one
  // that comes while Run is starting must wait for the listener.
  std::mutex run_mu_;
  bool stop_requested_ = false;  // guarded by run_mu_
  bool run_entered_ = false;     // guarded by run_mu_
  std::atomic<bool> run_done_{false};
};

}  // namespace pc
