// The OpenAI request parser (bodies of /v1/completions and
// /v1/chat/completions) and the bounded JSON parser under it: any bytes
// must give a request or an error, within the body's size, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "server/json_body.h"
#include "server/openai_api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const pc::ApiKind kind = data[0] % 2 ? pc::ApiKind::kChat : pc::ApiKind::kCompletion;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  pc::ParseContext ctx;
  ctx.tok = &pc::fuzz::TinyTokenizer();
  ctx.n_ctx = 256;
  pc::ApiError err;
  const std::optional<pc::ApiRequest> r = pc::ParseApiRequest(kind, body, ctx, &err);
  if (!r && err.message.empty()) __builtin_trap();  // every refusal says why
  if (r && r->engine.prompt.size() + static_cast<size_t>(r->engine.max_tokens) > ctx.n_ctx) __builtin_trap();
  std::string why;
  (void)pc::ParseJsonBounded(body, &why);
  return 0;
}
