/* wload-skew: skewed random overwrites of an existing file, for uf2fs-bench gc-waf.
 * uf2fs's own code, dependency free (libc and libm only). Build it static so the same binary
 * runs on the host (against a uf2fs FUSE mount) and in the linux-f2fs guest (busybox only):
 *   gcc -O2 -static -o wload-skew wload-skew.c -lm
 * Modes (TOTAL in MiB, BS in bytes; SYNC_EVERY 0 = one fsync at the end only):
 *   wload-skew hotcold FILE TOTAL_MIB BS SEED SYNC_EVERY HOT_PCT HOT_SHARE
 *       HOT_SHARE % of the writes go to the first HOT_PCT % of the file's blocks (the hot
 *       region), the rest to the other blocks; uniform within each region.
 *   wload-skew zipf FILE TOTAL_MIB BS SEED SYNC_EVERY THETA
 *       block ranks drawn from a Zipf(THETA) distribution over all the file's blocks (exact
 *       inverse CDF, 0 <= THETA); rank r goes to block (r * A + B) mod N with A prime to N,
 *       so the hot blocks are spread over the file instead of sitting at its start.
 * Like wload's randwrite: block-aligned pwrite()s without a random map, the first byte of
 * the buffer changed before each write, fsync every SYNC_EVERY writes and once at the end;
 * WLOAD_DIRECT=1 opens the file with O_DIRECT; WLOAD_LATLOG=path writes the per-second log
 * "second,max_latency_us,ops". One summary line, in wload's format:
 *   wload-skew MODE bytes=N ops=N secs=S max_lat_us=L
 * SIGTERM and SIGINT end the run early with the summary of what was written (exit 3).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t state = 88172645463325252ull;
static uint64_t next_random(void) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}
/* uniform in [0, 1) with 53 random bits */
static double unit_random(void) { return (double)(next_random() >> 11) / 9007199254740992.0; }

static double clock_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static void fail(const char *what) {
  fprintf(stderr, "wload-skew: %s: %s\n", what, strerror(errno));
  exit(1);
}

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { (void)sig; stop_requested = 1; }

/* per-second latency log, as wload writes it */
static FILE *lat_file;
static double run_start, second_start, second_max, worst;
static long second_index, second_ops;
static void latency_record(double begin) {
  double end = clock_now(), lat = end - begin;
  if (lat > worst) worst = lat;
  while (end - second_start >= 1.0) {
    if (lat_file) fprintf(lat_file, "%ld,%.0f,%ld\n", second_index, second_max * 1e6, second_ops);
    second_index++;
    second_start += 1.0;
    second_max = 0;
    second_ops = 0;
  }
  if (lat > second_max) second_max = lat;
  second_ops++;
}

static uint64_t gcd(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

static uint64_t parse_u64(const char *s, const char *what) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end) {
    fprintf(stderr, "wload-skew: bad %s: %s\n", what, s);
    exit(2);
  }
  return v;
}

static void usage(void) {
  fprintf(stderr,
          "usage: wload-skew hotcold FILE TOTAL_MIB BS SEED SYNC_EVERY HOT_PCT HOT_SHARE\n"
          "       wload-skew zipf FILE TOTAL_MIB BS SEED SYNC_EVERY THETA\n");
  exit(2);
}

int main(int argc, char **argv) {
  if (argc < 7) usage();
  const char *mode = argv[1], *path = argv[2];
  int hotcold = !strcmp(mode, "hotcold"), zipf = !strcmp(mode, "zipf");
  if ((hotcold && argc != 9) || (zipf && argc != 8) || (!hotcold && !zipf)) usage();
  uint64_t total = parse_u64(argv[3], "TOTAL_MIB") << 20;
  uint64_t bs = parse_u64(argv[4], "BS");
  state = parse_u64(argv[5], "SEED") | 1;
  uint64_t sync_every = parse_u64(argv[6], "SYNC_EVERY");
  if (bs == 0 || bs % 512) {
    fprintf(stderr, "wload-skew: BS must be a multiple of 512\n");
    return 2;
  }

  int fd = open(path, O_WRONLY | (getenv("WLOAD_DIRECT") ? O_DIRECT : 0));
  if (fd < 0) fail(path);
  struct stat st;
  if (fstat(fd, &st)) fail("fstat");
  uint64_t blocks = (uint64_t)st.st_size / bs;
  if (blocks == 0) {
    errno = EINVAL;
    fail("the file is smaller than one block");
  }

  /* hot/cold: the hot region is the first hot_blocks blocks */
  uint64_t hot_blocks = 0, hot_share = 0;
  /* zipf: the cumulative distribution of the ranks, and the rank-to-block permutation */
  double *cdf = NULL;
  uint64_t mult = 1, shift = 0;
  if (hotcold) {
    uint64_t hot_pct = parse_u64(argv[7], "HOT_PCT");
    hot_share = parse_u64(argv[8], "HOT_SHARE");
    if (hot_pct == 0 || hot_pct >= 100 || hot_share > 100) {
      fprintf(stderr, "wload-skew: HOT_PCT in 1..99, HOT_SHARE in 0..100\n");
      return 2;
    }
    hot_blocks = blocks * hot_pct / 100;
    if (hot_blocks == 0) hot_blocks = 1;
    if (hot_blocks >= blocks) hot_blocks = blocks - 1;
    if (hot_blocks == 0) {
      errno = EINVAL;
      fail("the file needs at least two blocks for a hot and a cold region");
    }
  } else {
    char *end;
    double theta = strtod(argv[7], &end);
    if (end == argv[7] || *end || !(theta >= 0)) {
      fprintf(stderr, "wload-skew: bad THETA: %s\n", argv[7]);
      return 2;
    }
    cdf = malloc(sizeof(double) * blocks);
    if (!cdf) fail("malloc");
    double sum = 0;
    for (uint64_t r = 0; r < blocks; r++) {
      sum += pow((double)(r + 1), -theta);
      cdf[r] = sum;
    }
    for (uint64_t r = 0; r < blocks; r++) cdf[r] /= sum;
    /* a multiplier near N * golden ratio, prime to N: neighbouring ranks land far apart */
    mult = (uint64_t)((double)blocks * 0.6180339887498949) | 1;
    while (gcd(mult, blocks) != 1) mult++;
    mult %= blocks;
    if (mult == 0) mult = 1;
    shift = next_random() % blocks;
  }

  char *buf;
  if (posix_memalign((void **)&buf, 4096, bs)) fail("posix_memalign");
  for (uint64_t i = 0; i < bs; i++) buf[i] = (char)next_random();

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);

  const char *lat_path = getenv("WLOAD_LATLOG");
  if (lat_path && !(lat_file = fopen(lat_path, "w"))) fail(lat_path);
  run_start = second_start = clock_now();

  uint64_t bytes = 0, ops = 0;
  while (bytes < total && !stop_requested) {
    uint64_t block;
    if (hotcold) {
      if (next_random() % 100 < hot_share)
        block = next_random() % hot_blocks;
      else
        block = hot_blocks + next_random() % (blocks - hot_blocks);
    } else {
      double u = unit_random();
      uint64_t lo = 0, hi = blocks - 1; /* the first rank whose cdf exceeds u */
      while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (cdf[mid] > u)
          hi = mid;
        else
          lo = mid + 1;
      }
      /* 128-bit product: rank * mult overflows 64 bits only for absurd files, but be exact */
      block = (uint64_t)(((unsigned __int128)lo * mult + shift) % blocks);
    }
    double begin = clock_now();
    buf[0] = (char)next_random();
    ssize_t w = pwrite(fd, buf, bs, (off_t)(block * bs));
    if (w != (ssize_t)bs) {
      if (w >= 0) errno = EIO;
      if (errno == EINTR && stop_requested) break;
      fail("pwrite");
    }
    bytes += bs;
    ops++;
    if (sync_every && ops % sync_every == 0 && fsync(fd)) fail("fsync");
    latency_record(begin);
  }
  if (fsync(fd)) fail("fsync");
  close(fd);
  if (lat_file) {
    fprintf(lat_file, "%ld,%.0f,%ld\n", second_index, second_max * 1e6, second_ops);
    fclose(lat_file);
  }
  printf("wload-skew %s bytes=%llu ops=%llu secs=%.3f max_lat_us=%.0f\n", mode,
         (unsigned long long)bytes, (unsigned long long)ops, clock_now() - run_start, worst * 1e6);
  return stop_requested ? 3 : 0;
}
