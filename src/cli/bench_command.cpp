// `sluice bench -m MODEL [-p 512] [-n 128] [-r 3] [-t N] [--kv f16|f32] [--json]`: speed in the
// manner of llama-bench. The model loads once; each repetition times one prefill of p
// pseudo-random ids (prompt tokens/s) and n single-token evals after a 1-token prefix
// (generation tokens/s) on a cleared session. Only the eval calls are timed.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "sluice/engine.h"
#include "sluice/error.h"

namespace sluice::cli {
namespace {

struct BenchArgs {
  std::string model;
  int64_t n_prompt = 512;
  int64_t n_gen = 128;
  int repetitions = 3;
  bool json = false;
  bool warmup = true;
  uint64_t seed = 1234;
  EngineArgs engine;
};

// splitmix64: a generator small enough to write again in any language, so a comparison script
// can feed the peer exactly these ids (bench/compare_llamacpp.py does).
class TokenStream {
 public:
  TokenStream(uint64_t seed, int64_t n_vocab) : state_(seed), n_vocab_(uint64_t(n_vocab)) {}
  int32_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return int32_t((z ^ (z >> 31)) % n_vocab_);
  }
  std::vector<int32_t> take(int64_t n) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int32_t& id : ids) id = next();
    return ids;
  }

 private:
  uint64_t state_;
  uint64_t n_vocab_;
};

double seconds_of(const std::vector<int32_t>& ids, Session& session, bool one_by_one) {
  double total = 0;
  const auto timed = [&](std::span<const int32_t> part) {
    const auto start = std::chrono::steady_clock::now();
    session.append(part);
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  if (!one_by_one) {
    timed(ids);
  } else {
    for (const int32_t& id : ids) timed(std::span<const int32_t>(&id, 1));
  }
  return total;
}

struct Series {
  std::string test;  // "pp512", "tg128"
  int64_t n = 0;
  std::vector<double> rates;  // tokens/s, one per repetition
  double median() const {
    std::vector<double> sorted = rates;
    std::sort(sorted.begin(), sorted.end());
    const size_t m = sorted.size() / 2;
    return sorted.size() % 2 ? sorted[m] : (sorted[m - 1] + sorted[m]) / 2;
  }
  double min() const { return *std::min_element(rates.begin(), rates.end()); }
  double max() const { return *std::max_element(rates.begin(), rates.end()); }
};

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", value);
  return text;
}

std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

std::string series_json(const Series& s) {
  std::string rates;
  for (size_t i = 0; i < s.rates.size(); ++i) rates += (i ? ", " : "") + number(s.rates[i]);
  return "{\"n\": " + std::to_string(s.n) + ", \"tokens_per_s\": [" + rates +
         "], \"median\": " + number(s.median()) + ", \"min\": " + number(s.min()) +
         ", \"max\": " + number(s.max()) + "}";
}

std::string report(const BenchArgs& args, const ModelInfo& info, const Series& pp,
                   const Series& tg) {
  if (args.json) {
    return "{\"model\": \"" + escaped(args.model) + "\", \"architecture\": \"" +
           escaped(info.architecture) + "\", \"backend\": \"" + escaped(info.backend) +
           "\", \"device\": \"" + escaped(info.device) +
           "\", \"threads\": " + std::to_string(args.engine.threads) + ", \"kv\": \"" +
           args.engine.kv + "\", \"repetitions\": " + std::to_string(args.repetitions) +
           ", \"pp\": " + series_json(pp) + ", \"tg\": " + series_json(tg) + "}\n";
  }
  std::string out = info.name + " (" + info.architecture + "), " +
                    (info.device.empty() ? info.backend : info.backend + " on " + info.device) +
                    ", threads " +
                    (args.engine.threads ? std::to_string(args.engine.threads) : "auto") + ", kv " +
                    args.engine.kv + ", " + std::to_string(args.repetitions) + " repetitions\n";
  char line[128];
  std::snprintf(line, sizeof line, "%-8s %14s %12s %12s\n", "test", "median t/s", "min", "max");
  out += line;
  for (const Series* s : {&pp, &tg}) {
    if (s->n == 0) continue;
    std::snprintf(line, sizeof line, "%-8s %14.2f %12.2f %12.2f\n", s->test.c_str(), s->median(),
                  s->min(), s->max());
    out += line;
  }
  return out;
}

int run_bench(const BenchArgs& args) {
  std::shared_ptr<Model> model = load_model(args.model, args.engine);
  const ModelInfo& info = model->info();
  SessionOptions options = session_options(args.engine);
  options.n_batch = std::max<int64_t>(args.n_prompt, 1);  // the prompt goes in as one chunk
  options.n_ctx = args.n_prompt + args.n_gen + 8;
  if (options.n_ctx > info.n_ctx_train) {
    throw Error("-p/-n need a context of " + std::to_string(options.n_ctx) + " tokens but '" +
                args.model + "' was trained for " + std::to_string(info.n_ctx_train));
  }
  Session session(model, options);
  TokenStream stream(args.seed, info.n_vocab);
  const std::vector<int32_t> prompt = stream.take(args.n_prompt);
  const std::vector<int32_t> prefix = stream.take(1);
  const std::vector<int32_t> generated = stream.take(args.n_gen);

  if (args.warmup) {  // first touches of weights and scratch, not timed
    if (args.n_prompt > 0) session.append(prompt);
    session.clear();
    session.append(prefix);
    if (args.n_gen > 0) session.append(std::span<const int32_t>(generated.data(), 1));
  }
  Series pp{"pp" + std::to_string(args.n_prompt), args.n_prompt, {}};
  Series tg{"tg" + std::to_string(args.n_gen), args.n_gen, {}};
  for (int r = 0; r < args.repetitions; ++r) {
    if (args.n_prompt > 0) {
      session.clear();
      pp.rates.push_back(double(args.n_prompt) / seconds_of(prompt, session, false));
    }
    if (args.n_gen > 0) {
      session.clear();
      session.append(prefix);
      tg.rates.push_back(double(args.n_gen) / seconds_of(generated, session, true));
    }
  }
  if (pp.rates.empty()) pp.rates.push_back(0);
  if (tg.rates.empty()) tg.rates.push_back(0);
  const std::string out = report(args, info, pp, tg);
  std::fwrite(out.data(), 1, out.size(), stdout);
  write_expert_outputs(*model, args.engine);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace

Command add_bench_command(CLI::App& parent) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* app = parent.add_subcommand(
      "bench", "Measure prompt (prefill) and generation speed in tokens/s, like llama-bench");
  app->add_option("--model,-m", args->model, "GGUF file or safetensors snapshot")->required();
  app->add_option("--n-prompt,-p", args->n_prompt, "Prompt tokens prefilled in one eval (0: skip)")
      ->check(at_least(0))
      ->capture_default_str();
  app->add_option("--n-gen,-n", args->n_gen, "Tokens generated one eval at a time (0: skip)")
      ->check(at_least(0))
      ->capture_default_str();
  app->add_option("--repetitions,-r", args->repetitions, "Timed repetitions of each test")
      ->check(at_least(1))
      ->capture_default_str();
  app->add_option("--seed", args->seed, "Seed of the pseudo-random token ids (splitmix64)")
      ->capture_default_str();
  app->add_flag("!--no-warmup", args->warmup, "Skip the untimed warm-up prefill and step");
  app->add_flag("--json", args->json,
                "Print {\"model\", \"threads\", \"pp\": {\"n\", \"tokens_per_s\", \"median\", …}, "
                "\"tg\": {…}} as JSON");
  add_engine_options(*app, args->engine);
  app->remove_option(app->get_option("--ctx"));  // sized from -p and -n instead
  return {app, [args] { return run_bench(*args); }};
}

}  // namespace sluice::cli
