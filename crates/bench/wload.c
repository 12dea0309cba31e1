/* wload: the plain workloads of uf2fs-bench gc-waf (the skewed ones are in wload-skew.c).
 * uf2fs's own code, libc only. Build it static so that one binary runs on the host (against
 * a uf2fs FUSE mount) and in the tools/linux-f2fs guest (busybox only), and both sides of a
 * comparison run exactly the same program:
 *   gcc -O2 -static -o wload wload.c
 *
 *   wload fill FILE MIB
 *       creates FILE (truncating it) and writes MIB MiB in 1 MiB writes, then fsync
 *   wload randwrite FILE TOTAL_MIB [BS [SEED [SYNC_EVERY]]]
 *       TOTAL_MIB MiB of BS-byte (default 4096) overwrites of an existing FILE at offsets
 *       drawn uniformly among its whole BS blocks, with repeats (no random map, as fio's
 *       norandommap); fsync every SYNC_EVERY writes (0, the default: only at the end)
 *   wload smallfiles DIR KIB
 *       creates DIR/f0, DIR/f1... of KIB KiB each until the file system is full (ENOSPC
 *       ends the run normally; the file that did not fit is removed), then sync
 *   wload rewrite DIR COUNT [BS [SEED]]
 *       COUNT times: opens a random DIR/fN (as smallfiles made them) with O_SYNC and writes
 *       BS bytes at a random whole-BS offset inside it
 *
 * Environment: WLOAD_DIRECT=1 opens randwrite's file with O_DIRECT (the buffer is aligned);
 * WLOAD_LATLOG=PATH writes one line per second of the run, "second,max_latency_us,ops"
 * (the slowest write that ended in that second, and how many ended in it).
 * Every write's first eight bytes are changed, so no two writes carry the same block.
 * One summary line on stdout, which gc-waf parses:
 *   wload MODE bytes=N ops=N secs=S max_lat_us=L
 * SIGTERM or SIGINT ends a run early, still printing the summary of what was done (exit 3).
 * The random sequence is splitmix64 from SEED (default 1): the same arguments give the same
 * offsets on both sides.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t seed_state = 1;
static uint64_t random64(void) {
  uint64_t z = (seed_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
/* uniform in [0, n), n > 0, without modulo bias */
static uint64_t below(uint64_t n) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % n, r;
  do r = random64();
  while (r >= limit);
  return r % n;
}

static void die(const char *what) {
  fprintf(stderr, "wload: %s: %s\n", what, strerror(errno));
  exit(1);
}
static uint64_t number(const char *s, const char *what) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end) {
    fprintf(stderr, "wload: bad %s: %s\n", what, s);
    exit(2);
  }
  return v;
}

static volatile sig_atomic_t stopping;
static void on_stop(int sig) {
  (void)sig;
  stopping = 1;
}

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---- accounting: bytes, ops, latencies -------------------------------------------------- */
static const char *mode;
static uint64_t bytes, ops;
static double started, worst;
static FILE *latlog;
static long sec_index, sec_ops;
static double sec_worst;

static void log_seconds_until(double t) {
  while (t - started >= (double)(sec_index + 1)) {
    if (latlog) fprintf(latlog, "%ld,%.0f,%ld\n", sec_index, sec_worst * 1e6, sec_ops);
    sec_index++;
    sec_ops = 0;
    sec_worst = 0;
  }
}
static void done_op(double began, uint64_t n) {
  double now = seconds(), lat = now - began;
  log_seconds_until(now);
  if (lat > sec_worst) sec_worst = lat;
  if (lat > worst) worst = lat;
  sec_ops++;
  ops++;
  bytes += n;
}
static int finish(int code) {
  if (latlog) {
    fprintf(latlog, "%ld,%.0f,%ld\n", sec_index, sec_worst * 1e6, sec_ops);
    fclose(latlog);
  }
  printf("wload %s bytes=%llu ops=%llu secs=%.3f max_lat_us=%.0f\n", mode,
         (unsigned long long)bytes, (unsigned long long)ops, seconds() - started, worst * 1e6);
  return code;
}

static unsigned char *buffer(size_t n) {
  unsigned char *b;
  if (posix_memalign((void **)&b, 4096, n < 4096 ? 4096 : n)) die("posix_memalign");
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)random64();
  return b;
}
/* a fresh stamp in the first bytes, so that every write carries new content */
static void stamp(unsigned char *b, size_t n) {
  uint64_t r = random64();
  memcpy(b, &r, n < 8 ? n : 8);
}

/* ---- modes ------------------------------------------------------------------------------ */

static int fill(const char *path, uint64_t mib) {
  size_t bs = 1 << 20;
  unsigned char *b = buffer(bs);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) die(path);
  for (uint64_t i = 0; i < mib && !stopping; i++) {
    double t = seconds();
    stamp(b, bs);
    if (write(fd, b, bs) != (ssize_t)bs) die("write");
    done_op(t, bs);
  }
  if (fsync(fd)) die("fsync");
  close(fd);
  return 0;
}

static int randwrite(const char *path, uint64_t total, size_t bs, uint64_t sync_every) {
  int flags = O_WRONLY;
  const char *direct = getenv("WLOAD_DIRECT");
  if (direct && *direct && strcmp(direct, "0")) flags |= O_DIRECT;
  int fd = open(path, flags);
  if (fd < 0) die(path);
  struct stat st;
  if (fstat(fd, &st)) die("fstat");
  uint64_t blocks = (uint64_t)st.st_size / bs;
  if (!blocks) {
    fprintf(stderr, "wload: %s holds no whole %zu-byte block\n", path, bs);
    return 1;
  }
  unsigned char *b = buffer(bs);
  while (bytes < total && !stopping) {
    off_t at = (off_t)(below(blocks) * bs);
    double t = seconds();
    stamp(b, bs);
    if (pwrite(fd, b, bs, at) != (ssize_t)bs) die("pwrite");
    if (sync_every && (ops + 1) % sync_every == 0 && fsync(fd)) die("fsync");
    done_op(t, bs);
  }
  if (fsync(fd)) die("fsync");
  close(fd);
  return 0;
}

static int smallfiles(const char *dir, size_t size) {
  unsigned char *b = buffer(size);
  if (mkdir(dir, 0755) && errno != EEXIST) die(dir);
  char path[4096];
  for (uint64_t i = 0; !stopping; i++) {
    snprintf(path, sizeof path, "%s/f%llu", dir, (unsigned long long)i);
    double t = seconds();
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
      if (errno == ENOSPC) break;
      die(path);
    }
    stamp(b, size);
    ssize_t n = write(fd, b, size);
    int err = errno;
    close(fd);
    if (n != (ssize_t)size) {
      unlink(path);
      if (n < 0 && err != ENOSPC) {
        errno = err;
        die("write");
      }
      break;
    }
    done_op(t, size);
  }
  sync();
  return 0;
}

static int rewrite(const char *dir, uint64_t count, size_t bs) {
  uint64_t files = 0;
  DIR *d = opendir(dir);
  if (!d) die(dir);
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] == 'f') files++;
  closedir(d);
  if (!files) {
    fprintf(stderr, "wload: no f* files in %s (run smallfiles first)\n", dir);
    return 1;
  }
  unsigned char *b = buffer(bs);
  char path[4096];
  while (ops < count && !stopping) {
    snprintf(path, sizeof path, "%s/f%llu", dir, (unsigned long long)below(files));
    double t = seconds();
    int fd = open(path, O_WRONLY | O_SYNC);
    if (fd < 0) die(path);
    struct stat st;
    if (fstat(fd, &st)) die("fstat");
    uint64_t blocks = (uint64_t)st.st_size / bs;
    off_t at = (off_t)(below(blocks ? blocks : 1) * bs);
    stamp(b, bs);
    if (pwrite(fd, b, bs, at) != (ssize_t)bs) die("pwrite");
    close(fd);
    done_op(t, bs);
  }
  return 0;
}

static int usage(void) {
  fprintf(stderr, "usage: wload fill FILE MIB\n"
                  "       wload randwrite FILE TOTAL_MIB [BS [SEED [SYNC_EVERY]]]\n"
                  "       wload smallfiles DIR KIB\n"
                  "       wload rewrite DIR COUNT [BS [SEED]]\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 4) return usage();
  mode = argv[1];
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  const char *log = getenv("WLOAD_LATLOG");
  if (log && *log && !(latlog = fopen(log, "w"))) die(log);
  size_t bs = argc > 4 ? (size_t)number(argv[4], "BS") : 4096;
  if (!bs) return usage();
  if (argc > 5) seed_state = number(argv[5], "SEED");
  started = seconds();
  int rc;
  if (!strcmp(mode, "fill") && argc == 4) rc = fill(argv[2], number(argv[3], "MIB"));
  else if (!strcmp(mode, "randwrite") && argc <= 7)
    rc = randwrite(argv[2], number(argv[3], "TOTAL_MIB") << 20, bs,
                   argc > 6 ? number(argv[6], "SYNC_EVERY") : 0);
  else if (!strcmp(mode, "smallfiles") && argc == 4)
    rc = smallfiles(argv[2], (size_t)number(argv[3], "KIB") << 10);
  else if (!strcmp(mode, "rewrite") && argc <= 6)
    rc = rewrite(argv[2], number(argv[3], "COUNT"), bs);
  else return usage();
  return finish(rc ? rc : stopping ? 3 : 0);
}
