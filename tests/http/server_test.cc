// http::Server over real sockets on 127.0.0.1 (port 0): routes, keep-alive and pipelining,
// streaming, and what it must survive: slow headers (closed at the deadline while /health
// answers), the connection cap (the oldest idle connection is evicted), the in-flight cap (429
// from the loop), a client that goes away mid-request (the handler is told), a body over the
// limit (413 without reading it), and shutdown with a stuck handler (bounded; the port is free
// at once). These cross the server's internal parts (event loop, connections, exchanges, worker
// pool, request parser) through real sockets, so they sit with the entry point, Server. The
// header, idle and write deadlines are real socket deadlines and the tests wait them out; where
// only an order matters (accept order), the test waits for the server's counters instead.
#include "http/server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/http/raw_client.h"

namespace tandem::http {
namespace {

using namespace std::chrono_literals;
using testing::GetRequest;
using testing::PostRequest;
using testing::RawClient;
using Ms = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Waits until the loop has accepted `n` connections in all (false after `timeout`).
bool AcceptedWithin(const Server& s, int64_t n, Ms timeout) {
  const Clock::time_point end = Clock::now() + timeout;
  while (s.Stats().accepted_total < n) {
    if (Clock::now() >= end) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// A gate that handlers wait at until the test opens it (shared, so a handler left running after
// Stop still has it).
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int waiting = 0;
  void Wait() {
    std::unique_lock<std::mutex> l(mu);
    ++waiting;
    cv.notify_all();
    cv.wait(l, [&] { return open; });
  }
  bool WaitForWaiters(int n, Ms timeout) {
    std::unique_lock<std::mutex> l(mu);
    return cv.wait_for(l, timeout, [&] { return waiting >= n; });
  }
  void Open() {
    std::lock_guard<std::mutex> l(mu);
    open = true;
    cv.notify_all();
  }
};

class ServerTest : public ::testing::Test {
 protected:
  void Start(ServerOptions o = {}) {
    o.host = "127.0.0.1";
    o.port = 0;
    server_ = std::make_unique<Server>(o);
    server_->HandleInline("GET", "/health", [](const Request&) { return Response{200, {}, "text/plain", "ok"}; });
    server_->Handle("POST", "/echo", [](Exchange& ex) {
      ex.Respond(Response{200, {}, "text/plain", ex.request().body});
    });
    server_->Handle("GET", "/work", [](Exchange& ex) { ex.Respond(Response{200, {}, "text/plain", "worked"}); });
    server_->Handle("GET", "/gate", [g = gate_](Exchange& ex) {
      g->Wait();
      ex.Respond(Response{200, {}, "text/plain", "opened"});
    });
    server_->Handle("GET", "/stream", [](Exchange& ex) {
      ex.BeginStream(200, {{"Cache-Control", "no-cache"}}, "text/event-stream");
      for (int i = 0; i < 3; ++i) ex.Write("data: " + std::to_string(i) + "\n\n");
      ex.EndStream();
    });
    server_->Handle("GET", "/none", [](Exchange&) {});
    server_->SetErrorRenderer([](int status, const std::string& message) {
      return Response{status, {}, "application/json", "{\"error\":\"" + message + "\"}"};
    });
    ASSERT_TRUE(server_->Start().ok());
    port_ = server_->port();
  }
  void TearDown() override {
    gate_->Open();
    if (server_) server_->Stop(2000ms);
  }

  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
  std::unique_ptr<Server> server_;
  int port_ = 0;
};

TEST_F(ServerTest, RoutesKeepAliveAndErrors) {
  Start();
  RawClient c(port_);
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(GetRequest("/health")));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "ok");
  // Same connection: a worker route, then an unknown route, then a wrong method.
  ASSERT_TRUE(c.Send(PostRequest("/echo", "hello body")));
  r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "hello body");
  ASSERT_TRUE(c.Send(GetRequest("/nope")));
  r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(r->body, "{\"error\":\"unknown route: GET /nope\"}");
  ASSERT_TRUE(c.Send(GetRequest("/echo")));
  r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_TRUE(r->HasHeader("Allow: POST"));
  // A handler that answers nothing gets a 500.
  ASSERT_TRUE(c.Send(GetRequest("/none")));
  r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  // Malformed: 400, and the connection ends.
  ASSERT_TRUE(c.Send("GET /health HTTP/1.1\r\nHost: t\r\nBad Header: x\r\n\r\n"));
  r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(r->HasHeader("Connection: close"));
  EXPECT_TRUE(c.ClosedWithin(1000ms));
  std::cout << "400 body: " << r->body << "\n";
}

TEST_F(ServerTest, PipelinedRequestsAnswerInOrder) {
  Start();
  RawClient c(port_);
  std::string chunked = "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
  ASSERT_TRUE(c.Send(GetRequest("/work") + GetRequest("/health") + PostRequest("/echo", "1") + chunked +
                     GetRequest("/health", "Connection: close\r\n")));
  const char* want[] = {"worked", "ok", "1", "abcde", "ok"};
  for (const char* w : want) {
    auto r = c.ReadResponse();
    ASSERT_TRUE(r) << w;
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, w);
  }
  EXPECT_TRUE(c.ClosedWithin(1000ms));
}

TEST_F(ServerTest, StreamsChunkedAndCloseDelimited) {
  Start();
  RawClient c(port_);
  ASSERT_TRUE(c.Send(GetRequest("/stream")));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->HasHeader("Transfer-Encoding: chunked"));
  EXPECT_EQ(r->body, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
  RawClient old(port_);  // HTTP/1.0 has no chunked coding: the body ends with the connection
  ASSERT_TRUE(old.Send("GET /stream HTTP/1.0\r\n\r\n"));
  r = old.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->HasHeader("chunked"));
  EXPECT_EQ(r->body, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
}

// 290 connections trickle their heads one byte at a time; each is closed at the header deadline
// (the trickle does not extend it), and /health and a worker route answer fast meanwhile.
TEST_F(ServerTest, SlowHeadersAreClosedAtTheDeadlineWhileHealthAnswers) {
  ServerOptions o;
  o.header_timeout = 600ms;
  o.max_connections = 1000;
  Start(o);
  std::vector<std::unique_ptr<RawClient>> slow;
  const Clock::time_point opened = Clock::now();
  for (int i = 0; i < 290; ++i) {
    slow.push_back(std::make_unique<RawClient>(port_));
    ASSERT_TRUE(slow.back()->connected());
  }
  const std::string head = GetRequest("/health", "X-Pad: " + std::string(200, 'p') + "\r\n");
  double worst_health_ms = 0;
  size_t sent = 0;
  while (MsSince(opened) < 450) {
    for (auto& s : slow) s->Send(head.substr(sent, 1));
    ++sent;
    const Clock::time_point t = Clock::now();
    RawClient h(port_);
    ASSERT_TRUE(h.Send(GetRequest(sent % 2 ? "/health" : "/work")));
    auto r = h.ReadResponse(1000ms);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    worst_health_ms = std::max(worst_health_ms, MsSince(t));
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_LT(sent, head.size());  // still trickling when the deadline hits
  int closed = 0;
  for (auto& s : slow) {
    s->Send(head.substr(sent, 1));
    closed += s->ClosedWithin(1000ms) ? 1 : 0;
  }
  const double all_closed_ms = MsSince(opened);
  EXPECT_EQ(closed, 290);
  EXPECT_LT(all_closed_ms, 1500);
  EXPECT_LT(worst_health_ms, 500);
  EXPECT_NE(slow[0]->buffered().find("408"), std::string::npos) << slow[0]->buffered();
  EXPECT_GE(server_->Stats().timed_out_total, 290);
  std::cout << "290 trickling connections closed by " << all_closed_ms << " ms (deadline 600 ms); slowest "
            << "/health or /work during the trickle: " << worst_health_ms << " ms\n";
}

TEST_F(ServerTest, IdleKeepAliveConnectionsAreClosed) {
  ServerOptions o;
  o.idle_timeout = 200ms;
  Start(o);
  RawClient c(port_);
  ASSERT_TRUE(c.Send(GetRequest("/health")));
  ASSERT_TRUE(c.ReadResponse());
  const Clock::time_point t = Clock::now();
  EXPECT_TRUE(c.ClosedWithin(1000ms));
  EXPECT_GT(MsSince(t), 150);
}

// At the cap, a new connection is admitted by closing the oldest one without a request in flight.
TEST_F(ServerTest, ConnectionCapEvictsTheOldestIdleConnection) {
  ServerOptions o;
  o.max_connections = 8;
  Start(o);
  RawClient busy(port_);  // the oldest, but with a request in flight: never evicted
  ASSERT_TRUE(busy.Send(GetRequest("/gate")));
  ASSERT_TRUE(gate_->WaitForWaiters(1, 2000ms));
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 7; ++i) {
    idle.push_back(std::make_unique<RawClient>(port_));
    ASSERT_TRUE(AcceptedWithin(*server_, i + 2, 2000ms));  // accept order = age
  }
  std::vector<std::unique_ptr<RawClient>> fresh;  // kept open: each one needs room
  for (int i = 0; i < 3; ++i) {
    fresh.push_back(std::make_unique<RawClient>(port_));
    ASSERT_TRUE(fresh.back()->Send(GetRequest("/health")));
    auto r = fresh.back()->ReadResponse(1000ms);
    ASSERT_TRUE(r) << "new connection " << i << " was not admitted";
    EXPECT_EQ(r->status, 200);
  }
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(idle[i]->ClosedWithin(500ms)) << "idle " << i;
  EXPECT_FALSE(idle[3]->ClosedWithin(100ms));  // younger than the three evicted: stays
  EXPECT_EQ(server_->Stats().evicted_total, 3);
  EXPECT_EQ(server_->Stats().connections, 8);
  gate_->Open();
  auto r = busy.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "opened");
  std::cout << "evicted " << server_->Stats().evicted_total << " idle connections\n";
}

// Beyond max_in_flight the loop answers 429 itself; /health (inline) still answers.
TEST_F(ServerTest, InFlightCapAnswers429WhileHealthAnswers) {
  ServerOptions o;
  o.max_in_flight = 2;
  o.retry_after_seconds = 3;
  Start(o);
  RawClient a(port_), b(port_);
  ASSERT_TRUE(a.Send(GetRequest("/gate")));
  ASSERT_TRUE(b.Send(GetRequest("/gate")));
  ASSERT_TRUE(gate_->WaitForWaiters(2, 2000ms));
  RawClient c(port_);
  const Clock::time_point t = Clock::now();
  ASSERT_TRUE(c.Send(GetRequest("/work")));
  auto r = c.ReadResponse(1000ms);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_TRUE(r->HasHeader("Retry-After: 3"));
  EXPECT_LT(MsSince(t), 200);
  ASSERT_TRUE(c.Send(GetRequest("/health")));  // same connection: a 429 keeps it
  r = c.ReadResponse(1000ms);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  gate_->Open();
  EXPECT_EQ(a.ReadResponse()->body, "opened");
  EXPECT_EQ(b.ReadResponse()->body, "opened");
  EXPECT_EQ(server_->Stats().overloaded_total, 1);
}

TEST_F(ServerTest, ClientGoneIsSignalledForARequestInFlight) {
  Server s(ServerOptions{});
  std::atomic<bool> called{false};
  std::atomic<double> seen_after_ms{-1};
  std::atomic<bool> polled_gone{false};
  s.Handle("GET", "/long", [&](Exchange& ex) {
    const Clock::time_point t = Clock::now();
    ex.OnClientGone([&, t] {
      seen_after_ms = MsSince(t);
      called = true;
    });
    for (int i = 0; i < 300 && !ex.client_gone(); ++i) std::this_thread::sleep_for(10ms);
    polled_gone = ex.client_gone();
    EXPECT_FALSE(ex.Respond(Response{200, {}, "text/plain", "late"}));
  });
  ASSERT_TRUE(s.Start().ok());
  {
    RawClient c(s.port());
    ASSERT_TRUE(c.Send(GetRequest("/long")));
    std::this_thread::sleep_for(300ms);
  }  // closed
  for (int i = 0; i < 100 && !called; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(called);
  for (int i = 0; i < 100 && s.Stats().in_flight > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(polled_gone);
  EXPECT_EQ(s.Stats().client_gone_total, 1);
  EXPECT_EQ(s.Stats().in_flight, 0);
  std::cout << "client gone seen " << seen_after_ms.load() << " ms after the handler started (client closed at 300 ms)\n";
  EXPECT_TRUE(s.Stop(1000ms));
}

// A body over the limit is refused from its Content-Length: the 413 arrives while the client is
// still sending, and the server holds none of the body.
TEST_F(ServerTest, BodyOverTheLimitIs413WithoutReadingIt) {
  ServerOptions o;
  o.limits.max_body_bytes = 1 << 20;
  Start(o);
  RawClient c(port_);
  const size_t declared = 62u << 20;
  ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(declared) + "\r\n\r\n"));
  const Clock::time_point t = Clock::now();
  std::atomic<bool> stop_sending{false};
  std::thread sender([&] {
    const std::string block(1 << 20, 'x');
    for (int i = 0; i < 62 && !stop_sending; ++i) {
      if (!c.Send(block)) break;
    }
  });
  auto r = c.ReadResponse(2000ms);
  stop_sending = true;
  sender.join();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_LT(MsSince(t), 1000);
  std::cout << "413 after " << MsSince(t) << " ms: " << r->body << "\n";

  // With Expect: 100-continue a client learns before sending anything; a body that fits gets
  // the 100 first.
  RawClient e(port_);
  ASSERT_TRUE(e.Send("POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 99999999\r\n\r\n"));
  r = e.ReadResponse(1000ms);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  RawClient ok(port_);
  ASSERT_TRUE(ok.Send("POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"));
  r = ok.ReadResponse(1000ms);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 100);
  ASSERT_TRUE(ok.Send("hello"));
  r = ok.ReadResponse(1000ms);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "hello");
}

// Bodies held at once are bounded: past max_buffered_body_bytes a request is refused (503)
// before its body is read.
TEST_F(ServerTest, BufferedBodiesAreBounded) {
  ServerOptions o;
  o.limits.max_body_bytes = 800;
  o.max_buffered_body_bytes = 1000;
  Start(o);
  RawClient first(port_);
  ASSERT_TRUE(first.Send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 600\r\n\r\n" + std::string(100, 'a')));
  std::this_thread::sleep_for(100ms);
  RawClient second(port_);
  ASSERT_TRUE(second.Send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 600\r\n\r\n"));
  auto r = second.ReadResponse(1000ms);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_TRUE(r->HasHeader("Retry-After: 1"));
  ASSERT_TRUE(first.Send(std::string(500, 'a')));
  r = first.ReadResponse(1000ms);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body.size(), 600u);
}

// A client that stops reading a stream: the handler's write fails at the write deadline.
TEST_F(ServerTest, WriteDeadlineEndsAStreamNobodyReads) {
  Server s([] {
    ServerOptions o;
    o.write_timeout = 300ms;
    return o;
  }());
  std::atomic<double> failed_after_ms{-1};
  s.Handle("GET", "/flood", [&](Exchange& ex) {
    ex.BeginStream(200, {}, "text/plain");
    const std::string block(1 << 20, 'z');
    Clock::time_point last_ok = Clock::now();
    while (ex.Write(block)) last_ok = Clock::now();
    failed_after_ms = MsSince(last_ok);
    EXPECT_TRUE(ex.client_gone());
  });
  ASSERT_TRUE(s.Start().ok());
  RawClient c(s.port());
  ASSERT_TRUE(c.Send(GetRequest("/flood")));  // and never read
  for (int i = 0; i < 500 && failed_after_ms < 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_GE(failed_after_ms.load(), 250);
  EXPECT_LT(failed_after_ms.load(), 1500);
  std::cout << "the blocked write gave up after " << failed_after_ms.load() << " ms (deadline 300 ms)\n";
  EXPECT_TRUE(s.Stop(1000ms));
}

// Stop is bounded even when a handler never returns; the handler is left running.
TEST_F(ServerTest, StopIsBoundedWithAStuckHandler) {
  Start();
  RawClient c(port_);
  ASSERT_TRUE(c.Send(GetRequest("/gate")));
  ASSERT_TRUE(gate_->WaitForWaiters(1, 2000ms));
  const Clock::time_point t = Clock::now();
  EXPECT_FALSE(server_->Stop(300ms));
  const double ms = MsSince(t);
  EXPECT_LT(ms, 1000);
  EXPECT_TRUE(c.ClosedWithin(500ms));  // its socket was shut down
  std::cout << "Stop(300 ms) with a stuck handler returned after " << ms << " ms\n";
  gate_->Open();  // lets the left-behind thread end before the test binary exits
  std::this_thread::sleep_for(50ms);
}

// StopListening frees the port at once, while a request is still in flight: a new server binds
// it, and the old connection keeps being served.
TEST_F(ServerTest, StopListeningFreesThePortAtOnce) {
  Start();
  RawClient c(port_);
  ASSERT_TRUE(c.Send(GetRequest("/gate")));
  ASSERT_TRUE(gate_->WaitForWaiters(1, 2000ms));
  const Clock::time_point t = Clock::now();
  server_->StopListening();
  EXPECT_LT(MsSince(t), 50);
  RawClient refused(port_);
  EXPECT_FALSE(refused.connected());
  ServerOptions o;
  o.port = port_;
  Server next(o);
  next.HandleInline("GET", "/health", [](const Request&) { return Response{200, {}, "text/plain", "next"}; });
  ASSERT_TRUE(next.Start().ok()) << "port " << port_ << " still bound";
  RawClient n(port_);
  ASSERT_TRUE(n.Send(GetRequest("/health")));
  auto r = n.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "next");
  gate_->Open();
  r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "opened");
  EXPECT_TRUE(next.Stop(1000ms));
}

}  // namespace
}  // namespace tandem::http
