/* treeview: one line per entry of a directory tree, so that two views of the same file
 * system can be compared line for line: Linux's (in the tools/linux-f2fs guest), uf2fs's
 * (a FUSE mount, or what `uf2fs extract` wrote) and a source tree on the host.
 *
 * Build it static, so that one binary runs both in the guest (busybox only) and on the host:
 *   gcc -O2 -static -o treeview tools/treeview.c
 *
 *   treeview [-f FIELDS] DIR          the view of DIR, sorted by path (byte order)
 *   treeview --setxattr PATH NAME [HEX]
 *                                     sets one xattr (value given in hex, empty if omitted)
 *                                     on PATH itself, not on a symlink's target: the guest's
 *                                     busybox has no setfattr
 *
 * A line is the path relative to DIR ("." for DIR itself), then tab-separated key=value
 * fields, in this order when chosen. FIELDS is a comma list; the default is every field but
 * blocks.
 *   type    f d l c b p s (regular, directory, symlink, char/block device, fifo, socket)
 *   mode    permission and set-id/sticky bits, octal
 *   uid gid owner numbers
 *   size    bytes; "-" for a directory (its size is the file system's own business)
 *   blocks  st_blocks (512-byte units); not in the default set, as it differs by design
 *   mtime   nanoseconds since the epoch; "-" for a symlink (not every writer keeps it)
 *   hash    16 hex digits over the bytes of a regular file, "-" otherwise (see below)
 *   target  a symlink's target, "-" otherwise
 *   links   for a non-directory with more than one link: the first path of the tree, in
 *           sorted order, that names the same inode (stable across views, unlike inode
 *           numbers); "-" otherwise
 *   xattr   COUNT:16 hex digits over the names and values of the extended attributes, in
 *           name order, leaving out system.* (ACLs and the like are the file system's own
 *           encoding); "-" when there are none
 *   rdev    MAJOR:MINOR of a device, "-" otherwise
 *
 * The content hash reads a file block by block (4 KiB). A block that reads as all zeros adds
 * nothing, so a hole and written zeros hash alike; every other block adds a 64-bit digest of
 * its index and bytes (addition, so the order of reading does not matter), and the file size
 * is mixed in at the end. Holes reported by SEEK_DATA/SEEK_HOLE are not read, which keeps a
 * 12 GiB sparse file cheap in the emulated guest. Linux 6.1's SEEK_DATA skips the first block
 * of a compressed F2FS cluster (its COMPRESS_ADDR slot), so reading starts from the data
 * offset rounded down to 1 MiB, the largest cluster (256 blocks), and a hole shorter than
 * that is read through (a released compressed cluster reports one after its compressed
 * blocks): that way the hash is the hash of the bytes a reader sees on every file system.
 *
 * Exit status: 0, or 1 when some entry could not be read (each such failure is reported on
 * stderr and its field printed as "?"), or 2 on a usage error.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#define BLOCK 4096
#define CLUSTER_MAX (1 << 20)

enum field { F_TYPE, F_MODE, F_UID, F_GID, F_SIZE, F_BLOCKS, F_MTIME, F_HASH, F_TARGET,
             F_LINKS, F_XATTR, F_RDEV, F_COUNT };
static const char *field_names[F_COUNT] = {"type", "mode", "uid", "gid", "size", "blocks",
                                           "mtime", "hash", "target", "links", "xattr", "rdev"};
static int chosen[F_COUNT];
static int status;

struct entry {
  char *path;     /* full path, as opened */
  const char *rel;/* relative to the root, "." for the root */
  struct stat st;
  const char *group; /* hard-link group, or NULL */
};
static struct entry *entries;
static size_t n_entries, cap_entries;
static size_t root_len;

static void complain(const char *path, const char *what) {
  fprintf(stderr, "treeview: %s: %s: %s\n", path, what, strerror(errno));
  status = 1;
}

static void *grow(void *p, size_t n) {
  void *q = realloc(p, n);
  if (!q) {
    fprintf(stderr, "treeview: out of memory\n");
    exit(2);
  }
  return q;
}

/* ---- hashing ---------------------------------------------------------------------------- */

static uint64_t avalanche(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ull;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dull;
  x ^= x >> 33;
  return x;
}

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/* A 64-bit digest of n bytes, started from seed. Eight bytes at a time, host order (the
 * guest and the host are both x86-64). */
static uint64_t digest(uint64_t seed, const unsigned char *b, size_t n) {
  uint64_t h = avalanche(seed ^ 0x243f6a8885a308d3ull) ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, b + i, 8);
    h = rotl(h ^ avalanche(w + i), 23) * 0xa0761d6478bd642full;
  }
  if (i < n) {
    uint64_t w = 0;
    memcpy(&w, b + i, n - i);
    h = rotl(h ^ avalanche(w + i), 23) * 0xa0761d6478bd642full;
  }
  return avalanche(h);
}

static int all_zero(const unsigned char *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (b[i]) return 0;
  return 1;
}

/* Adds the blocks of [from, to) (from block-aligned) to *sum. Returns -1 on a read error. */
static int hash_span(int fd, off_t from, off_t to, uint64_t *sum) {
  static unsigned char buf[CLUSTER_MAX];
  while (from < to) {
    size_t want = (size_t)(to - from < (off_t)sizeof buf ? to - from : (off_t)sizeof buf);
    want = (want + BLOCK - 1) / BLOCK * BLOCK;
    ssize_t got = pread(fd, buf, want, from);
    if (got < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (got == 0) break;
    for (ssize_t at = 0; at < got; at += BLOCK) {
      size_t len = (size_t)(got - at < BLOCK ? got - at : BLOCK);
      if (!all_zero(buf + at, len)) *sum += digest((uint64_t)(from + at) / BLOCK, buf + at, len);
    }
    from += got;
  }
  return 0;
}

static int hash_file(const char *path, off_t size, uint64_t *out) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  uint64_t sum = 0;
  off_t done = 0; /* block-aligned: everything before it is in sum */
  int rc = 0;
  while (done < size) {
    off_t data = lseek(fd, done, SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) break; /* only a hole is left */
      rc = hash_span(fd, done, size, &sum); /* no SEEK_DATA here: read it all */
      break;
    }
    off_t start = data & ~(off_t)(CLUSTER_MAX - 1);
    /* A gap shorter than the largest cluster is read through: in a compressed file whose
     * saved blocks were released, SEEK_HOLE stops inside each cluster, after its compressed
     * blocks, though the cluster's bytes go on. */
    if (start < done || data - done < CLUSTER_MAX) start = done;
    off_t hole = lseek(fd, data, SEEK_HOLE);
    if (hole < 0 || hole > size) hole = size;
    off_t end = (hole + BLOCK - 1) / BLOCK * BLOCK;
    if (end <= start) end = start + BLOCK;
    if ((rc = hash_span(fd, start, end, &sum))) break;
    done = end;
  }
  int e = errno;
  close(fd);
  errno = e;
  *out = avalanche(sum + avalanche((uint64_t)size + 1));
  return rc;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void print_xattrs(const char *path) {
  ssize_t n = llistxattr(path, NULL, 0);
  if (n < 0 && (errno == ENOTSUP || errno == ENODATA)) n = 0;
  if (n < 0) {
    complain(path, "listxattr");
    printf("\txattr=?");
    return;
  }
  char *list = grow(NULL, (size_t)n + 1);
  if (n > 0) n = llistxattr(path, list, (size_t)n);
  if (n < 0) {
    complain(path, "listxattr");
    printf("\txattr=?");
    free(list);
    return;
  }
  char **names = NULL;
  size_t count = 0;
  for (char *p = list; p < list + n; p += strlen(p) + 1) {
    if (!strncmp(p, "system.", 7)) continue;
    names = grow(names, (count + 1) * sizeof *names);
    names[count++] = p;
  }
  qsort(names, count, sizeof *names, by_name);
  uint64_t h = 0x6a09e667f3bcc908ull;
  for (size_t i = 0; i < count; i++) {
    ssize_t len = lgetxattr(path, names[i], NULL, 0);
    unsigned char *val = grow(NULL, len > 0 ? (size_t)len : 1);
    if (len > 0) len = lgetxattr(path, names[i], val, (size_t)len);
    if (len < 0) {
      complain(path, names[i]);
      len = 0;
    }
    h = digest(h, (const unsigned char *)names[i], strlen(names[i]));
    h = digest(h, val, (size_t)len);
    free(val);
  }
  if (count) printf("\txattr=%zu:%016llx", count, (unsigned long long)h);
  else printf("\txattr=-");
  free(names);
  free(list);
}

/* ---- the walk --------------------------------------------------------------------------- */

static void add(char *path) {
  struct stat st;
  if (lstat(path, &st)) {
    complain(path, "lstat");
    free(path);
    return;
  }
  if (n_entries == cap_entries) {
    cap_entries = cap_entries ? cap_entries * 2 : 1024;
    entries = grow(entries, cap_entries * sizeof *entries);
  }
  struct entry *e = &entries[n_entries++];
  e->path = path;
  e->rel = path[root_len] ? path + root_len + 1 : ".";
  e->st = st;
  e->group = NULL;
  if (!S_ISDIR(st.st_mode)) return;
  DIR *d = opendir(path);
  if (!d) {
    complain(path, "opendir");
    return;
  }
  struct dirent *de;
  while ((errno = 0, de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    size_t len = strlen(path) + 1 + strlen(de->d_name) + 1;
    char *child = grow(NULL, len);
    snprintf(child, len, "%s/%s", path, de->d_name);
    add(child);
  }
  if (errno) complain(path, "readdir");
  closedir(d);
}

static int by_rel(const void *a, const void *b) {
  return strcmp(((const struct entry *)a)->rel, ((const struct entry *)b)->rel);
}

static int by_inode(const void *a, const void *b) {
  const struct entry *x = *(struct entry *const *)a, *y = *(struct entry *const *)b;
  if (x->st.st_dev != y->st.st_dev) return x->st.st_dev < y->st.st_dev ? -1 : 1;
  if (x->st.st_ino != y->st.st_ino) return x->st.st_ino < y->st.st_ino ? -1 : 1;
  return strcmp(x->rel, y->rel);
}

/* Names each hard-link group by its first path in sorted order. */
static void group_links(void) {
  struct entry **linked = NULL;
  size_t n = 0;
  for (size_t i = 0; i < n_entries; i++) {
    if (S_ISDIR(entries[i].st.st_mode) || entries[i].st.st_nlink < 2) continue;
    linked = grow(linked, (n + 1) * sizeof *linked);
    linked[n++] = &entries[i];
  }
  qsort(linked, n, sizeof *linked, by_inode);
  for (size_t i = 0; i < n; i++) {
    int same = i > 0 && linked[i - 1]->st.st_dev == linked[i]->st.st_dev &&
               linked[i - 1]->st.st_ino == linked[i]->st.st_ino;
    linked[i]->group = same ? linked[i - 1]->group : linked[i]->rel;
  }
  free(linked);
}

static char type_of(mode_t m) {
  if (S_ISREG(m)) return 'f';
  if (S_ISDIR(m)) return 'd';
  if (S_ISLNK(m)) return 'l';
  if (S_ISCHR(m)) return 'c';
  if (S_ISBLK(m)) return 'b';
  if (S_ISFIFO(m)) return 'p';
  return 's';
}

static void print_entry(const struct entry *e) {
  const struct stat *st = &e->st;
  char t = type_of(st->st_mode);
  fputs(e->rel, stdout);
  if (chosen[F_TYPE]) printf("\ttype=%c", t);
  if (chosen[F_MODE]) printf("\tmode=%o", (unsigned)(st->st_mode & 07777));
  if (chosen[F_UID]) printf("\tuid=%u", (unsigned)st->st_uid);
  if (chosen[F_GID]) printf("\tgid=%u", (unsigned)st->st_gid);
  if (chosen[F_SIZE]) {
    if (t == 'd') printf("\tsize=-");
    else printf("\tsize=%lld", (long long)st->st_size);
  }
  if (chosen[F_BLOCKS]) printf("\tblocks=%lld", (long long)st->st_blocks);
  if (chosen[F_MTIME]) {
    if (t == 'l') printf("\tmtime=-");
    else printf("\tmtime=%lld", (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec);
  }
  if (chosen[F_HASH]) {
    uint64_t h;
    if (t != 'f') printf("\thash=-");
    else if (hash_file(e->path, st->st_size, &h)) {
      complain(e->path, "read");
      printf("\thash=?");
    } else printf("\thash=%016llx", (unsigned long long)h);
  }
  if (chosen[F_TARGET]) {
    if (t != 'l') printf("\ttarget=-");
    else {
      size_t cap = (size_t)st->st_size + 2;
      char *buf = grow(NULL, cap < 4096 ? 4096 : cap);
      ssize_t n = readlink(e->path, buf, (cap < 4096 ? 4096 : cap) - 1);
      if (n < 0) {
        complain(e->path, "readlink");
        printf("\ttarget=?");
      } else {
        buf[n] = 0;
        printf("\ttarget=%s", buf);
      }
      free(buf);
    }
  }
  if (chosen[F_LINKS]) printf("\tlinks=%s", e->group ? e->group : "-");
  if (chosen[F_XATTR]) print_xattrs(e->path);
  if (chosen[F_RDEV]) {
    if (t == 'c' || t == 'b') printf("\trdev=%u:%u", major(st->st_rdev), minor(st->st_rdev));
    else printf("\trdev=-");
  }
  putchar('\n');
}

/* ---- command line ----------------------------------------------------------------------- */

static int choose(const char *list) {
  memset(chosen, 0, sizeof chosen);
  char *copy = strdup(list), *save = NULL;
  for (char *f = strtok_r(copy, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
    int k = 0;
    while (k < F_COUNT && strcmp(f, field_names[k])) k++;
    if (k == F_COUNT) {
      fprintf(stderr, "treeview: unknown field %s\n", f);
      free(copy);
      return -1;
    }
    chosen[k] = 1;
  }
  free(copy);
  return 0;
}

static int set_xattr(const char *path, const char *name, const char *hex) {
  size_t len = strlen(hex);
  if (len % 2) {
    fprintf(stderr, "treeview: odd number of hex digits\n");
    return 2;
  }
  unsigned char *val = grow(NULL, len / 2 + 1);
  for (size_t i = 0; i < len / 2; i++) {
    char pair[3] = {hex[2 * i], hex[2 * i + 1], 0};
    char *end;
    val[i] = (unsigned char)strtoul(pair, &end, 16);
    if (*end) {
      fprintf(stderr, "treeview: not hex: %s\n", hex);
      return 2;
    }
  }
  if (lsetxattr(path, name, val, len / 2, 0)) {
    fprintf(stderr, "treeview: setxattr %s %s: %s\n", path, name, strerror(errno));
    return 1;
  }
  free(val);
  return 0;
}

static int usage(void) {
  fprintf(stderr, "usage: treeview [-f FIELDS] DIR\n"
                  "       treeview --setxattr PATH NAME [HEX]\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "--setxattr")) {
    if (argc != 4 && argc != 5) return usage();
    return set_xattr(argv[2], argv[3], argc == 5 ? argv[4] : "");
  }
  choose("type,mode,uid,gid,size,mtime,hash,target,links,xattr,rdev");
  int i = 1;
  if (argc >= 3 && !strcmp(argv[1], "-f")) {
    if (choose(argv[2])) return 2;
    i = 3;
  }
  if (i != argc - 1) return usage();
  size_t n = strlen(argv[i]);
  while (n > 1 && argv[i][n - 1] == '/') n--;
  char *root = strndup(argv[i], n);
  root_len = n;
  add(root);
  qsort(entries, n_entries, sizeof *entries, by_rel);
  group_links();
  for (size_t k = 0; k < n_entries; k++) print_entry(&entries[k]);
  if (fflush(stdout)) return 1;
  return status;
}
