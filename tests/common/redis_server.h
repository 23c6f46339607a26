// A private redis-server for tests: on a free loopback port and a unix
// socket in a temp directory, no persistence. Tests that need Redis call
// RedisServer::Start and GTEST_SKIP with `skip_reason` when it fails
// (redis-server not installed: `apt-get install redis-server`, as
// scripts/dev/install-deps does). Kill/Restart/Pause/Resume let a test take
// the server away mid-run.
#ifndef FLEETJIT_TESTS_COMMON_REDIS_SERVER_H_
#define FLEETJIT_TESTS_COMMON_REDIS_SERVER_H_

#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace fleetjit::testing {

class RedisServer {
 public:
  // `extra`: more redis-server arguments ("--requirepass", "pw", ...).
  static std::unique_ptr<RedisServer> Start(
      std::string* skip_reason, std::vector<std::string> extra = {}) {
    std::string binary = FindServer();
    if (binary.empty()) {
      *skip_reason =
          "redis-server not found (apt-get install redis-server, or set "
          "FJ_REDIS_SERVER)";
      return nullptr;
    }
    std::unique_ptr<RedisServer> s(new RedisServer(binary, std::move(extra)));
    if (!s->Launch()) {
      *skip_reason = "redis-server did not start";
      return nullptr;
    }
    return s;
  }

  ~RedisServer() {
    Kill();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  int port() const { return port_; }
  const std::string& socket_path() const { return socket_; }
  std::string tcp_url(const std::string& auth = "") const {
    return "redis://" + (auth.empty() ? "" : auth + "@") +
           "127.0.0.1:" + std::to_string(port_) + "/0";
  }
  std::string unix_url() const { return "unix://" + socket_; }

  // SIGKILL, as a crash would.
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  bool Restart() {
    Kill();
    return Launch();
  }
  // SIGSTOP: connections are accepted by the kernel, nothing answers.
  void Pause() { ::kill(pid_, SIGSTOP); }
  void Resume() { ::kill(pid_, SIGCONT); }

 private:
  RedisServer(std::string binary, std::vector<std::string> extra)
      : binary_(std::move(binary)), extra_(std::move(extra)) {
    char pattern[] = "/tmp/fjredis.XXXXXX";
    dir_ = ::mkdtemp(pattern);
    socket_ = dir_ + "/redis.sock";
    port_ = FreePort();
  }

  static std::string FindServer() {
    if (const char* v = std::getenv("FJ_REDIS_SERVER"); v && *v) return v;
    std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
    path += ":/usr/bin:/usr/sbin:/usr/local/bin";
    size_t start = 0;
    while (start <= path.size()) {
      size_t end = path.find(':', start);
      if (end == std::string::npos) end = path.size();
      std::string candidate = path.substr(start, end - start) + "/redis-server";
      if (end > start && ::access(candidate.c_str(), X_OK) == 0)
        return candidate;
      start = end + 1;
    }
    return "";
  }

  static int FreePort() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port = ntohs(addr.sin_port);
    }
    ::close(fd);
    return port;
  }

  bool Launch() {
    std::vector<std::string> args = {binary_,
                                     "--port",
                                     std::to_string(port_),
                                     "--bind",
                                     "127.0.0.1",
                                     "--unixsocket",
                                     socket_,
                                     "--unixsocketperm",
                                     "700",
                                     "--dir",
                                     dir_,
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--daemonize",
                                     "no",
                                     "--loglevel",
                                     "warning",
                                     "--logfile",
                                     dir_ + "/redis.log"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (::posix_spawn(&pid_, binary_.c_str(), nullptr, nullptr, argv.data(),
                      environ) != 0) {
      pid_ = -1;
      return false;
    }
    // Ready when the unix socket answers a PING (auth errors count too).
    for (int i = 0; i < 500; ++i) {
      if (Ping()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  bool Ping() const {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_.c_str(), sizeof(addr.sun_path) - 1);
    bool ok = false;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        ::write(fd, "PING\r\n", 6) == 6) {
      char reply[64] = {};
      ok = ::read(fd, reply, sizeof(reply) - 1) > 0;
    }
    ::close(fd);
    return ok;
  }

  const std::string binary_;
  const std::vector<std::string> extra_;
  std::string dir_, socket_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace fleetjit::testing

#endif  // FLEETJIT_TESTS_COMMON_REDIS_SERVER_H_
