/* setcompr: F2FS compression controls for the linux-f2fs guest (busybox has no chattr).
 *   setcompr PATH [ALGORITHM LOG_CLUSTER_SIZE]
 *       Mark an empty file (or a directory, whose new files inherit it) for transparent
 *       compression, as `chattr +c` would: FS_COMPR_FL through FS_IOC_GETFLAGS/SETFLAGS.
 *       With ALGORITHM (0 lzo, 1 lz4, 2 zstd, 3 lzo-rle) and LOG_CLUSTER_SIZE (2..) it then
 *       sets the file's own option with F2FS_IOC_SET_COMPRESS_OPTION (regular, still empty file).
 *   setcompr --blocks PATH
 *       Print the file's compressed-block count (F2FS_IOC_GET_COMPRESS_BLOCKS: blocks saved).
 *   setcompr --release PATH
 *       Give the blocks compression saved back to the volume (F2FS_IOC_RELEASE_COMPRESS_BLOCKS;
 *       the file's data can no longer change: EPERM) and print how many were released.
 *   setcompr --reserve PATH
 *       Take them back (F2FS_IOC_RESERVE_COMPRESS_BLOCKS) and print how many were reserved.
 *   setcompr --compress-file PATH | --decompress-file PATH
 *       Store every cluster of the file compressed, or plain (F2FS_IOC_COMPRESS_FILE,
 *       F2FS_IOC_DECOMPRESS_FILE; Linux takes them under compress_mode=user).
 * Build static: gcc -O2 -static -o setcompr setcompr.c */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/fs.h>
#include <linux/f2fs.h>

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--blocks")) {
    int fd = open(argv[2], O_RDONLY);
    unsigned long long n = 0;
    if (fd < 0 || ioctl(fd, F2FS_IOC_GET_COMPRESS_BLOCKS, &n)) { perror("setcompr: F2FS_IOC_GET_COMPRESS_BLOCKS"); return 1; }
    printf("%llu\n", n);
    return 0;
  }
  if (argc == 3 && !strcmp(argv[1], "--release")) {
    int fd = open(argv[2], O_RDONLY);
    unsigned long long n = 0;
    if (fd < 0 || ioctl(fd, F2FS_IOC_RELEASE_COMPRESS_BLOCKS, &n)) { perror("setcompr: F2FS_IOC_RELEASE_COMPRESS_BLOCKS"); return 1; }
    printf("%llu\n", n);
    return 0;
  }
  if (argc == 3 && !strcmp(argv[1], "--reserve")) {
    int fd = open(argv[2], O_RDONLY);
    unsigned long long n = 0;
    if (fd < 0 || ioctl(fd, F2FS_IOC_RESERVE_COMPRESS_BLOCKS, &n)) { perror("setcompr: F2FS_IOC_RESERVE_COMPRESS_BLOCKS"); return 1; }
    printf("%llu\n", n);
    return 0;
  }
  if (argc == 3 && (!strcmp(argv[1], "--compress-file") || !strcmp(argv[1], "--decompress-file"))) {
    int fd = open(argv[2], O_RDWR);
    unsigned long cmd = argv[1][2] == 'c' ? F2FS_IOC_COMPRESS_FILE : F2FS_IOC_DECOMPRESS_FILE;
    if (fd < 0 || ioctl(fd, cmd)) { perror("setcompr: F2FS_IOC_(DE)COMPRESS_FILE"); return 1; }
    return 0;
  }
  if (argc != 2 && argc != 4) { fprintf(stderr, "usage: setcompr PATH [ALGORITHM LOG_CLUSTER_SIZE] | --blocks PATH | --release PATH | --reserve PATH | --compress-file PATH | --decompress-file PATH\n"); return 2; }
  int fd = open(argv[1], argc == 4 ? O_RDWR : O_RDONLY);  /* the option ioctl wants a writable fd */
  if (fd < 0) { perror("setcompr: open"); return 1; }
  int flags = 0;
  if (ioctl(fd, FS_IOC_GETFLAGS, &flags)) { perror("setcompr: FS_IOC_GETFLAGS"); return 1; }
  flags |= FS_COMPR_FL;
  if (ioctl(fd, FS_IOC_SETFLAGS, &flags)) { perror("setcompr: FS_IOC_SETFLAGS"); return 1; }
  if (argc == 4) {
    struct f2fs_comp_option o = { (__u8)atoi(argv[2]), (__u8)atoi(argv[3]) };
    if (ioctl(fd, F2FS_IOC_SET_COMPRESS_OPTION, &o)) { perror("setcompr: F2FS_IOC_SET_COMPRESS_OPTION"); return 1; }
  }
  flags = 0;
  if (ioctl(fd, FS_IOC_GETFLAGS, &flags) || !(flags & FS_COMPR_FL)) { fprintf(stderr, "setcompr: %s: flag did not stick\n", argv[1]); return 1; }
  close(fd);
  return 0;
}
