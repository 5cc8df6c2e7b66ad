// `sluice template (--template FILE.jinja | --model FILE) --messages MESSAGES.json [--tools
// TOOLS.json] [--add-generation-prompt] [--bos TEXT] [--eos TEXT] [--now TIME]`: renders a chat
// template as Hugging Face's apply_chat_template would and writes exactly the prompt to stdout.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "sluice/chat_template.h"
#include "sluice/error.h"

namespace sluice::cli {
namespace {

struct TemplateArgs {
  std::string template_path, model_path, messages_path, tools_path, now;
  std::string bos, eos;
  bool add_generation_prompt = false;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

int run_template(const TemplateArgs& args, const CLI::App& app) {
  ChatTemplateOptions options;
  std::string template_text;
  if (!args.model_path.empty()) {
    ModelChatTemplate model = read_model_chat_template(args.model_path);
    template_text = model.template_text;
    options.bos_token = model.bos_token;
    options.eos_token = model.eos_token;
  } else {
    template_text = read_text(args.template_path);
  }
  if (app.count("--bos")) options.bos_token = args.bos;
  if (app.count("--eos")) options.eos_token = args.eos;
  if (!args.tools_path.empty()) options.tools_json = read_text(args.tools_path);
  options.add_generation_prompt = args.add_generation_prompt;
  options.now = args.now;
  std::string prompt = render_chat_template(template_text, read_text(args.messages_path), options);
  if (std::fwrite(prompt.data(), 1, prompt.size(), stdout) != prompt.size() ||
      std::fflush(stdout) != 0)
    throw Error("writing the prompt to stdout failed");
  return 0;
}

}  // namespace

Command add_template_command(CLI::App& parent) {
  auto args = std::make_shared<TemplateArgs>();
  CLI::App* app = parent.add_subcommand(
      "template", "Render a chat template with messages (as Hugging Face does)");
  auto* source = app->add_option_group("source")->require_option(1);
  source->add_option("--template", args->template_path, "Jinja chat template file");
  source->add_option("--model", args->model_path,
                     "GGUF model whose tokenizer.chat_template to use");
  app->add_option("--messages", args->messages_path, "JSON array of chat messages")->required();
  app->add_option("--tools", args->tools_path, "JSON array of tool definitions");
  app->add_flag("--add-generation-prompt", args->add_generation_prompt,
                "End with the assistant turn's opening");
  app->add_option("--bos", args->bos, "bos_token text (default: the model's, else undefined)");
  app->add_option("--eos", args->eos, "eos_token text (default: the model's, else undefined)");
  app->add_option("--now", args->now, "Clock for strftime_now, e.g. 2026-01-15T10:00:00");
  return Command{app, [args, app] { return run_template(*args, *app); }};
}

}  // namespace sluice::cli
