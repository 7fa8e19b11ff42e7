// Runs the fuzz target without libFuzzer (for the normal test suite): every file of the corpus
// directory, then `mutations` inputs made from them by a fixed-seed PRNG (flips, inserts,
// deletions, splices, truncations). Deterministic, bounded, and compiler-independent.
#include <dirent.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {
void Run(const std::string& s) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [MUTATIONS]\n", argv[0]);
    return 2;
  }
  std::vector<std::string> corpus;
  if (DIR* d = ::opendir(argv[1])) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream f(std::string(argv[1]) + "/" + e->d_name, std::ios::binary);
      std::stringstream ss;
      ss << f.rdbuf();
      corpus.push_back(ss.str());
    }
    ::closedir(d);
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "no seeds in %s\n", argv[1]);
    return 1;
  }
  for (const auto& s : corpus) Run(s);
  long mutations = argc > 2 ? std::atol(argv[2]) : 10000;
  std::mt19937_64 rng(0xC0DE5BACEULL);
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  const char* tokens[] = {"\r\n",
                          "\r\n\r\n",
                          "Content-Length: ",
                          "999999999",
                          "\"",
                          "{",
                          "}",
                          "[",
                          "]",
                          ":",
                          ",",
                          "%",
                          "%00",
                          "..",
                          "/",
                          "null",
                          "\\u0000",
                          "-1",
                          "Transfer-Encoding: chunked\r\n",
                          "\"allowlist\":[\"*.\"]"};
  for (long i = 0; i < mutations; ++i) {
    std::string s = corpus[pick(corpus.size())];
    int steps = 1 + static_cast<int>(pick(4));
    for (int k = 0; k < steps; ++k) {
      switch (pick(6)) {
        case 0:
          if (!s.empty()) s[pick(s.size())] = static_cast<char>(rng());
          break;
        case 1:
          s.insert(pick(s.size() + 1), tokens[pick(std::size(tokens))]);
          break;
        case 2:
          if (!s.empty()) {
            size_t at = pick(s.size());
            s.erase(at, pick(s.size() - at + 1));
          }
          break;
        case 3: {
          const std::string& other = corpus[pick(corpus.size())];
          size_t at = pick(other.size() + 1);
          s.insert(pick(s.size() + 1), other.substr(at, pick(other.size() - at + 1)));
          break;
        }
        case 4:
          s.resize(pick(s.size() + 1));
          break;
        default:
          if (!s.empty()) s.insert(pick(s.size()), 1, s[pick(s.size())]);
          break;
      }
    }
    Run(s);
  }
  std::printf("replayed %zu seeds and %ld mutations: no crash\n", corpus.size(), mutations);
  return 0;
}
