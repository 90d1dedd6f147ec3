#include "kvcache/payload_seal.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <xxhash.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>

#include "base/check.h"

namespace pc {

Result<PayloadSeal> PayloadSeal::FromSecret(std::string secret) {
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.size() < 16) return Errorf("the tier secret must have at least 16 bytes (has {})", secret.size());
  PayloadSeal s;
  s.secret_ = std::move(secret);
  return s;
}

Result<PayloadSeal> PayloadSeal::FromSecretFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Errorf("cannot read the tier secret file '{}'", path);
  std::string secret((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Result<PayloadSeal> s = FromSecret(std::move(secret));
  if (!s.ok()) return Errorf("{}: {}", path, s.status().message());
  return s;
}

PayloadSeal::Tag PayloadSeal::Compute(const Hash128& key, std::span<const uint8_t> payload) const {
  Tag tag{};
  if (!keyed()) {
    const XXH128_hash_t h = XXH3_128bits_withSeed(payload.data(), payload.size(), key.lo ^ key.hi);
    std::memcpy(tag.data(), &h, sizeof h);
    return tag;
  }
  struct MacFree {
    void operator()(EVP_MAC* m) const { EVP_MAC_free(m); }
    void operator()(EVP_MAC_CTX* c) const { EVP_MAC_CTX_free(c); }
  };
  std::unique_ptr<EVP_MAC, MacFree> mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
  PC_CHECK(mac != nullptr);
  std::unique_ptr<EVP_MAC_CTX, MacFree> ctx(EVP_MAC_CTX_new(mac.get()));
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0), OSSL_PARAM_construct_end()};
  size_t len = 0;
  const bool ok = ctx != nullptr &&
                  EVP_MAC_init(ctx.get(), reinterpret_cast<const unsigned char*>(secret_.data()), secret_.size(), params) &&
                  EVP_MAC_update(ctx.get(), reinterpret_cast<const unsigned char*>(&key), sizeof key) &&
                  EVP_MAC_update(ctx.get(), payload.data(), payload.size()) &&
                  EVP_MAC_final(ctx.get(), tag.data(), &len, tag.size()) && len == kTagBytes;
  PC_CHECK(ok && "HMAC-SHA256 failed");
  return tag;
}

bool PayloadSeal::Verify(const Hash128& key, std::span<const uint8_t> payload, std::span<const uint8_t> tag) const {
  if (tag.size() != kTagBytes) return false;
  const Tag want = Compute(key, payload);
  return CRYPTO_memcmp(want.data(), tag.data(), kTagBytes) == 0;
}

std::string PayloadSeal::Seal(const Hash128& key, std::span<const uint8_t> payload) const {
  const Tag tag = Compute(key, payload);
  std::string v(reinterpret_cast<const char*>(tag.data()), tag.size());
  v.append(reinterpret_cast<const char*>(payload.data()), payload.size());
  return v;
}

bool PayloadSeal::Open(const Hash128& key, std::span<const uint8_t> value, std::vector<uint8_t>* payload) const {
  if (value.size() < kTagBytes) return false;
  const std::span<const uint8_t> body = value.subspan(kTagBytes);
  if (!Verify(key, body, value.first(kTagBytes))) return false;
  payload->assign(body.begin(), body.end());
  return true;
}

}  // namespace pc
