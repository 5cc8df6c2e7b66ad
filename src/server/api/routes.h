// Route registration of each API adapter: they translate requests into jobs and jobs' output
// into the API's own answers, streaming included; nothing else.
#pragma once

#include <httplib.h>

#include "server/service.h"

namespace sluice::server::api {

void add_openai_routes(httplib::Server& http, Service& service);
void add_ollama_routes(httplib::Server& http, Service& service);
void add_anthropic_routes(httplib::Server& http, Service& service);

}  // namespace sluice::server::api
