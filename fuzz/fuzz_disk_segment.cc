// The disk tier's segment reader: a segment file whose header is valid (so
// the scan reads on) followed by arbitrary bytes, or arbitrary bytes
// altogether; scanning, counting and loading must never crash, and a load
// returns only payloads whose seal verifies.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "kvcache/disk_tier.h"

namespace {

pc::DiskTierOptions Options(const std::string& dir) {
  pc::DiskTierOptions o;
  o.dir = dir;
  o.budget_bytes = 1 << 20;
  o.fingerprint = pc::Hash128{1, 2};
  o.n_layer = 1;
  o.kv_dim = 4;
  o.block_size = 2;
  o.elem_bytes = 2;
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  static const std::string dir = fs::temp_directory_path() / ("pc-fuzz-disk-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string header;
  {
    // A valid header: what the tier writes for these options.
    pc::DiskTier writer(Options(dir));
    pc::BlockPayload b{pc::Hash128{7, 7}, std::vector<uint8_t>(8, 1)};
    writer.Insert({&b, 1});
    for (const auto& e : fs::directory_iterator(dir)) {
      std::ifstream in(e.path(), std::ios::binary);
      header.assign(pc::DiskTier::kHeaderBytes, '\0');
      in.read(header.data(), static_cast<std::streamsize>(header.size()));
    }
  }
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    std::ofstream out(dir + "/seg-1.pcs", std::ios::binary);
    if (size > 0 && data[0] % 4 != 0) out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  {
    pc::DiskTier tier(Options(dir));
    // Keys: the input's 16-byte words, so entries it wrote can be found.
    std::vector<pc::Hash128> keys;
    for (size_t off = 0; off + 16 <= size && keys.size() < 8; off += 16) {
      pc::Hash128 k;
      std::memcpy(&k, data + off, 16);
      keys.push_back(k);
    }
    const size_t n = tier.CountLeading(keys);
    (void)tier.Load(std::span<const pc::Hash128>(keys).first(n));
    (void)tier.stats();
  }
  fs::remove_all(dir);  // nothing left behind when the run ends
  return 0;
}
