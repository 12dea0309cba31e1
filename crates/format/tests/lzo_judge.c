/* The liblzo2 judge for uf2fs's LZO encoder tests (crates/format/tests/lzo_with_liblzo2.rs).
 *
 * Reads records from the file argv[1] and writes one answer per record to argv[2]:
 *   record: u32 op ('d' decompress with lzo1x_decompress_safe, 'c' compress with
 *           lzo1x_1_compress), u32 input length, u32 output room, the input bytes;
 *   answer: i32 liblzo2 result code, u32 output length, the output bytes.
 * All integers little-endian (the host's, x86-64). Built by the test with gcc -llzo2. */
#include <lzo/lzo1x.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int get_u32(FILE *f, uint32_t *v) { return fread(v, 4, 1, f) == 1; }

int main(int argc, char **argv) {
    if (argc != 3 || lzo_init() != LZO_E_OK) {
        fprintf(stderr, "usage: lzo_judge RECORDS ANSWERS (and a working liblzo2)\n");
        return 2;
    }
    FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
    if (!in || !out) {
        perror("lzo_judge: open");
        return 2;
    }
    static unsigned char work[LZO1X_1_MEM_COMPRESS];
    uint32_t op, n, room;
    while (get_u32(in, &op) && get_u32(in, &n) && get_u32(in, &room)) {
        unsigned char *src = malloc(n + 1), *dst = malloc(room + 1);
        if (!src || !dst || fread(src, 1, n, in) != n) {
            fprintf(stderr, "lzo_judge: short record\n");
            return 2;
        }
        lzo_uint got = room;
        int32_t rc;
        if (op == 'd')
            rc = lzo1x_decompress_safe(src, n, dst, &got, NULL);
        else
            rc = lzo1x_1_compress(src, n, dst, &got, work);
        uint32_t len = (uint32_t)got;
        fwrite(&rc, 4, 1, out);
        fwrite(&len, 4, 1, out);
        fwrite(dst, 1, len, out);
        free(src);
        free(dst);
    }
    return fclose(out) == 0 ? 0 : 2;
}
