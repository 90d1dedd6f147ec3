// promptcache inspect: metadata and tensor summary of a GGUF file.
#include <cstdio>
#include <map>

#include "commands.h"
#include "gguf/gguf.h"

namespace pc::cli {
namespace {

std::string ScalarText(const GgufScalar& s) {
  return std::visit(
      [](const auto& v) -> std::string {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::string>) {
          return v.size() > 80 ? "\"" + v.substr(0, 77) + "...\"" : "\"" + v + "\"";
        } else if constexpr (std::is_same_v<V, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<V, int8_t> || std::is_same_v<V, uint8_t>) {
          return std::to_string(static_cast<int>(v));
        } else {
          return fmt::format("{}", v);
        }
      },
      s);
}

int Inspect(const std::string& path) {
  Result<GgufFile> g = GgufFile::Open(path);
  if (!g.ok()) return Fail(g.status().message());
  std::printf("GGUF v%u, alignment %lu, %zu metadata keys, %zu tensors\n", g->version(),
              static_cast<unsigned long>(g->alignment()), g->metadata().size(), g->tensors().size());
  for (const auto& [key, v] : g->metadata()) {
    if (v.type != GgufType::kArray) {
      std::printf("  %-45s %-8s %s\n", key.c_str(), GgufTypeName(v.type), ScalarText(v.scalar).c_str());
      continue;
    }
    std::string preview;
    for (size_t i = 0; i < v.array.size() && i < 5; ++i) preview += (i ? ", " : "") + ScalarText(v.array[i]);
    if (v.array.size() > 5) preview += ", ...";
    std::printf("  %-45s %s[%zu] [%s]\n", key.c_str(), GgufTypeName(v.elem_type), v.array.size(), preview.c_str());
  }
  std::map<std::string, std::pair<size_t, uint64_t>> by_type;
  uint64_t total_bytes = 0, total_elems = 0;
  for (const auto& t : g->tensors()) {
    std::string dims;
    for (size_t i = 0; i < t.dims.size(); ++i) dims += (i ? " x " : "") + std::to_string(t.dims[i]);
    std::printf("  tensor %-32s %-5s [%s] %lu bytes\n", t.name.c_str(), TensorTypeName(t.type), dims.c_str(),
                static_cast<unsigned long>(t.size_bytes));
    auto& e = by_type[TensorTypeName(t.type)];
    ++e.first;
    e.second += t.size_bytes;
    total_bytes += t.size_bytes;
    total_elems += t.NumElements();
  }
  for (const auto& [type, e] : by_type) {
    std::printf("  %zu tensors of %s, %.2f MB\n", e.first, type.c_str(), e.second / 1e6);
  }
  std::printf("  total: %lu parameters, %.2f MB of tensor data\n", static_cast<unsigned long>(total_elems),
              total_bytes / 1e6);
  return 0;
}

}  // namespace

void RegisterInspect(CLI::App& app, int* exit_code) {
  auto path = std::make_shared<std::string>();
  CLI::App* c = app.add_subcommand("inspect", "Print a GGUF file's metadata and tensors");
  c->add_option("file", *path, "GGUF file")->required();
  c->callback([path, exit_code] { *exit_code = Inspect(*path); });
}

}  // namespace pc::cli
