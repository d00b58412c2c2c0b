// Exchange: a worker's side of one request (http/server.h), writing through the Connection.
#include "http/connection.h"
#include "http/server.h"

namespace tandem::http {

Exchange::Exchange(std::shared_ptr<Connection> connection, Request request)
    : conn_(std::move(connection)), request_(std::move(request)), keep_alive_(request_.keep_alive) {}

// The connection may carry more requests: drop this exchange's callback (and what it holds).
Exchange::~Exchange() { conn_->SetGoneCallback(nullptr); }

bool Exchange::client_gone() const { return conn_->gone(); }

void Exchange::OnClientGone(std::function<void()> callback) { conn_->SetGoneCallback(std::move(callback)); }

bool Exchange::Send(std::string_view bytes) {
  if (failed_) return false;
  if (conn_->WriteAll(bytes, Clock::now() + conn_->write_timeout())) return true;
  // A write that failed or passed its deadline: nobody is reading; the handler should stop.
  failed_ = true;
  conn_->MarkGone();
  return false;
}

bool Exchange::Respond(const Response& response) {
  if (responded_ || streaming_) return false;
  responded_ = true;
  return Send(SerializeResponse(response, keep_alive_));
}

bool Exchange::BeginStream(int status, const Headers& headers, std::string_view content_type) {
  if (responded_ || streaming_) return false;
  streaming_ = true;
  // HTTP/1.0 has no chunked coding: the end of the body is the end of the connection.
  chunked_ = request_.version_minor >= 1;
  if (!chunked_) keep_alive_ = false;
  return Send(ResponseHead(status, headers, content_type, std::nullopt, chunked_, keep_alive_));
}

bool Exchange::Write(std::string_view data) {
  if (!streaming_ || stream_ended_) return false;
  if (data.empty()) return !failed_;
  return Send(chunked_ ? std::string_view(Chunk(data)) : data);
}

bool Exchange::EndStream() {
  if (!streaming_ || stream_ended_) return false;
  stream_ended_ = true;
  return chunked_ ? Send(kLastChunk) : !failed_;
}

bool Exchange::Finish(const std::function<Response()>& fallback) {
  if (!responded_ && !streaming_ && !conn_->gone()) Respond(fallback());
  // A stream the handler left unfinished has no end marker: only closing ends it.
  return keep_alive_ && !failed_ && !conn_->gone() && (responded_ || stream_ended_);
}

}  // namespace tandem::http
