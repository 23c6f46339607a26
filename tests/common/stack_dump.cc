// Every thread's stack on SIGQUIT, for a test binary that hangs where no
// debugger is installed (the GPU host has no gdb). scripts/gpu-host/gpu-check
// sends SIGQUIT to a test binary that runs past its time limit, then kills
// it. Linked into every GoogleTest binary (fj_test_stacks): a constructor
// installs the handlers before main.
//
// The thread that takes SIGQUIT prints its own stack, then asks every other
// thread of the process (listed from /proc/self/task) in turn, with a
// real-time signal, to print its own, waiting up to a second for each. Only
// async-signal-safe calls once inside a handler (raw open/getdents64/write,
// backtrace_symbols_fd; backtrace() is warmed up at install time so its
// unwinder is already loaded): a process hung on a lock that malloc or
// stdio holds can still print. The frames are "binary(+offset) [address]":
// addr2line -f -C -e BINARY OFFSET on the build machine names them (the
// staged binaries are stripped; the build tree's are not).
#include <dirent.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace {

std::atomic<int> answered{0};

int SelfTid() { return static_cast<int>(syscall(SYS_gettid)); }

void WriteText(const char* text) {
  size_t n = 0;
  while (text[n] != '\0') ++n;
  while (n > 0) {
    ssize_t w = write(STDERR_FILENO, text, n);
    if (w <= 0) return;
    text += w;
    n -= static_cast<size_t>(w);
  }
}

// Decimal, into `out` (at least 12 bytes).
const char* Decimal(long value, char* out) {
  char digits[24];
  int n = 0;
  unsigned long v = value < 0 ? 0UL - static_cast<unsigned long>(value)
                              : static_cast<unsigned long>(value);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && n < 20);
  int i = 0;
  if (value < 0) out[i++] = '-';
  while (n > 0) out[i++] = digits[--n];
  out[i] = '\0';
  return out;
}

// The thread's name from /proc/self/task/TID/comm, into `out`.
void ThreadName(int tid, char* out, size_t size) {
  char path[64] = "/proc/self/task/";
  char number[24];
  size_t i = 16;
  for (const char* p = Decimal(tid, number); *p != '\0'; ++p) path[i++] = *p;
  for (const char* p = "/comm"; *p != '\0'; ++p) path[i++] = *p;
  path[i] = '\0';
  out[0] = '\0';
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, out, size - 1);
  close(fd);
  if (n < 0) n = 0;
  while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\0')) --n;
  out[n] = '\0';
}

void PrintOwnStack() {
  char number[24];
  char name[32];
  const int tid = SelfTid();
  ThreadName(tid, name, sizeof(name));
  WriteText("---- thread ");
  WriteText(Decimal(tid, number));
  WriteText(" (");
  WriteText(name);
  WriteText(tid == getpid() ? ", main" : "");
  WriteText("):\n");
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
}

int AskSignal() { return SIGRTMAX - 3; }

void OnAsk(int) {
  const int saved = errno;
  PrintOwnStack();
  answered.fetch_add(1, std::memory_order_release);
  errno = saved;
}

void SleepMs(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, nullptr);
}

struct LinuxDirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

void OnQuit(int) {
  static std::atomic<bool> dumping{false};
  if (dumping.exchange(true)) return;
  const int saved = errno;
  char number[24];
  WriteText("==== SIGQUIT: the stacks of every thread of process ");
  WriteText(Decimal(getpid(), number));
  WriteText(" (frames: addr2line -f -C -e BINARY OFFSET)\n");
  const int self = SelfTid();
  PrintOwnStack();
  const int dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    alignas(LinuxDirent64) char buffer[4096];
    for (;;) {
      const long got = syscall(SYS_getdents64, dir, buffer, sizeof(buffer));
      if (got <= 0) break;
      for (long at = 0; at < got;) {
        const auto* entry = reinterpret_cast<const LinuxDirent64*>(buffer + at);
        at += entry->d_reclen;
        long tid = 0;
        bool numeric = entry->d_name[0] != '\0';
        for (const char* p = entry->d_name; *p != '\0'; ++p) {
          if (*p < '0' || *p > '9') numeric = false;
          tid = tid * 10 + (*p - '0');
        }
        if (!numeric || tid == self) continue;
        const int before = answered.load(std::memory_order_acquire);
        if (syscall(SYS_tgkill, getpid(), tid, AskSignal()) != 0) continue;
        int waited = 0;
        while (answered.load(std::memory_order_acquire) == before &&
               waited < 1000) {
          SleepMs(5);
          waited += 5;
        }
        if (answered.load(std::memory_order_acquire) == before) {
          WriteText("---- thread ");
          WriteText(Decimal(tid, number));
          WriteText(": did not answer within 1 s (signals blocked?)\n");
        }
      }
    }
    close(dir);
  }
  WriteText("==== end of stacks\n");
  errno = saved;
}

__attribute__((constructor)) void InstallStackDump() {
  void* warm[1];
  backtrace(warm, 1);  // loads the unwinder now, not inside a handler
  struct sigaction action = {};
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  action.sa_handler = OnAsk;
  sigaction(AskSignal(), &action, nullptr);
  action.sa_handler = OnQuit;
  sigaction(SIGQUIT, &action, nullptr);
}

}  // namespace
