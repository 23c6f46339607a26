/* Definitions that let code compiled against newer glibc headers (this
 * machine's static libstdc++.a and LLVM archives, Debian 12: glibc 2.36)
 * link against an older glibc (the Debian 11 sysroot: 2.31), for the
 * wheel's glibc-floor build (cmake/glibc_floor/toolchain.cmake). Each is a
 * symbol those archives reference that glibc 2.31 does not define. Every
 * definition is hidden: it binds inside the library or program it is linked
 * into and never interposes on the system's glibc where that has its own.
 *
 * Each one keeps the meaning the callers rely on:
 * - __libc_single_threaded (glibc 2.32): libstdc++ skips atomic reference
 *   counting while it is nonzero. 0 means "the process may have threads",
 *   so every count stays atomic: correct in every process, only never the
 *   single-threaded shortcut.
 * - arc4random (glibc 2.36): std::random_device's "arc4random" token. The
 *   same contract (never fails) from getrandom(2), which glibc has had
 *   since 2.25, with /dev/urandom for a kernel without it; it aborts only
 *   where neither source exists, as arc4random itself does.
 * - mallinfo2 (glibc 2.33): LLVM's Process::GetMallocUsage. Filled from
 *   mallinfo(), whose int fields wrap above 2 GiB: a statistic, used by
 *   LLVM's -time-passes style reports, never by fleetjit's JIT. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

#define FJ_COMPAT __attribute__((visibility("hidden")))

FJ_COMPAT char __libc_single_threaded = 0;

static void fill_random(void* buf, size_t n) {
  unsigned char* p = buf;
  while (n > 0) {
    ssize_t got = getrandom(p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) break;
    p += got;
    n -= (size_t)got;
  }
  if (n == 0) return;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  while (fd >= 0 && n > 0) {
    ssize_t got = read(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    p += got;
    n -= (size_t)got;
  }
  if (fd >= 0) close(fd);
  if (n != 0) abort();
}

FJ_COMPAT uint32_t arc4random(void) {
  uint32_t v;
  fill_random(&v, sizeof v);
  return v;
}

/* glibc 2.33's struct mallinfo2: mallinfo's fields as size_t. */
struct fj_mallinfo2 {
  size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks,
      fordblks, keepcost;
};

FJ_COMPAT struct fj_mallinfo2 mallinfo2(void) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  struct mallinfo m = mallinfo();
#pragma GCC diagnostic pop
  struct fj_mallinfo2 r = {(unsigned)m.arena,    (unsigned)m.ordblks,
                           (unsigned)m.smblks,   (unsigned)m.hblks,
                           (unsigned)m.hblkhd,   (unsigned)m.usmblks,
                           (unsigned)m.fsmblks,  (unsigned)m.uordblks,
                           (unsigned)m.fordblks, (unsigned)m.keepcost};
  return r;
}
