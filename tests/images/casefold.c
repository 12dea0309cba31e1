/* casefold: casefolded directories from the shell, in the linux-f2fs guest (busybox has no
 * chattr) and on a uf2fs mount alike. Names travel in hex, one per line, so that any bytes
 * (invalid UTF-8 too) survive files and shells.
 *   casefold setflag DIR
 *       FS_IOC_GETFLAGS, then FS_IOC_SETFLAGS with FS_CASEFOLD_FL added (chattr +F).
 *       Prints "ok" or the errno's name; exits 0 either way unless DIR cannot be opened.
 *   casefold getflags PATH
 *       Prints FS_IOC_GETFLAGS's answer in hex.
 *   casefold lookup DIR NAMES
 *       For each hex name in the file NAMES: "HEX ino N" (lstat of DIR/name) or "HEX err E".
 *   casefold list DIR
 *       Every name in DIR but '.' and '..', in hex, one a line (readdir order).
 *   casefold create DIR NAMES
 *       For each hex name: creates DIR/name (O_CREAT|O_EXCL, mode 0644) and prints
 *       "HEX ok" or "HEX err E".
 * Errors print as their names (EINVAL, EEXIST...) so that both sides compare as text.
 * Build static: gcc -O2 -static -o casefold casefold.c */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>
#include <linux/fs.h>

#ifndef FS_CASEFOLD_FL
#define FS_CASEFOLD_FL 0x40000000
#endif

static const char *ename(int e) {
  switch (e) {
  case EINVAL: return "EINVAL";
  case EEXIST: return "EEXIST";
  case ENOENT: return "ENOENT";
  case ENOTEMPTY: return "ENOTEMPTY";
  case EOPNOTSUPP: return "EOPNOTSUPP";
  case ENOTDIR: return "ENOTDIR";
  case ENAMETOOLONG: return "ENAMETOOLONG";
  case EPERM: return "EPERM";
  case EIO: return "EIO";
  case ENOTTY: return "ENOTTY";
  default: return "EOTHER";
  }
}

static int unhex(const char *h, char *out, size_t cap) {
  size_t n = strlen(h), k = 0;
  while (n && (h[n - 1] == '\n' || h[n - 1] == '\r')) n--;
  if (n % 2 || n / 2 >= cap) return -1;
  for (size_t i = 0; i < n; i += 2) {
    unsigned v;
    if (sscanf(h + i, "%2x", &v) != 1) return -1;
    out[k++] = (char)v;
  }
  out[k] = 0;
  return (int)k;
}

static int each(const char *dir, const char *names, int create) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY);
  if (dfd < 0) { fprintf(stderr, "casefold: open %s: %s\n", dir, strerror(errno)); return 1; }
  FILE *f = fopen(names, "r");
  if (!f) { fprintf(stderr, "casefold: open %s: %s\n", names, strerror(errno)); return 1; }
  char line[1024], name[512];
  while (fgets(line, sizeof line, f)) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = 0;
    if (!*line) continue;
    if (unhex(line, name, sizeof name) < 0) { fprintf(stderr, "casefold: bad hex %s\n", line); return 1; }
    if (create) {
      int fd = openat(dfd, name, O_CREAT | O_EXCL | O_WRONLY, 0644);
      if (fd < 0) printf("%s err %s\n", line, ename(errno));
      else { close(fd); printf("%s ok\n", line); }
    } else {
      struct stat st;
      if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) printf("%s err %s\n", line, ename(errno));
      else printf("%s ino %lu\n", line, (unsigned long)st.st_ino);
    }
  }
  fclose(f);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && (!strcmp(argv[1], "setflag") || !strcmp(argv[1], "getflags"))) {
    int fd = open(argv[2], O_RDONLY);
    if (fd < 0) { fprintf(stderr, "casefold: open %s: %s\n", argv[2], strerror(errno)); return 1; }
    int flags = 0;
    if (ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0) { printf("%s\n", ename(errno)); return 0; }
    if (!strcmp(argv[1], "getflags")) { printf("%x\n", (unsigned)flags); return 0; }
    flags |= FS_CASEFOLD_FL;
    if (ioctl(fd, FS_IOC_SETFLAGS, &flags) != 0) printf("%s\n", ename(errno));
    else printf("ok\n");
    return 0;
  }
  if (argc == 3 && !strcmp(argv[1], "list")) {
    DIR *d = opendir(argv[2]);
    if (!d) { fprintf(stderr, "casefold: opendir %s: %s\n", argv[2], strerror(errno)); return 1; }
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      for (const unsigned char *c = (const unsigned char *)e->d_name; *c; c++) printf("%02x", *c);
      printf("\n");
    }
    closedir(d);
    return 0;
  }
  if (argc == 4 && !strcmp(argv[1], "lookup")) return each(argv[2], argv[3], 0);
  if (argc == 4 && !strcmp(argv[1], "create")) return each(argv[2], argv[3], 1);
  fprintf(stderr, "usage: casefold setflag DIR | getflags PATH | list DIR | lookup DIR NAMES | create DIR NAMES\n");
  return 2;
}
