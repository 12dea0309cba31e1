#!/usr/bin/env python3
"""show-warm-chain.py IMAGE: prints the current checkpoint of an F2FS image and walks its warm-node
roll-forward chain from the CP position (footer nid, ino, flags, ofs, next_blkaddr; name, parent and
size of inodes), stopping at the first block whose footer cp_ver is not the CP's (ver | crc<<32 under
CRC_RECOVERY). A debugging aid for recovery work; see tests/fixtures/README.md (linux-fsync-crash)."""
import struct, sys

def crc_f2fs(data):
    # F2FS CRC: crc32 (LE, poly 0xEDB88320) seeded with the magic, no final xor
    c = 0xF2F52010
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ (0xEDB88320 if c & 1 else 0)
    return c

img = open(sys.argv[1], 'rb')
def blk(n):
    img.seek(n * 4096); return img.read(4096)
sb = blk(0)[1024:]
cp_blkaddr, = struct.unpack_from('<I', sb, 76)
main_blkaddr, = struct.unpack_from('<I', sb, 92)
packs = []
for i, a in enumerate((cp_blkaddr, cp_blkaddr + 512)):
    b = blk(a)
    ver, = struct.unpack_from('<Q', b, 0)
    csum_off, = struct.unpack_from('<I', b, 164)
    crc, = struct.unpack_from('<I', b, csum_off)
    ok = crc_f2fs(b[:csum_off]) == crc
    total, = struct.unpack_from('<I', b, 136)
    flags, = struct.unpack_from('<I', b, 132)
    packs.append((i + 1, a, ver, crc, ok, flags, total, b))
    print(f"pack {i+1} at {a}: ver {ver:#x} crc {crc:#010x} ok={ok} flags {flags:#x} total {total}")
valid = [p for p in packs if p[4]]
cur = valid[0]
for p in valid[1:]:
    if ((p[2] - cur[2]) & (1 << 63)) == 0 and p[2] != cur[2]:
        cur = p
n, a, ver, crc, ok, flags, total, b = cur
print(f"current: pack {n}, ver {ver:#x}, flags {flags:#x}")
segs = struct.unpack_from('<8I', b, 36); offs = struct.unpack_from('<8H', b, 68)
dsegs = struct.unpack_from('<8I', b, 84); doffs = struct.unpack_from('<8H', b, 116)
print("cur_node seg/blkoff:", list(zip(segs[:3], offs[:3])), " cur_data:", list(zip(dsegs[:3], doffs[:3])))
print("valid_block_count", struct.unpack_from('<Q', b, 16)[0], "valid_node", struct.unpack_from('<I', b, 144)[0],
      "valid_inode", struct.unpack_from('<I', b, 148)[0], "next_free_nid", struct.unpack_from('<I', b, 152)[0])
want = ver | (crc << 32) if flags & 0x40 else ver
print(f"footer cp_ver expected {want:#018x}")
addr = main_blkaddr + segs[1] * 512 + offs[1]
print(f"warm node chain from {addr}:")
n = 0
while True:
    nb = blk(addr)
    nid, ino, flag = struct.unpack_from('<3I', nb, 4072)
    cpv, = struct.unpack_from('<Q', nb, 4084)
    nxt, = struct.unpack_from('<I', nb, 4092)
    if cpv != want:
        print(f"  {addr}: end (footer cp_ver {cpv:#x}, nid {nid}, flag {flag:#x})"); break
    marks = '|'.join(m for bit, m in ((1, 'COLD'), (2, 'FSYNC'), (4, 'DENT')) if flag & bit)
    ofs = flag >> 3
    extra = ''
    if ofs == 0:
        namelen, = struct.unpack_from('<I', nb, 88)
        size, = struct.unpack_from('<Q', nb, 16)
        pino, = struct.unpack_from('<I', nb, 84)
        links, = struct.unpack_from('<I', nb, 12)
        extra = f" inode name={nb[92:92+namelen].decode(errors='replace')!r} pino={pino} size={size} links={links} i_inline={nb[3]:#x}"
    print(f"  {addr}: nid {nid} ino {ino} flag {flag:#x} ({marks}) ofs {ofs} next {nxt}{extra}")
    n += 1
    addr = nxt
print(f"{n} nodes in the chain")
