/* shutdown: crash an F2FS mount on purpose, and fsync files, in the linux-f2fs guest. Busybox
 * cannot call the F2FS shutdown ioctl. Its `sync FILE` does fsync FILE, but `sync -f FILE` is
 * syncfs (a checkpoint on F2FS), which a crash test must not use by mistake; the fsync mode
 * here says what it does and names the file that failed.
 *   shutdown PATH [nosync|sync|metasync|metaflush]
 *       Open PATH (the mount point or any file in the F2FS mount) and call F2FS_IOC_SHUTDOWN
 *       with the chosen "going down" mode (default nosync: nothing more reaches the disk, no
 *       checkpoint is written, so the image is left as a power cut at that moment would leave
 *       it). `sync` writes a full checkpoint first; `metasync` and `metaflush` flush metadata.
 *       The file system stays mounted but refuses every write afterwards.
 *   shutdown fsync FILE...
 *       fsync(2) each FILE (opened read-only; fsync does not need write access), in order.
 *   shutdown fdatasync FILE...
 *       The same with fdatasync(2).
 * Build static: gcc -O2 -static -o shutdown shutdown.c */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/types.h>
#include <linux/f2fs.h>

static int sync_files(int argc, char **argv, int data_only) {
  for (int i = 2; i < argc; i++) {
    int fd = open(argv[i], O_RDONLY);
    if (fd < 0) { fprintf(stderr, "shutdown: open %s: %s\n", argv[i], strerror(errno)); return 1; }
    if ((data_only ? fdatasync(fd) : fsync(fd)) != 0) {
      fprintf(stderr, "shutdown: %s %s: %s\n", data_only ? "fdatasync" : "fsync", argv[i], strerror(errno));
      return 1;
    }
    close(fd);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "fsync")) return sync_files(argc, argv, 0);
  if (argc >= 3 && !strcmp(argv[1], "fdatasync")) return sync_files(argc, argv, 1);
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: shutdown PATH [nosync|sync|metasync|metaflush] | fsync FILE... | fdatasync FILE...\n");
    return 2;
  }
  const char *mode = argc == 3 ? argv[2] : "nosync";
  __u32 how;
  if (!strcmp(mode, "nosync")) how = F2FS_GOING_DOWN_NOSYNC;
  else if (!strcmp(mode, "sync")) how = F2FS_GOING_DOWN_FULLSYNC;
  else if (!strcmp(mode, "metasync")) how = F2FS_GOING_DOWN_METASYNC;
  else if (!strcmp(mode, "metaflush")) how = F2FS_GOING_DOWN_METAFLUSH;
  else { fprintf(stderr, "shutdown: unknown mode %s\n", mode); return 2; }
  int fd = open(argv[1], O_RDONLY);
  if (fd < 0) { fprintf(stderr, "shutdown: open %s: %s\n", argv[1], strerror(errno)); return 1; }
  if (ioctl(fd, F2FS_IOC_SHUTDOWN, &how) != 0) {
    fprintf(stderr, "shutdown: F2FS_IOC_SHUTDOWN (%s) on %s: %s\n", mode, argv[1], strerror(errno));
    return 1;
  }
  close(fd);
  return 0;
}
