#include "runtime/cache/redis_client.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "platform/hiredis_api.h"

namespace fleetjit {
namespace {

// Blocks SIGPIPE in this thread while hiredis writes, and discards one
// raised meanwhile (unless one was already pending before): the process's
// own SIGPIPE disposition is not ours to change.
class ScopedNoSigpipe {
 public:
  ScopedNoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~ScopedNoSigpipe() {
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero = {0, 0};
        while (sigtimedwait(&pipe_, nullptr, &zero) < 0 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

// The status for a failed context (`c` may be null: out of memory).
absl::Status ContextError(const redisContext* c, absl::string_view what,
                          absl::string_view where) {
  if (c == nullptr) {
    return absl::UnavailableError(
        absl::StrCat(what, " ", where, ": no memory"));
  }
  const bool timed_out =
      c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK ||
                                 errno == ETIMEDOUT || errno == EINPROGRESS);
  std::string message = absl::StrCat(what, " ", where, ": ", c->errstr);
  if (timed_out || absl::StrContains(c->errstr, "timed out")) {
    return absl::DeadlineExceededError(message);
  }
  return absl::UnavailableError(message);
}

RedisReply Convert(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      for (size_t i = 0; i < r->elements; ++i) {
        out.elements.push_back(Convert(r->element[i]));
      }
      break;
    default:
      break;
  }
  return out;
}

// "host:port" of a MOVED/ASK reply; an empty host (Redis 7 may send
// ":port") means the host we asked.
std::optional<std::string> RedirectTarget(absl::string_view error,
                                          absl::string_view current_host) {
  std::vector<absl::string_view> parts = absl::StrSplit(error, ' ');
  if (parts.size() != 3) return std::nullopt;
  size_t colon = parts[2].rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(parts[2].substr(colon + 1), &port) || port <= 0) {
    return std::nullopt;
  }
  absl::string_view host = parts[2].substr(0, colon);
  return absl::StrCat(host.empty() ? current_host : host, ":", port);
}

}  // namespace

std::string RedisUrl::Redacted() const {
  std::string auth;
  if (!user.empty() || !password.empty()) {
    auth = absl::StrCat(user, password.empty() ? "" : ":***", "@");
  }
  if (unix_socket) {
    return absl::StrCat("unix://", auth, path,
                        db ? absl::StrCat("?db=", db) : "");
  }
  return absl::StrCat("redis://", auth, host, ":", port, "/", db);
}

std::string RedactUrl(absl::string_view text) {
  size_t scheme = text.find("://");
  size_t at = text.rfind('@');
  if (scheme == absl::string_view::npos || at == absl::string_view::npos ||
      at < scheme) {
    return std::string(text);
  }
  return absl::StrCat(text.substr(0, scheme + 3), "***", text.substr(at));
}

absl::StatusOr<RedisUrl> ParseRedisUrl(absl::string_view text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("remote cache URL '", RedactUrl(text), "': ", why,
                     " (expected redis://[[user]:password@]host[:port][/db] or "
                     "unix://[[user]:password@]/path/to.sock[?db=N])"));
  };
  RedisUrl url;
  absl::string_view rest = text;
  if (absl::ConsumePrefix(&rest, "rediss://")) {
    return absl::UnimplementedError(absl::StrCat(
        "remote cache URL '", RedactUrl(text),
        "': TLS (rediss://) needs hiredis >= 1.0 with libhiredis_ssl; this "
        "build uses Debian 12's hiredis 0.14, which has no TLS. Reach the "
        "server through a TLS tunnel (stunnel, spiped) on a local port or a "
        "unix socket instead"));
  }
  if (absl::ConsumePrefix(&rest, "unix://")) {
    url.unix_socket = true;
  } else if (!absl::ConsumePrefix(&rest, "redis://")) {
    return bad("unknown scheme");
  }
  if (size_t at = rest.rfind('@'); at != absl::string_view::npos) {
    absl::string_view auth = rest.substr(0, at);
    rest.remove_prefix(at + 1);
    size_t colon = auth.find(':');
    if (colon == absl::string_view::npos) {
      url.password = std::string(auth);  // "redis://secret@host"
    } else {
      url.user = std::string(auth.substr(0, colon));
      url.password = std::string(auth.substr(colon + 1));
    }
  }
  if (url.unix_socket) {
    absl::string_view query;
    if (size_t q = rest.find('?'); q != absl::string_view::npos) {
      query = rest.substr(q + 1);
      rest = rest.substr(0, q);
    }
    if (!absl::StartsWith(rest, "/"))
      return bad("the socket path must be absolute");
    url.path = std::string(rest);
    if (!query.empty() && (!absl::ConsumePrefix(&query, "db=") ||
                           !absl::SimpleAtoi(query, &url.db) || url.db < 0)) {
      return bad("the only query parameter is db=N");
    }
    return url;
  }
  absl::string_view hostport = rest;
  if (size_t slash = rest.find('/'); slash != absl::string_view::npos) {
    hostport = rest.substr(0, slash);
    absl::string_view db = rest.substr(slash + 1);
    if (!db.empty() && (!absl::SimpleAtoi(db, &url.db) || url.db < 0)) {
      return bad("the database must be a number");
    }
  }
  size_t colon = hostport.rfind(':');
  if (absl::StartsWith(hostport, "[")) {  // [::1]:6379
    size_t close = hostport.find(']');
    if (close == absl::string_view::npos) return bad("unclosed '['");
    url.host = std::string(hostport.substr(1, close - 1));
    colon = hostport.size() > close + 1 && hostport[close + 1] == ':'
                ? close + 1
                : absl::string_view::npos;
  } else {
    url.host = std::string(hostport.substr(0, colon));
  }
  if (colon != absl::string_view::npos &&
      (!absl::SimpleAtoi(hostport.substr(colon + 1), &url.port) ||
       url.port <= 0 || url.port > 65535)) {
    return bad("the port must be a number from 1 to 65535");
  }
  if (url.host.empty()) return bad("no host");
  return url;
}

int RedisClusterSlot(absl::string_view key) {
  if (size_t open = key.find('{'); open != absl::string_view::npos) {
    size_t close = key.find('}', open + 1);
    if (close != absl::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  uint16_t crc = 0;  // CRC16/XMODEM: polynomial 0x1021, initial 0
  for (unsigned char byte : key) {
    crc ^= static_cast<uint16_t>(byte) << 8;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<uint16_t>(crc << 1);
    }
  }
  return crc % 16384;
}

RedisClient::RedisClient(RedisUrl url, RedisTimeouts timeouts)
    : url_(std::move(url)), timeouts_(timeouts) {}

RedisClient::~RedisClient() {
  auto api = LoadHiredis();
  for (auto& [name, c] : connections_) {
    if (api.ok() && c != nullptr) (*api)->redisFree(c);
  }
}

void RedisClient::Drop(const std::string& node_name) {
  auto it = connections_.find(node_name);
  if (it == connections_.end()) return;
  if (auto api = LoadHiredis(); api.ok()) (*api)->redisFree(it->second);
  connections_.erase(it);
}

absl::StatusOr<redisContext*> RedisClient::Connect(const std::string& node) {
  if (auto it = connections_.find(node); it != connections_.end()) {
    return it->second;
  }
  absl::StatusOr<const HiredisApi*> api = LoadHiredis();
  if (!api.ok()) return api.status();
  const HiredisApi& h = **api;
  const std::string where = node.empty() ? url_.Redacted() : node;
  redisContext* c = nullptr;
  const timeval connect_tv = absl::ToTimeval(timeouts_.connect);
  if (!node.empty()) {
    size_t colon = node.rfind(':');
    c = h.redisConnectWithTimeout(node.substr(0, colon).c_str(),
                                  std::atoi(node.c_str() + colon + 1),
                                  connect_tv);
  } else if (url_.unix_socket) {
    c = h.redisConnectUnixWithTimeout(url_.path.c_str(), connect_tv);
  } else {
    c = h.redisConnectWithTimeout(url_.host.c_str(), url_.port, connect_tv);
  }
  if (c == nullptr || c->err != 0) {
    absl::Status s = ContextError(c, "connecting to", where);
    if (c != nullptr) h.redisFree(c);
    return s;
  }
  if (h.redisSetTimeout(c, absl::ToTimeval(timeouts_.command)) != REDIS_OK) {
    absl::Status s = ContextError(c, "setting the timeout of", where);
    h.redisFree(c);
    return s;
  }
  connections_[node] = c;
  // Authenticate and pick the database; the password is never quoted.
  std::vector<std::vector<std::string>> setup;
  if (!url_.password.empty()) {
    setup.push_back(
        url_.user.empty()
            ? std::vector<std::string>{"AUTH", url_.password}
            : std::vector<std::string>{"AUTH", url_.user, url_.password});
  }
  if (url_.db != 0 && node.empty()) {
    setup.push_back({"SELECT", absl::StrCat(url_.db)});
  }
  for (const auto& args : setup) {
    absl::StatusOr<RedisReply> r = Send(node, args, /*asking=*/false);
    if (!r.ok()) {
      Drop(node);
      return absl::Status(
          r.status().code(),
          absl::StrCat(args[0] == "AUTH" ? "AUTH" : "SELECT", " on ", where,
                       " failed: ", r.status().message()));
    }
  }
  return c;
}

absl::StatusOr<RedisReply> RedisClient::Send(
    const std::string& node, const std::vector<std::string>& args,
    bool asking) {
  absl::StatusOr<redisContext*> c = Connect(node);
  if (!c.ok()) return c.status();
  const HiredisApi& h = **LoadHiredis();
  const std::string where = node.empty() ? url_.Redacted() : node;
  ScopedNoSigpipe no_sigpipe;
  if (asking) {
    const char* argv[] = {"ASKING"};
    const size_t len[] = {6};
    auto* r = static_cast<redisReply*>(h.redisCommandArgv(*c, 1, argv, len));
    if (r == nullptr) {
      absl::Status s = ContextError(*c, "ASKING on", where);
      Drop(node);
      return s;
    }
    h.freeReplyObject(r);
  }
  std::vector<const char*> argv;
  std::vector<size_t> len;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    len.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(h.redisCommandArgv(
      *c, static_cast<int>(argv.size()), argv.data(), len.data()));
  if (r == nullptr) {
    absl::Status s = ContextError(*c, absl::StrCat(args[0], " on"), where);
    Drop(node);
    return s;
  }
  if (r->type == REDIS_REPLY_ERROR) {
    absl::Status s = absl::FailedPreconditionError(absl::StrCat(
        args[0], " on ", where, ": ", absl::string_view(r->str, r->len)));
    h.freeReplyObject(r);
    return s;
  }
  RedisReply out = Convert(r);
  h.freeReplyObject(r);
  return out;
}

absl::StatusOr<RedisReply> RedisClient::Command(
    const std::vector<std::string>& args, int key_index) {
  std::string node;
  int slot = -1;
  if (key_index >= 0 && key_index < static_cast<int>(args.size())) {
    slot = RedisClusterSlot(args[key_index]);
    if (auto it = slot_nodes_.find(slot); it != slot_nodes_.end()) {
      node = it->second;
    }
  }
  absl::StatusOr<RedisReply> r = Send(node, args, /*asking=*/false);
  if (r.ok() || r.status().code() != absl::StatusCode::kFailedPrecondition) {
    return r;
  }
  // "<command> on <where>: MOVED 3999 10.0.0.2:6379"
  absl::string_view message = r.status().message();
  size_t colon = message.find(": ");
  absl::string_view error =
      colon == absl::string_view::npos ? message : message.substr(colon + 2);
  const bool moved = absl::StartsWith(error, "MOVED ");
  if (!moved && !absl::StartsWith(error, "ASK ")) return r;
  const std::string current_host =
      node.empty() ? (url_.unix_socket ? "127.0.0.1" : url_.host)
                   : node.substr(0, node.rfind(':'));
  std::optional<std::string> target = RedirectTarget(error, current_host);
  if (!target.has_value()) return r;
  ++redirects_;
  if (moved && slot >= 0) slot_nodes_[slot] = *target;
  return Send(*target, args, /*asking=*/!moved);
}

absl::StatusOr<std::optional<std::string>> RedisClient::Get(
    absl::string_view key) {
  absl::StatusOr<RedisReply> r = Command({"GET", std::string(key)});
  if (!r.ok()) return r.status();
  if (r->type == RedisReply::Type::kNil) return std::nullopt;
  if (r->type != RedisReply::Type::kString) {
    return absl::FailedPreconditionError("GET: the reply is not a string");
  }
  return std::move(r->str);
}

absl::Status RedisClient::Set(absl::string_view key, absl::string_view value,
                              int64_t ttl_ms) {
  std::vector<std::string> args = {"SET", std::string(key), std::string(value)};
  if (ttl_ms > 0) {
    args.push_back("PX");
    args.push_back(absl::StrCat(ttl_ms));
  }
  return Command(args).status();
}

}  // namespace fleetjit
