/* fscrypt: encrypted directories from the shell, in the linux-f2fs guest (busybox knows
 * nothing of fscrypt). Written for uf2fs's tests; the ioctls are Linux's uapi.
 *   fscrypt setup DIR v1|v2 PAD
 *       Adds a fixed test key to DIR's file system (FS_IOC_ADD_ENCRYPTION_KEY: by key
 *       identifier for v2, by an 8-byte descriptor for v1) and sets the policy on the empty
 *       DIR: AES-256-XTS contents, AES-256-CTS names, name padding PAD (4, 8, 16 or 32).
 *       Prints the key's identity.
 *   fscrypt list DIR
 *       Walks DIR depth-first in readdir order, one line per entry but '.' and '..':
 *       "PATH<TAB>ino N<TAB>dtype T<TAB>type T<TAB>size N<TAB>nlink N<TAB>WHAT", where PATH
 *       is relative to DIR, T is one of f d l o, and WHAT is for a symlink "link TARGET" or
 *       "link err E", for a regular file "open ok" or "open err E", else "-".
 *   fscrypt probe DIR INO
 *       In encrypted DIR without its key: create, mkdir, symlink, rename, link, truncate,
 *       chmod and chattr +F (of the first subdirectory) answers (each "OP ok" or "OP err E"),
 *       then unlinks the entry whose inode is INO by its no-key name ("unlink ok" or
 *       "unlink err E").
 * Errors print as their names so that both sides compare as text.
 * Build static: gcc -O2 -static -o fscrypt fscrypt.c */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/fscrypt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *ename(int e)
{
	switch (e) {
	case ENOKEY: return "ENOKEY";
	case ENOENT: return "ENOENT";
	case EEXIST: return "EEXIST";
	case EPERM: return "EPERM";
	case EACCES: return "EACCES";
	case EINVAL: return "EINVAL";
	case EXDEV: return "EXDEV";
	case EISDIR: return "EISDIR";
	case ENOTDIR: return "ENOTDIR";
	case EUCLEAN: return "EUCLEAN";
	case ENOTEMPTY: return "ENOTEMPTY";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ENAMETOOLONG: return "ENAMETOOLONG";
	case EIO: return "EIO";
	default: return "E?";
	}
}

static int setup(const char *dir, const char *version, int pad)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	if (fd < 0) { perror(dir); return 1; }
	struct { struct fscrypt_add_key_arg a; unsigned char raw[64]; } k;
	memset(&k, 0, sizeof k);
	for (int i = 0; i < 64; i++) k.raw[i] = (unsigned char)(i * 13 + 7);
	k.a.raw_size = 64;
	int flags;
	switch (pad) {
	case 4: flags = FSCRYPT_POLICY_FLAGS_PAD_4; break;
	case 8: flags = FSCRYPT_POLICY_FLAGS_PAD_8; break;
	case 16: flags = FSCRYPT_POLICY_FLAGS_PAD_16; break;
	default: flags = FSCRYPT_POLICY_FLAGS_PAD_32; break;
	}
	if (strcmp(version, "v2") == 0) {
		k.a.key_spec.type = FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER;
		if (ioctl(fd, FS_IOC_ADD_ENCRYPTION_KEY, &k) < 0) { perror("add key"); return 1; }
		struct fscrypt_policy_v2 p;
		memset(&p, 0, sizeof p);
		p.version = FSCRYPT_POLICY_V2;
		p.contents_encryption_mode = FSCRYPT_MODE_AES_256_XTS;
		p.filenames_encryption_mode = FSCRYPT_MODE_AES_256_CTS;
		p.flags = flags;
		memcpy(p.master_key_identifier, k.a.key_spec.u.identifier, 16);
		if (ioctl(fd, FS_IOC_SET_ENCRYPTION_POLICY, &p) < 0) { perror("set policy"); return 1; }
		printf("v2 key identifier ");
		for (int i = 0; i < 16; i++) printf("%02x", p.master_key_identifier[i]);
		printf("\n");
	} else {
		k.a.key_spec.type = FSCRYPT_KEY_SPEC_TYPE_DESCRIPTOR;
		for (int i = 0; i < 8; i++) k.a.key_spec.u.descriptor[i] = (unsigned char)(0xd0 + i);
		if (ioctl(fd, FS_IOC_ADD_ENCRYPTION_KEY, &k) < 0) { perror("add key"); return 1; }
		struct fscrypt_policy_v1 p;
		memset(&p, 0, sizeof p);
		p.version = FSCRYPT_POLICY_V1;
		p.contents_encryption_mode = FSCRYPT_MODE_AES_256_XTS;
		p.filenames_encryption_mode = FSCRYPT_MODE_AES_256_CTS;
		p.flags = flags;
		memcpy(p.master_key_descriptor, k.a.key_spec.u.descriptor, 8);
		if (ioctl(fd, FS_IOC_SET_ENCRYPTION_POLICY, &p) < 0) { perror("set policy"); return 1; }
		printf("v1 key descriptor ");
		for (int i = 0; i < 8; i++) printf("%02x", p.master_key_descriptor[i]);
		printf("\n");
	}
	close(fd);
	return 0;
}

static char type_of(mode_t m)
{
	return S_ISREG(m) ? 'f' : S_ISDIR(m) ? 'd' : S_ISLNK(m) ? 'l' : 'o';
}

static char dtype_of(unsigned char t)
{
	return t == DT_REG ? 'f' : t == DT_DIR ? 'd' : t == DT_LNK ? 'l' : 'o';
}

static void list(const char *base, const char *rel)
{
	char path[8192];
	snprintf(path, sizeof path, "%s%s%s", base, *rel ? "/" : "", rel);
	DIR *d = opendir(path);
	if (!d) { printf("%s\topendir err %s\n", rel, ename(errno)); return; }
	struct dirent *e;
	errno = 0;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
		char r[8192], full[16640];
		snprintf(r, sizeof r, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
		snprintf(full, sizeof full, "%s/%s", base, r);
		struct stat st;
		if (lstat(full, &st) < 0) {
			printf("%s\tlstat err %s\n", r, ename(errno));
			continue;
		}
		printf("%s\tino %lu\tdtype %c\ttype %c\tsize %lld\tnlink %lu\t", r,
		       (unsigned long)e->d_ino, dtype_of(e->d_type), type_of(st.st_mode),
		       (long long)st.st_size, (unsigned long)st.st_nlink);
		if (S_ISLNK(st.st_mode)) {
			char t[8192];
			ssize_t n = readlink(full, t, sizeof t - 1);
			if (n < 0) printf("link err %s\n", ename(errno));
			else { t[n] = 0; printf("link %s\n", t); }
		} else if (S_ISREG(st.st_mode)) {
			int fd = open(full, O_RDONLY);
			if (fd < 0) printf("open err %s\n", ename(errno));
			else { printf("open ok\n"); close(fd); }
		} else {
			printf("-\n");
		}
		if (S_ISDIR(st.st_mode)) list(base, r);
		errno = 0;
	}
	if (errno) printf("%s\treaddir err %s\n", rel, ename(errno));
	closedir(d);
}

static void answer(const char *op, int r)
{
	if (r < 0) printf("%s err %s\n", op, ename(errno));
	else printf("%s ok\n", op);
}

static int probe(const char *dir, unsigned long ino)
{
	char p[8192], q[8192], victim[8192] = "";
	DIR *d = opendir(dir);
	if (!d) { perror(dir); return 1; }
	struct dirent *e;
	char other[8192] = "", sub[8192] = "";
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
		if (e->d_ino == ino) snprintf(victim, sizeof victim, "%s/%s", dir, e->d_name);
		else if (e->d_type == DT_REG && !*other) snprintf(other, sizeof other, "%s/%s", dir, e->d_name);
		else if (e->d_type == DT_DIR && !*sub) snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
	}
	closedir(d);
	snprintf(p, sizeof p, "%s/newfile", dir);
	answer("create", open(p, O_CREAT | O_EXCL | O_WRONLY, 0644));
	snprintf(p, sizeof p, "%s/newdir", dir);
	answer("mkdir", mkdir(p, 0755));
	snprintf(p, sizeof p, "%s/newlink", dir);
	answer("symlink", symlink("target", p));
	snprintf(q, sizeof q, "%s/renamed", dir);
	answer("rename", rename(other, q));
	snprintf(q, sizeof q, "%s/linked", dir);
	answer("link", link(other, q));
	answer("truncate", truncate(other, 0));
	answer("chmod", chmod(other, 0600));
	int fd = open(sub, O_RDONLY | O_DIRECTORY);
	int flags = 0;
	if (fd >= 0 && ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0) {
		flags |= 0x40000000; /* FS_CASEFOLD_FL */
		answer("casefold", ioctl(fd, FS_IOC_SETFLAGS, &flags));
	} else {
		answer("casefold", -1);
	}
	if (fd >= 0) close(fd);
	answer("unlink", *victim ? unlink(victim) : (errno = ENOENT, -1));
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 5 && !strcmp(argv[1], "setup")) return setup(argv[2], argv[3], atoi(argv[4]));
	if (argc == 3 && !strcmp(argv[1], "list")) { list(argv[2], ""); return 0; }
	if (argc == 4 && !strcmp(argv[1], "probe")) return probe(argv[2], strtoul(argv[3], 0, 10));
	fprintf(stderr, "usage: fscrypt setup DIR v1|v2 PAD | list DIR | probe DIR INO\n");
	return 2;
}
