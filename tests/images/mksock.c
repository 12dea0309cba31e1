/* mksock PATH: create a unix-domain socket file at PATH and exit, leaving the file in place.
 * Busybox has no way to make a socket inode; the F2FS fixtures need one (file type 6).
 * Build static so that it runs in the linux-f2fs guest: gcc -O2 -static -o mksock mksock.c */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 2) { fprintf(stderr, "usage: mksock PATH\n"); return 2; }
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  if (strlen(argv[1]) >= sizeof a.sun_path) { fprintf(stderr, "mksock: path too long\n"); return 2; }
  strcpy(a.sun_path, argv[1]);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) { perror("mksock: socket"); return 1; }
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) { perror("mksock: bind"); return 1; }
  close(fd);
  return 0;
}
