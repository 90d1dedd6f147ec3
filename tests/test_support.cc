#include "test_support.h"

#include <nlohmann/json.hpp>

#include "base/check.h"
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pc::test {

bool RequireShared() {
  const char* v = std::getenv("PROMPTCACHE_REQUIRE_SHARED");
  return v != nullptr && std::string(v) == "1";
}

std::string SharedPath(const std::string& rel) {
  std::string dir = PROMPTCACHE_SHARED_DIR;
  if (const char* env = std::getenv("PROMPTCACHE_SHARED"); env && *env) dir = env;
  const std::string p = dir + "/" + rel;
  return std::filesystem::exists(p) ? p : "";
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

namespace {

// This process's scratch folder, removed when the process exits normally
// (each test case runs in a process of its own: thousands of folders would
// pile up in /tmp otherwise). A forked child leaves it to its parent.
struct ScratchDir {
  ScratchDir()
      : owner(getpid()),
        path(std::filesystem::temp_directory_path().string() + "/promptcache-test-" + std::to_string(owner)) {
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;  // best effort: a file still open elsewhere is no test failure
    if (getpid() == owner) std::filesystem::remove_all(path, ec);
  }
  pid_t owner;
  std::string path;
};

}  // namespace

std::string TempPath(const std::string& name) {
  static const ScratchDir dir;
  return dir.path + "/" + name;
}

std::string RunCommand(const std::string& cmd, int* exit_code) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *exit_code = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::vector<float> RandomFloats(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<RefCase> LoadReference(const std::string& path) {
  std::vector<RefCase> cases;
  std::istringstream in(ReadText(path));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    RefCase c;
    c.prompt = j["prompt_tokens"].get<std::vector<int32_t>>();
    c.greedy = j["greedy_tokens"].get<std::vector<int32_t>>();
    for (const auto& s : j["steps"]) {
      RefStep st{s["id"].get<int32_t>(), {}};
      for (const auto& t : s["top"]) st.top.emplace_back(t[0].get<int32_t>(), t[1].get<float>());
      c.steps.push_back(std::move(st));
    }
    cases.push_back(std::move(c));
  }
  // The sanitizer tree checks memory and undefined behaviour, which every
  // case of a file exercises alike (same tensors, kernels and code paths; the
  // prompts differ by a few tokens): it runs the first, unless
  // PROMPTCACHE_PARITY_ALL_CASES=1 (scripts/test.sh --full). The Release
  // suite runs them all.
#ifdef PROMPTCACHE_SANITIZER_BUILD
  const char* all = std::getenv("PROMPTCACHE_PARITY_ALL_CASES");
  if ((all == nullptr || std::string(all) != "1") && cases.size() > 1) cases.resize(1);
#endif
  return cases;
}

std::string ReferenceGgmlTarget(const std::string& name) {
  for (const char* first : {"stories260K", "tiny-gqa-f32", "tiny-gqa-f16", "tiny-gqa-q8_0", "tiny-gqa-q4_0"}) {
    if (name == first) return "avx512fp16";
  }
  for (const char* later : {"tiny-gqa-", "tiny-qwen2-", "tiny-qwen3-", "tiny-phi3-", "tiny-llama3-"}) {
    if (name.rfind(later, 0) == 0) return "avx512";
  }
  return "avx2";
}

float CheckGreedyAgainstReference(const RefCase& c, float tol, const GenerateFn& gen, const std::string& what,
                                  int32_t eos, int* jumps) {
  float worst = 0;
  size_t i = 0;
  while (i < c.steps.size()) {
    std::vector<int32_t> prefix = c.prompt;
    prefix.insert(prefix.end(), c.greedy.begin(), c.greedy.begin() + static_cast<std::ptrdiff_t>(i));
    const std::vector<GenStep> got = gen(prefix, static_cast<int>(c.steps.size() - i));
    if (got.empty()) {
      ADD_FAILURE() << what << ": no tokens generated at step " << i;
      return worst;
    }
    for (const GenStep& g : got) {
      const RefStep& ref = c.steps[i];
      for (const auto& [id, ref_lp] : ref.top) {
        auto it = std::find_if(g.top.begin(), g.top.end(), [id = id](const auto& p) { return p.first == id; });
        if (it == g.top.end()) {
          // Outside what the engine reported: it ranks the id lower than its
          // last alternative, so that one bounds its logprob from above.
          if (ref_lp - g.top.back().second > tol) {
            ADD_FAILURE() << what << " step " << i << ": reference id " << id << " (" << ref_lp
                          << ") is missing from our top " << g.top.size();
          }
          continue;
        }
        worst = std::max(worst, std::fabs(it->second - ref_lp));
        EXPECT_NEAR(it->second, ref_lp, tol) << what << " step " << i << " id " << id;
      }
      ++i;
      if (g.id != ref.id) {
        int32_t ours = g.id;
        if (ours == eos) {
          for (const auto& [id, lp] : g.top) {
            if (id != eos) {
              ours = id;
              break;
            }
          }
        }
        // The margin between the reference's two best ids it could choose
        // (end-of-sequence never was).
        std::vector<float> choosable;
        for (const auto& [id, lp] : ref.top) {
          if (id != eos) choosable.push_back(lp);
        }
        const float gap = choosable.size() >= 2 ? choosable[0] - choosable[1] : 0.0f;
        if (ours != ref.id && gap > tol && jumps != nullptr && *jumps > 0) {
          --*jumps;
          std::printf("%s step %zu: chose %d, the reference %d with a margin of %.4f (an allowed jump)\n", what.c_str(),
                      i - 1, ours, ref.id, gap);
        } else if (ours != ref.id) {
          EXPECT_LE(gap, tol) << what << " step " << i - 1 << ": chose " << ours << ", the reference " << ref.id
                              << " with a margin of " << gap;
        }
        break;  // relaunch from the reference's tokens
      }
      if (i >= c.steps.size()) break;
    }
  }
  return worst;
}

}  // namespace pc::test
