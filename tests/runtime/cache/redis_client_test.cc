// The Redis client: URL parsing and redaction, cluster slots, commands
// against a private redis-server (TCP, unix socket, AUTH with a user,
// SELECT), MOVED redirection on a real two-node cluster, and time limits.
#include "runtime/cache/redis_client.h"

#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/common/redis_server.h"

namespace fleetjit {
namespace {

using ::fleetjit::testing::RedisServer;

#define START_REDIS_OR_SKIP(var, ...)                        \
  std::string var##_skip;                                    \
  auto var = RedisServer::Start(&var##_skip, ##__VA_ARGS__); \
  if (var == nullptr) GTEST_SKIP() << var##_skip

TEST(RedisUrlTest, Parses) {
  auto u = ParseRedisUrl("redis://alice:s3cret@cache.internal:6380/4");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_FALSE(u->unix_socket);
  EXPECT_EQ(u->host, "cache.internal");
  EXPECT_EQ(u->port, 6380);
  EXPECT_EQ(u->user, "alice");
  EXPECT_EQ(u->password, "s3cret");
  EXPECT_EQ(u->db, 4);
  EXPECT_EQ(u->Redacted(), "redis://alice:***@cache.internal:6380/4");

  u = ParseRedisUrl("redis://:pw@10.0.0.1");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->user, "");
  EXPECT_EQ(u->password, "pw");
  EXPECT_EQ(u->port, 6379);
  EXPECT_EQ(u->db, 0);

  u = ParseRedisUrl("redis://[::1]:7000");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 7000);

  u = ParseRedisUrl("unix://:pw@/run/redis/redis.sock?db=2");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_TRUE(u->unix_socket);
  EXPECT_EQ(u->path, "/run/redis/redis.sock");
  EXPECT_EQ(u->db, 2);
  EXPECT_EQ(u->Redacted(), "unix://:***@/run/redis/redis.sock?db=2");
}

TEST(RedisUrlTest, RefusesWithoutQuotingThePassword) {
  for (const char* bad :
       {"http://u:topsecret@h", "redis://u:topsecret@h:99999",
        "redis://u:topsecret@h/x", "unix://u:topsecret@relative.sock",
        "redis://u:topsecret@"}) {
    auto u = ParseRedisUrl(bad);
    EXPECT_EQ(u.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_FALSE(absl::StrContains(u.status().message(), "topsecret"))
        << u.status();
  }
  auto tls = ParseRedisUrl("rediss://u:topsecret@h:6380");
  EXPECT_EQ(tls.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(tls.status().message(), "TLS"));
  EXPECT_FALSE(absl::StrContains(tls.status().message(), "topsecret"));
}

TEST(RedisUrlTest, ClusterSlots) {
  // Values from the Redis Cluster specification and redis-cli
  // CLUSTER KEYSLOT.
  EXPECT_EQ(RedisClusterSlot("123456789"), 0x31C3 % 16384);
  EXPECT_EQ(RedisClusterSlot("foo"), 12182);
  EXPECT_EQ(RedisClusterSlot("{user1000}.following"),
            RedisClusterSlot("{user1000}.followers"));
  EXPECT_EQ(RedisClusterSlot("foo{}{bar}"), RedisClusterSlot("foo{}{bar}"));
  EXPECT_EQ(RedisClusterSlot("foo{bar}"), RedisClusterSlot("bar"));
}

TEST(RedisClientTest, GetSetOverTcpAndUnixSocket) {
  START_REDIS_OR_SKIP(server);
  for (const std::string& text : {server->tcp_url(), server->unix_url()}) {
    SCOPED_TRACE(text);
    RedisClient c(*ParseRedisUrl(text), RedisTimeouts{});
    ASSERT_TRUE(c.Set("k", std::string(100000, 'x'), 0).ok());
    auto v = c.Get("k");
    ASSERT_TRUE(v.ok()) << v.status();
    ASSERT_TRUE(v->has_value());
    EXPECT_EQ(**v, std::string(100000, 'x'));
    auto none = c.Get("absent");
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(none->has_value());
  }
  RedisClient c(*ParseRedisUrl(server->tcp_url()), RedisTimeouts{});
  ASSERT_TRUE(c.Set("ttl", "v", 50).ok());
  auto ttl = c.Command({"PTTL", "ttl"});
  ASSERT_TRUE(ttl.ok());
  EXPECT_GT(ttl->integer, 0);
  EXPECT_LE(ttl->integer, 50);
}

TEST(RedisClientTest, AuthWithUserAndDatabase) {
  START_REDIS_OR_SKIP(server, {"--requirepass", "defaultpw"});
  RedisClient admin(*ParseRedisUrl(server->tcp_url(":defaultpw")),
                    RedisTimeouts{});
  ASSERT_TRUE(
      admin
          .Command({"ACL", "SETUSER", "fleet", "on", ">fleetpw", "~*", "+@all"},
                   -1)
          .ok());
  RedisClient user(*ParseRedisUrl("redis://fleet:fleetpw@127.0.0.1:" +
                                  std::to_string(server->port()) + "/3"),
                   RedisTimeouts{});
  ASSERT_TRUE(user.Set("k", "in db 3", 0).ok());
  auto elsewhere = admin.Get("k");  // db 0
  ASSERT_TRUE(elsewhere.ok());
  EXPECT_FALSE(elsewhere->has_value());

  RedisClient wrong(*ParseRedisUrl("redis://fleet:WRONGPW@127.0.0.1:" +
                                   std::to_string(server->port())),
                    RedisTimeouts{});
  absl::Status s = wrong.Set("k", "v", 0);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "AUTH")) << s;
  EXPECT_FALSE(absl::StrContains(s.message(), "WRONGPW")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "***")) << s;
}

TEST(RedisClientTest, DeadAndHungServersFailWithinTheTimeouts) {
  START_REDIS_OR_SKIP(server);
  RedisTimeouts t{absl::Milliseconds(50), absl::Milliseconds(50)};
  RedisClient c(*ParseRedisUrl(server->tcp_url()), t);
  ASSERT_TRUE(c.Set("k", "v", 0).ok());
  server->Pause();
  auto start = std::chrono::steady_clock::now();
  auto hung = c.Get("k");
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  EXPECT_EQ(hung.status().code(), absl::StatusCode::kDeadlineExceeded)
      << hung.status();
  EXPECT_LT(ms, 50 + 100) << "command timeout 50 ms";
  server->Resume();
  server->Kill();
  start = std::chrono::steady_clock::now();
  auto dead = c.Get("k");  // the dropped connection reconnects: refused
  ms = std::chrono::duration<double, std::milli>(
           std::chrono::steady_clock::now() - start)
           .count();
  EXPECT_EQ(dead.status().code(), absl::StatusCode::kUnavailable)
      << dead.status();
  EXPECT_LT(ms, 50 + 100);
  ASSERT_TRUE(server->Restart());
  EXPECT_TRUE(c.Get("k").ok());  // reconnects
}

// Two cluster nodes: A serves every slot, B none. A client pointed at B
// gets MOVED, follows it, and remembers the slot.
TEST(RedisClientTest, FollowsMovedOnARealCluster) {
  START_REDIS_OR_SKIP(
      a, {"--cluster-enabled", "yes", "--cluster-config-file", "nodes-a.conf"});
  START_REDIS_OR_SKIP(
      b, {"--cluster-enabled", "yes", "--cluster-config-file", "nodes-b.conf"});
  RedisClient ca(*ParseRedisUrl(a->tcp_url()), RedisTimeouts{});
  RedisClient cb(*ParseRedisUrl(b->tcp_url()), RedisTimeouts{});
  ASSERT_TRUE(ca.Command({"CLUSTER", "ADDSLOTSRANGE", "0", "16383"}, -1).ok());
  ASSERT_TRUE(
      cb.Command({"CLUSTER", "MEET", "127.0.0.1", std::to_string(a->port())},
                 -1)
          .ok());
  // Wait for both nodes to see every slot served (B learns by gossip).
  auto ok = [](RedisClient& c) {
    auto info = c.Command({"CLUSTER", "INFO"}, -1);
    return info.ok() && absl::StrContains(info->str, "cluster_state:ok");
  };
  bool learned = false;
  for (int i = 0; i < 500 && !learned; ++i) {
    learned = ok(ca) && ok(cb);
    if (!learned) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(learned) << "the two nodes did not form a cluster";
  RedisClient c(*ParseRedisUrl(b->tcp_url()), RedisTimeouts{});
  absl::Status set = c.Set("fleetjit:e:abc", "value", 0);
  ASSERT_TRUE(set.ok()) << set;
  EXPECT_EQ(c.redirects(), 1u);
  auto v = c.Get("fleetjit:e:abc");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->value_or(""), "value");
  EXPECT_EQ(c.redirects(), 1u) << "the slot was remembered";
  auto direct = ca.Get("fleetjit:e:abc");
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(direct->value_or(""), "value") << "stored on node A";
}

}  // namespace
}  // namespace fleetjit
