#!/bin/sh
# Builds the "bring your own kernel" example into OUT (default: ./build next to this script):
# the repository's kernels assembled by clang with FOREIGN symbol names (as a port built by its
# own toolchain would name them), one relocatable object per kernel and arch, the riscv64
# Poly1305 packed into a static archive, plus kernel-lab.toml describing them.
#
#   examples/byok/build.sh /tmp/byok && lab run --manifest /tmp/byok/kernel-lab.toml
#
# Needs clang and llvm-ar (Debian packages clang, llvm: ci/setup.sh installs them).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
kernels="$here/../../kernels"
out="${1:-$here/build}"
mkdir -p "$out/riscv64" "$out/aarch64" "$out/x86_64"

# riscv64 with Zbb: -mno-relax (ld.lld 14 cannot relax; the lab refuses R_RISCV_ALIGN).
rv="clang --target=riscv64-linux-gnu -march=rv64gc_zbb -mno-relax -c"
$rv -Dmd5_implCompress=rv_md5_block -Dmd5_implCompressMB=rv_md5_blocks \
    "$kernels/riscv64/md5.S" -o "$out/riscv64/md5.o"
$rv -Dpoly1305_processBlocks=rv_poly1305_blocks "$kernels/riscv64/poly1305.S" -o "$out/riscv64/poly1305.o"
rm -f "$out/riscv64/libpoly1305.a"
llvm-ar rcs "$out/riscv64/libpoly1305.a" "$out/riscv64/poly1305.o"
rm "$out/riscv64/poly1305.o"

# aarch64: ARMv8.0-A.
a64="clang --target=aarch64-linux-gnu -march=armv8-a -c"
$a64 -Dmd5_implCompress=arm64_md5_block_data_order -Dmd5_implCompressMB=arm64_md5_blocks \
    "$kernels/aarch64/md5.S" -o "$out/aarch64/md5.o"
$a64 -Dpoly1305_processBlocks=arm64_poly1305_blocks "$kernels/aarch64/poly1305.S" -o "$out/aarch64/poly1305.o"

# x86_64: MD5 prebuilt under another name; Poly1305 given as a source (the lab assembles it).
clang --target=x86_64-linux-gnu -march=x86-64 -c \
    -Dmd5_implCompress=x64_md5_one -Dmd5_implCompressMB=x64_md5_many \
    "$kernels/x86_64/md5.S" -o "$out/x86_64/md5.o"
cp "$kernels/x86_64/poly1305.S" "$out/x86_64/poly1305.S"

cp "$here/kernel-lab.toml" "$out/kernel-lab.toml"
echo "built into $out: lab run --manifest $out/kernel-lab.toml"
