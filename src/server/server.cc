#include "server/server.h"

#include "base/log.h"

#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/check.h"
#include "server/json_body.h"
#include "server/openai_api.h"
#include "server/peer_socket.h"

namespace pc {

using nlohmann::json;

namespace {

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void SendJson(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(Dump(j), "application/json");
}

void SendError(httplib::Response& res, const ApiError& e) { SendJson(res, e.status, e.ToJson()); }

ApiError MakeError(int status, std::string type, std::string message) {
  ApiError e;
  e.status = status;
  e.type = std::move(type);
  e.message = std::move(message);
  return e;
}

// The JSON object body of a tokenizer route, or an error sent.
std::optional<json> ObjectBody(const httplib::Request& req, httplib::Response& res) {
  std::string err;
  std::optional<json> j = ParseJsonBounded(req.body, &err);
  if (j && !j->is_object()) err = "the request body must be a JSON object";
  if (!j || !j->is_object()) {
    SendError(res, MakeError(400, "invalid_request_error", err));
    return std::nullopt;
  }
  return j;
}

std::string SaltFor(const std::string& tenant, const std::string& user_salt) {
  if (tenant.empty()) return user_salt;
  // The unit separator cannot be confused with tenant text chosen by a user.
  return "tenant\x1f" + tenant + "\x1f" + user_salt;
}

// What a streaming response needs between provider calls: one builder and
// stream per choice (n). With n > 1 the builders leave usage out and one
// usage chunk sums them at the end.
struct StreamState {
  StreamState(ApiRequest r, const Tokenizer& tok, const std::string& id, int64_t created)
      : req(std::move(r)), choice_req(req) {
    if (req.n > 1) choice_req.include_usage = false;
    for (int i = 0; i < req.n; ++i) builders.push_back(std::make_unique<ResponseBuilder>(choice_req, tok, id, created, i));
  }
  ApiRequest req, choice_req;
  std::vector<std::unique_ptr<ResponseBuilder>> builders;
  std::vector<std::shared_ptr<RequestStream>> streams;
  std::vector<bool> finished;
  json usage;  // summed over choices (n > 1)
  bool started = false;
  void CancelAll() {
    for (auto& s : streams) s->Cancel();
  }
  // The chunked provider's step: writes the next event (or a keep-alive
  // comment); false when the client is gone.
  bool Pump(httplib::DataSink& sink, int keepalive_ms);
  // Choice `at` ended with ev: its last chunks, then (all ended) the usage
  // of n > 1 choices and [DONE].
  bool FinishChoice(httplib::DataSink& sink, size_t at, const StreamEvent& ev);
};

bool WriteEvent(httplib::DataSink& sink, const std::string& payload) {
  const std::string s = "data: " + payload + "\n\n";
  return sink.write(s.data(), s.size());
}

bool StreamState::Pump(httplib::DataSink& sink, int keepalive_ms) {
  if (!started && req.kind == ApiKind::kChat) {
    for (auto& b : builders)
      if (!WriteEvent(sink, b->first_chunk())) return CancelAll(), false;
  }
  started = true;
  // One event from the first choice that has one (n = 1: waits the
  // keep-alive on its stream; n > 1: short waits in turn).
  const size_t n = streams.size();
  std::optional<StreamEvent> ev;
  size_t at = 0;
  for (int waited = 0; !ev && waited < keepalive_ms;) {
    for (size_t i = 0; i < n && !ev; ++i) {
      if (finished[i]) continue;
      const int wait = n == 1 ? keepalive_ms : 2;
      ev = streams[i]->Next(wait);
      waited += wait;
      at = i;
    }
  }
  if (!ev) {  // nothing yet: a comment line finds out whether the client is still there
    static const char kPing[] = ": keep-alive\n\n";
    if (!sink.write(kPing, sizeof(kPing) - 1)) return CancelAll(), false;
    return true;
  }
  if (!ev->done) {
    if (ev->text.empty() && !req.engine.want_logprobs && !req.return_tokens) return true;
    if (!WriteEvent(sink, builders[at]->OnToken(*ev))) return CancelAll(), false;
    return true;
  }
  if (ev->finish == FinishReason::kError || ev->finish == FinishReason::kCancelled) {
    const std::string msg = ev->finish == FinishReason::kError ? ev->error : "the request was cancelled";
    CancelAll();
    WriteEvent(sink, Dump(MakeError(500, "server_error", msg).ToJson()));
    WriteEvent(sink, "[DONE]");
    sink.done();
    return true;
  }
  return FinishChoice(sink, at, *ev);
}

bool StreamState::FinishChoice(httplib::DataSink& sink, size_t at, const StreamEvent& ev) {
  ResponseBuilder& b = *builders[at];
  for (const std::string& c : b.OnDoneChunks(ev)) WriteEvent(sink, c);
  finished[at] = true;
  const size_t n = streams.size();
  if (n > 1) {
    if (usage.is_null())
      usage = {{"prompt_tokens", ev.num_prompt_tokens}, {"completion_tokens", 0},
               {"prompt_tokens_details", {{"cached_tokens", ev.num_cached_tokens}}}};
    usage["completion_tokens"] = usage["completion_tokens"].get<size_t>() + ev.num_generated_tokens;
  }
  if (std::find(finished.begin(), finished.end(), false) != finished.end()) return true;
  if (n > 1 && req.include_usage) {
    usage["total_tokens"] = usage["prompt_tokens"].get<size_t>() + usage["completion_tokens"].get<size_t>();
    json u = json::parse(b.first_chunk());
    u["choices"] = json::array();
    u["object"] = req.kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion";
    u["usage"] = usage;
    WriteEvent(sink, Dump(u));
  }
  WriteEvent(sink, "[DONE]");
  sink.done();
  return true;
}

}  // namespace

Result<std::map<std::string, std::string>> LoadApiKeyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Errorf("cannot read the API key file '{}'", path);
  std::map<std::string, std::string> keys;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    std::istringstream ss(line);
    std::string key, tenant, extra;
    if (!(ss >> key) || key[0] == '#') continue;
    if (!(ss >> tenant) || (ss >> extra)) return Errorf("{}:{}: expected 'KEY TENANT'", path, lineno);
    keys[key] = tenant;
  }
  if (keys.empty()) return Errorf("the API key file '{}' has no keys", path);
  return keys;
}

Server::Server(Engine& engine, const Tokenizer& tok, ServerOptions opt)
    : engine_(engine), tok_(tok), opt_(std::move(opt)), http_(std::make_unique<httplib::Server>()) {
  // A peer that closes mid-write must not kill the process.
  signal(SIGPIPE, SIG_IGN);
  const size_t threads = opt_.num_http_threads ? opt_.num_http_threads : 300;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(opt_.max_body_bytes);
  // Clients that keep a connection open (the OpenAI SDKs, bench) keep it for
  // up to 100 requests (cpp-httplib's own default of 5 makes every fifth
  // request reconnect); idle ones still close after 5 s.
  http_->set_keep_alive_max_count(100);
  if (!opt_.chat_template) {
    Result<ChatTemplate> chatml = ChatTemplate::Builtin("chatml");
    PC_CHECK(chatml.ok());
    chatml->set_tokenizer(&tok_);
    opt_.chat_template = std::make_shared<const ChatTemplate>(std::move(*chatml));
  }
  tool_syntax_ = ToolSyntax::Derive(*opt_.chat_template);
  if (tool_syntax_.supported()) LogInfo("tool calls: the template's syntax starts with {}", nlohmann::json(tool_syntax_.trigger()).dump());
  else LogInfo("tool calls: replies stay content ({})", tool_syntax_.reason());
  Routes();
}

Server::~Server() = default;

Result<int> Server::Bind() {
  const int port = opt_.port == 0 ? http_->bind_to_any_port(opt_.host) : (http_->bind_to_port(opt_.host, opt_.port) ? opt_.port : -1);
  if (port < 0) return Errorf("cannot listen on {}:{}", opt_.host, opt_.port);
  return port;
}

void Server::Run() {
  {
    std::lock_guard<std::mutex> lock(run_mu_);
    if (stop_requested_) return;
    run_entered_ = true;
  }
  http_->listen_after_bind();
  run_done_ = true;
}

void Server::Stop() {
  {
    std::lock_guard<std::mutex> lock(run_mu_);
    stop_requested_ = true;
    if (!run_entered_) return;  // Run, when it comes, returns at once
  }
  // Run is between its check and the listener's start: wait for either.
  while (!http_->is_running() && !run_done_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  http_->stop();
}

std::optional<std::string> Server::Authenticate(const httplib::Request& req, httplib::Response& res) {
  if (opt_.api_keys.empty()) return std::string();
  const std::string auth = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (auth.rfind(prefix, 0) == 0) {
    auto it = opt_.api_keys.find(auth.substr(prefix.size()));
    if (it != opt_.api_keys.end()) return it->second;
  }
  SendError(res, MakeError(401, "authentication_error", "a valid API key is required (Authorization: Bearer KEY)"));
  return std::nullopt;
}

void Server::Routes() {
  httplib::Server& s = *http_;
  // Tokens are small writes: with Nagle's algorithm the kernel holds each
  // one until the previous is acknowledged, and a client that delays its
  // ACKs (40-200 ms) then receives tokens in bursts.
  s.set_tcp_nodelay(true);
  s.Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& r) {
    HandleGenerate(static_cast<int>(ApiKind::kCompletion), q, r);
  });
  s.Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& r) {
    HandleGenerate(static_cast<int>(ApiKind::kChat), q, r);
  });
  s.Post("/tokenize", [this](const httplib::Request& q, httplib::Response& r) { HandleTokenize(q, r); });
  s.Post("/detokenize", [this](const httplib::Request& q, httplib::Response& r) { HandleDetokenize(q, r); });
  s.Post("/apply-template", [this](const httplib::Request& q, httplib::Response& r) { HandleApplyTemplate(q, r); });
  s.Get("/v1/models", [this](const httplib::Request& q, httplib::Response& r) {
    if (!Authenticate(q, r)) return;
    json m = {{"id", opt_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "promptcache"},
              {"max_model_len", engine_.context_length()}};
    SendJson(r, 200, {{"object", "list"}, {"data", json::array({m})}});
  });
  s.Get("/health", [this](const httplib::Request&, httplib::Response& r) {
    if (draining_) SendJson(r, 503, {{"status", "draining"}});
    else SendJson(r, 200, {{"status", "ok"}});
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& r) {
    r.set_content(engine_.RenderMetrics(), "text/plain; version=0.0.4");
  });
  s.set_error_handler([](const httplib::Request&, httplib::Response& r) {
    if (!r.body.empty()) return;
    const std::string msg = r.status == 404 ? "no such route" : r.status == 413 ? "the request body is too large"
                                                                                : "the request could not be served";
    SendError(r, MakeError(r.status, r.status == 404 ? "not_found_error" : "invalid_request_error", msg));
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& r, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    SendError(r, MakeError(500, "server_error", what));
  });
}

void Server::HandleTokenize(const httplib::Request& req, httplib::Response& res) {
  if (!Authenticate(req, res)) return;
  std::optional<json> j = ObjectBody(req, res);
  if (!j) return;
  if (j->contains("messages")) {
    // vLLM's form: the tokens a chat request with these fields would run.
    std::optional<ChatPromptTokens> p = RenderChat(*j, req.body, res);
    if (!p) return;
    const size_t n = p->ids.size();
    return SendJson(res, 200, {{"tokens", std::move(p->ids)}, {"count", n}, {"max_model_len", engine_.context_length()}});
  }
  if (!j->contains("content") || !(*j)["content"].is_string()) {
    return SendError(res, MakeError(400, "invalid_request_error", "'content' must be a string (or 'messages' an array)"));
  }
  // As for prompts: no more text than the context could hold as tokens.
  const size_t limit = engine_.context_length() * tok_.max_token_bytes();
  if ((*j)["content"].get_ref<const std::string&>().size() > limit) {
    return SendError(res, MakeError(400, "invalid_request_error",
                                    fmt::format("'content' is longer than this model's context of {} tokens can hold",
                                                engine_.context_length())));
  }
  EncodeOptions eo;
  eo.add_special = false;
  if (j->contains("add_special")) {
    if (!(*j)["add_special"].is_boolean()) return SendError(res, MakeError(400, "invalid_request_error", "'add_special' must be a boolean"));
    eo.add_special = (*j)["add_special"].get<bool>();
  }
  if (j->contains("parse_special")) {
    if (!(*j)["parse_special"].is_boolean()) return SendError(res, MakeError(400, "invalid_request_error", "'parse_special' must be a boolean"));
    eo.parse_special = (*j)["parse_special"].get<bool>();
  }
  SendJson(res, 200, {{"tokens", tok_.Encode((*j)["content"].get<std::string>(), eo)}});
}

std::optional<ChatPromptTokens> Server::RenderChat(const json& body, const std::string& text, httplib::Response& res) {
  ParseContext ctx{&tok_, opt_.chat_template.get(), engine_.context_length(), 0, &tool_syntax_};
  ApiError err;
  std::optional<ChatPromptTokens> p = RenderChatRequest(body, ctx, &err, text);
  if (!p) SendError(res, err);
  return p;
}

void Server::HandleApplyTemplate(const httplib::Request& req, httplib::Response& res) {
  if (!Authenticate(req, res)) return;
  std::optional<json> j = ObjectBody(req, res);
  if (!j) return;
  std::optional<ChatPromptTokens> p = RenderChat(*j, req.body, res);
  if (p) SendJson(res, 200, {{"prompt", std::move(p->text)}});
}

void Server::HandleDetokenize(const httplib::Request& req, httplib::Response& res) {
  if (!Authenticate(req, res)) return;
  std::optional<json> j = ObjectBody(req, res);
  if (!j) return;
  if (!j->contains("tokens") || !(*j)["tokens"].is_array()) {
    return SendError(res, MakeError(400, "invalid_request_error", "'tokens' must be an array of token ids"));
  }
  std::vector<int32_t> ids;
  for (const json& e : (*j)["tokens"]) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= tok_.n_vocab()) {
      return SendError(res, MakeError(400, "invalid_request_error",
                                      fmt::format("'tokens' must hold ids between 0 and {}", tok_.n_vocab() - 1)));
    }
    ids.push_back(static_cast<int32_t>(e.get<int64_t>()));
  }
  SendJson(res, 200, {{"content", tok_.Decode(ids)}});
}

void Server::HandleGenerate(int kind_int, const httplib::Request& req, httplib::Response& res) {
  const ApiKind kind = static_cast<ApiKind>(kind_int);
  std::optional<std::string> tenant = Authenticate(req, res);
  if (!tenant) return;
  if (draining_) return SendError(res, MakeError(503, "server_error", "the server is shutting down"));
  const uint64_t n = ++request_counter_;
  ParseContext ctx{&tok_, opt_.chat_template.get(), engine_.context_length(),
                   n * 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()),
                   &tool_syntax_};
  ApiError err;
  std::optional<ApiRequest> parsed = ParseApiRequest(kind, req.body, ctx, &err);
  if (!parsed) return SendError(res, err);
  if (parsed->model.empty()) parsed->model = opt_.model_name;
  parsed->engine.salt = SaltFor(*tenant, parsed->engine.salt);
  parsed->engine.tenant = *tenant;
  std::vector<std::shared_ptr<RequestStream>> streams = SubmitChoices(*parsed, res);
  if (streams.empty()) return;
  ++num_inflight_;
  const std::string id = fmt::format("{}-{:016x}", kind == ApiKind::kChat ? "chatcmpl" : "cmpl", n);
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  if (!parsed->stream) {
    struct Done {
      std::atomic<int>& n;
      ~Done() { --n; }
    } done{num_inflight_};
    json combined;
    if (!CollectChoices(*parsed, id, created, streams, req, &combined, &err)) return SendError(res, err);
    return SendJson(res, 200, combined);
  }
  auto st = std::make_shared<StreamState>(std::move(*parsed), tok_, id, created);
  st->streams = std::move(streams);
  st->finished.assign(st->streams.size(), false);
  res.set_header("Cache-Control", "no-cache");
  const int keepalive_ms = opt_.keepalive_ms;
  res.set_chunked_content_provider(
      "text/event-stream", [st, keepalive_ms](size_t, httplib::DataSink& sink) { return st->Pump(sink, keepalive_ms); },
      [st, this](bool success) {
        if (!success) st->CancelAll();
        --num_inflight_;
      });
}

// n choices: n engine requests with consecutive seeds. The first computes
// the prompt; the others wait for its blocks (the scheduler's shared-prefix
// wait) and take its last logits from the logits memo.
std::vector<std::shared_ptr<RequestStream>> Server::SubmitChoices(const ApiRequest& parsed, httplib::Response& res) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < parsed.n; ++i) {
    EngineRequest er = parsed.engine;
    er.sampling.seed += static_cast<uint64_t>(i);
    SubmitOutcome sub = engine_.Submit(std::move(er));
    if (sub.error == SubmitError::kNone) {
      streams.push_back(sub.stream);
      continue;
    }
    for (auto& st : streams) st->Cancel();
    if (sub.error == SubmitError::kInvalid) SendError(res, MakeError(400, "invalid_request_error", sub.message));
    else if (sub.error == SubmitError::kDraining) SendError(res, MakeError(503, "server_error", sub.message));
    else {
      res.set_header("Retry-After", fmt::format("{}", static_cast<int>(std::max(1.0, opt_.retry_after_s))));
      SendError(res, MakeError(429, "rate_limit_error", sub.message));
    }
    return {};
  }
  return streams;
}

bool Server::CollectChoices(const ApiRequest& parsed, const std::string& id, int64_t created,
                            const std::vector<std::shared_ptr<RequestStream>>& streams, const httplib::Request& req,
                            json* combined, ApiError* err) {
  size_t completion_tokens = 0;
  int peer = -2;
  auto last_check = std::chrono::steady_clock::now();
  for (int i = 0; i < parsed.n; ++i) {
    ResponseBuilder b(parsed, tok_, id, created, i);
    // Nothing is written until the end, so a client that leaves is seen by
    // polling its socket between tokens (found once the wait gets long).
    for (;;) {
      std::optional<StreamEvent> ev = streams[size_t(i)]->Next(200);
      if (const auto now = std::chrono::steady_clock::now(); now - last_check >= std::chrono::milliseconds(200)) {
        last_check = now;
        if (peer == -2) peer = FindPeerSocket(req.remote_addr, req.remote_port, req.local_port);
        if (PeerClosed(peer))
          for (auto& st : streams) st->Cancel();
      }
      if (!ev) continue;
      if (!ev->done) {
        b.OnToken(*ev);
        continue;
      }
      if (ev->finish == FinishReason::kError || ev->finish == FinishReason::kCancelled) {
        for (auto& st : streams) st->Cancel();
        *err = ev->finish == FinishReason::kError ? MakeError(500, "server_error", ev->error)
                                                   : MakeError(503, "server_error", "the request was cancelled");
        return false;
      }
      json r = b.OnDoneResponse(*ev);
      completion_tokens += r["usage"]["completion_tokens"].get<size_t>();
      if (i == 0) *combined = std::move(r);
      else (*combined)["choices"].push_back(r["choices"][0]);
      break;
    }
  }
  if (parsed.n > 1) {
    (*combined)["usage"]["completion_tokens"] = completion_tokens;
    (*combined)["usage"]["total_tokens"] = (*combined)["usage"]["prompt_tokens"].get<size_t>() + completion_tokens;
  }
  return true;
}

}  // namespace pc
