// The identity of a model for cached K/V: K/V computed by one model are only
// valid for a model that computes the same, so the fingerprint covers every
// metadata key with its type and its whole value, and every tensor's name,
// type, shape and every byte of its data. Part of every block key and every
// spill-tier entry.
// Thread-safety: uses the pool it is given (not reentrant with other pool work).
#pragma once
#include "base/hash128.h"
#include "gguf/gguf.h"
#include "runtime/thread_pool.h"

namespace pc {

// XXH3-128 of each tensor's bytes (tensors spread over the pool's threads,
// so reading a 1 GB file costs about what paging it in costs), combined in
// file order with the metadata.
Hash128 ModelFingerprint(const GgufFile& g, ThreadPool& pool);

}  // namespace pc
