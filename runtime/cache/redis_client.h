// A small synchronous Redis client for the remote cache tier, on hiredis
// 0.14 (dlopen'ed, see platform/hiredis_api.h), with hard time limits.
//
//   FJ_ASSIGN_OR_RETURN(RedisUrl url,
//   ParseRedisUrl("redis://:pw@cache:6379/2"),
//                       "remote cache");
//   RedisClient client(url, RedisTimeouts{});
//   FJ_RETURN_IF_ERROR(client.Set("k", "v", /*ttl_ms=*/0), "publishing");
//   FJ_ASSIGN_OR_RETURN(std::optional<std::string> v, client.Get("k"));
//
// URLs: redis://[[user]:password@]host[:port][/db], and
// unix://[[user]:password@]/path/to.sock[?db=N]. rediss:// (TLS) is refused
// with UNIMPLEMENTED: Debian 12's hiredis 0.14 has no TLS (libhiredis_ssl
// came with hiredis 1.0). A password never appears in a message or log
// line: they show RedisUrl::Redacted().
//
// Time limits. Connecting waits at most connect_timeout; each command's
// reads and writes at most command_timeout each (hiredis sets SO_RCVTIMEO /
// SO_SNDTIMEO). A timeout is DEADLINE_EXCEEDED, any other I/O failure
// UNAVAILABLE; either drops the connection, and the next call reconnects.
// A server reply of type error is FAILED_PRECONDITION with its text. Writes
// to a socket the server closed raise no SIGPIPE: it is blocked in the
// calling thread for the duration of each command and discarded.
//
// Redis Cluster: a MOVED reply ("MOVED <slot> <host>:<port>") sends the
// command once more to that node, and the slot is remembered so later keys
// of that slot go there directly; an ASK reply sends ASKING and the command
// once to the named node. One redirect per command: a second one is an
// error. (docs/fleet-cache.md: what a full cluster client would add.)
//
// Not thread-safe: one client per thread at a time (RemoteTier keeps a
// small pool).
#ifndef FLEETJIT_RUNTIME_CACHE_REDIS_CLIENT_H_
#define FLEETJIT_RUNTIME_CACHE_REDIS_CLIENT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

struct redisContext;

namespace fleetjit {

struct RedisUrl {
  bool unix_socket = false;
  std::string host;  // TCP
  int port = 6379;
  std::string path;  // unix socket
  std::string user;  // "" = the default user (AUTH <password>)
  std::string password;
  int db = 0;
  // The URL with the password replaced by "***".
  std::string Redacted() const;
};

// INVALID_ARGUMENT for a malformed URL, UNIMPLEMENTED for rediss://. The
// messages quote the URL redacted.
absl::StatusOr<RedisUrl> ParseRedisUrl(absl::string_view url);

// `text` with anything between "://" and the last "@" replaced by "***",
// for messages about a URL that may not parse.
std::string RedactUrl(absl::string_view text);

// The Redis Cluster hash slot of `key` (CRC16/XMODEM mod 16384, honouring
// a {hash tag}).
int RedisClusterSlot(absl::string_view key);

struct RedisTimeouts {
  absl::Duration connect = absl::Milliseconds(50);
  absl::Duration command = absl::Milliseconds(50);
};

// A reply, errors excluded (they become statuses).
struct RedisReply {
  enum class Type { kNil, kString, kStatus, kInteger, kArray };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus
  long long integer = 0;
  std::vector<RedisReply> elements;
};

class RedisClient {
 public:
  // Does no I/O: the first command connects.
  RedisClient(RedisUrl url, RedisTimeouts timeouts);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // The value of `key`, nullopt if it has none.
  absl::StatusOr<std::optional<std::string>> Get(absl::string_view key);
  // SET key value [PX ttl_ms] (no expiry when ttl_ms <= 0).
  absl::Status Set(absl::string_view key, absl::string_view value,
                   int64_t ttl_ms);
  // Any command; `key_index` names the argument that is the key (for
  // cluster routing), -1 for none.
  absl::StatusOr<RedisReply> Command(const std::vector<std::string>& args,
                                     int key_index = 1);

  const RedisUrl& url() const { return url_; }
  uint64_t redirects() const { return redirects_; }

 private:
  // The connection to `node_name` ("" = the URL's node), connected and
  // authenticated.
  absl::StatusOr<redisContext*> Connect(const std::string& node_name);
  absl::StatusOr<RedisReply> Send(const std::string& node_name,
                                  const std::vector<std::string>& args,
                                  bool asking);
  void Drop(const std::string& node_name);

  const RedisUrl url_;
  const RedisTimeouts timeouts_;
  std::map<std::string, redisContext*> connections_;
  absl::flat_hash_map<int, std::string> slot_nodes_;  // learned from MOVED
  uint64_t redirects_ = 0;
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_CACHE_REDIS_CLIENT_H_
