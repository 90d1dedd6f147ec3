// Cheap requests first, within what the others allow: the order in which a
// queue of prompts is served when their prefill costs differ (a prompt
// mostly cached costs little; a prompt whose prefix others wait for serves
// them too), without letting anyone fall far behind first come, first
// served.
//
// Each entry may be passed by cheaper ones that arrived after it only while
// the time they have taken ahead of it (passed_ms, accounted by the caller
// as it happens) plus the candidate's own cost stays within `allowance`
// times its wait so far plus its own prefill (what it would wait for its
// first token if nobody passed it from now on). So a request's delay from
// being passed is at most allowance / (1 - allowance) of its
// first-come-first-served time to first token (0.11 for 0.1): nobody
// starves, however many cheap requests arrive, and a request that costs
// little goes ahead of a long prompt that has just started (the longer the
// prompt, the more room it leaves) as well as of misses that have waited
// long. With allowance 0 the order is first come, first served.
// Thread-safety: a pure function.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace pc {

struct QueueEntry {
  int64_t arrival_ns = 0;
  double cost_ms = 0;    // predicted prefill still to do
  double passed_ms = 0;  // time later arrivals have taken ahead of it so far
  // Requests its prefill serves: itself, and those waiting to hit the
  // prefix it computes. A prefix that others wait for is worth more.
  size_t beneficiaries = 1;
};

// entries in first-come-first-served order; returns their indices in the
// order to serve: those that may pass everyone before them not yet placed,
// least cost per beneficiary first, then the rest in arrival order.
std::vector<size_t> CheapFirstOrder(std::span<const QueueEntry> entries, int64_t now_ns, double allowance);

}  // namespace pc
