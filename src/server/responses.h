// The HTTP side of a route: the wrapper every handler runs in (errors in the API's own shape,
// the access record), JSON answers, and the two ways a job's tokens reach the client — all at
// once (answer_whole) or streamed as they come (stream_job, with keep-alives while a prompt is
// evaluated and cancellation when the client goes away).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <httplib.h>

#include "server/api_error.h"
#include "server/job.h"
#include "server/json_fields.h"
#include "server/request_record.h"
#include "server/service.h"

namespace sluice::server {

using RouteHandler = std::function<void(const httplib::Request&, httplib::Response&,
                                        const std::shared_ptr<RequestRecord>&)>;

// Runs `handler`, answering ApiError / sluice::Error / anything else as 4xx/400/500 in `api`'s
// error shape, and logs the request when the last owner of its record lets go.
httplib::Server::Handler route(Service& service, Api api, RouteHandler handler);

void write_json(httplib::Response& res, const Json& body, int status = 200);
void write_error(httplib::Response& res, Api api, int status, const std::string& message,
                 const std::string& param = {});

// JSON text that never throws on invalid UTF-8 in generated text (replaced by U+FFFD).
std::string dump(const Json& value);

// A job's whole output, for non-streaming answers.
struct CollectedOutput {
  std::vector<TokenEvent> events;
  GenerationResult result;
};
using WholeAnswer = std::function<Json(const CollectedOutput& output)>;

// Answers the job in one JSON body built by `whole`. A job that ends within a second is answered
// plainly (a failure as ApiError, with its status). One that takes longer is answered chunked:
// a space every quiet second (leading whitespace every JSON parser skips) keeps idle-timeout
// proxies patient and shows a client that went away, which cancels the job; a failure then
// comes as an error body in `api`'s shape.
void answer_whole(httplib::Response& res, Api api, std::shared_ptr<JobChannel> channel,
                  WholeAnswer whole, std::shared_ptr<RequestRecord> record);

struct StreamFormat {
  // The bytes to send for events that arrived (may be empty: nothing to send yet).
  std::function<std::string(std::vector<TokenEvent>& events)> on_events;
  // The bytes that end the stream: the last chunks, or an error in the stream's own shape.
  std::function<std::string(const JobChannel& channel)> on_end;
  std::string keep_alive;  // sent after each quiet second, while queued or prefilling
};

// Streams the job's output as a chunked response. A write that fails (the client went away)
// cancels the job; the engine frees its slot within one step.
void stream_job(httplib::Response& res, const char* content_type,
                std::shared_ptr<JobChannel> channel, StreamFormat format,
                std::shared_ptr<RequestRecord> record);

}  // namespace sluice::server
