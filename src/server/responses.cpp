// Route wrapper, JSON answers, and the job → client paths (whole or streamed).
#include "server/responses.h"

#include "sluice/error.h"

namespace sluice::server {

std::string dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

void write_json(httplib::Response& res, const Json& body, int status) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void write_error(httplib::Response& res, Api api, int status, const std::string& message,
                 const std::string& param) {
  res.status = status;
  if (status == 429 || status == 503) res.set_header("Retry-After", "1");
  res.set_content(error_body(api, status, message, param), "application/json");
}

httplib::Server::Handler route(Service& service, Api api, RouteHandler handler) {
  return [&service, api, handler = std::move(handler)](const httplib::Request& req,
                                                       httplib::Response& res) {
    auto record = std::make_shared<RequestRecord>(
        service.metrics(), api, req.method + " " + req.path, service.options().access_log);
    try {
      handler(req, res, record);
    } catch (const ApiError& e) {
      write_error(res, api, e.status(), e.what(), e.param());
    } catch (const Error& e) {
      write_error(res, api, 400, e.what());
    } catch (const std::exception& e) {
      write_error(res, api, 500, std::string("internal error: ") + e.what());
    }
    record->set_status(res.status);
  };
}

namespace {

void record_result(RequestRecord& record, const GenerationResult& result) {
  record.set_tokens(result.stats.n_prompt, result.stats.n_generated);
  record.set_outcome(stop_reason_name(result.stop_reason));
}

}  // namespace

void answer_whole(httplib::Response& res, Api api, std::shared_ptr<JobChannel> channel,
                  WholeAnswer whole, std::shared_ptr<RequestRecord> record) {
  auto output = std::make_shared<CollectedOutput>();
  if (channel->wait(output->events, std::chrono::milliseconds(1000))) {
    if (channel->failed()) throw ApiError(channel->error_status(), channel->error());
    output->result = channel->result();
    record_result(*record, output->result);
    write_json(res, whole(*output));
    return;
  }
  auto provider = [api, channel, output, whole = std::move(whole), record](
                      size_t, httplib::DataSink& sink) {
    while (!channel->wait(output->events, std::chrono::milliseconds(1000))) {
      if (!sink.write(" ", 1)) {
        channel->cancel = true;  // the client went away
        record->set_outcome("disconnected");
        return false;
      }
    }
    std::string body;
    if (channel->failed()) {
      body = error_body(api, channel->error_status(), channel->error());
      record->set_outcome("failed");
    } else {
      output->result = channel->result();
      record_result(*record, output->result);
      body = dump(whole(*output));
    }
    sink.write(body.data(), body.size());
    sink.done();
    return true;
  };
  res.status = 200;
  res.set_chunked_content_provider("application/json", std::move(provider),
                                   [channel](bool) { channel->cancel = true; });
}

void stream_job(httplib::Response& res, const char* content_type,
                std::shared_ptr<JobChannel> channel, StreamFormat format,
                std::shared_ptr<RequestRecord> record) {
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  auto provider = [channel, format = std::move(format), record](size_t, httplib::DataSink& sink) {
    std::vector<TokenEvent> events;
    int64_t generated = 0;
    for (;;) {
      events.clear();
      const bool ended = channel->wait(events, std::chrono::milliseconds(1000));
      std::string bytes = events.empty() ? std::string() : format.on_events(events);
      if (ended) bytes += format.on_end(*channel);
      // Only a quiet second gets a keep-alive: events whose text is held back are not quiet.
      if (events.empty() && !ended) bytes = format.keep_alive;
      for (const TokenEvent& e : events) generated += e.id >= 0 ? 1 : 0;
      if (!bytes.empty() && !sink.write(bytes.data(), bytes.size())) {
        channel->cancel = true;  // the client went away
        record->set_tokens(0, generated);
        record->set_outcome("disconnected");
        return false;
      }
      if (ended) {
        if (channel->failed()) {
          record->set_outcome("failed");
        } else {
          record_result(*record, channel->result());
        }
        sink.done();
        return true;
      }
    }
  };
  // Runs when the response ends either way; a job still going is cancelled.
  auto releaser = [channel](bool) { channel->cancel = true; };
  res.set_chunked_content_provider(content_type, std::move(provider), std::move(releaser));
}

}  // namespace sluice::server
