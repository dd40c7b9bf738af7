#!/usr/bin/env bash
# Installs every system package kernel-lab needs on Debian 12, idempotently.
# One source of truth: README, .ci/run, the Dockerfile and the CI workflow
# (ci/github-workflow.yml) all call this.
#
#   clang, lld       cross-assemble and link the kernels for riscv64, aarch64, x86_64
#   qemu-user        qemu-riscv64 / qemu-aarch64 / qemu-x86_64 (the qemu backend)
#   cmake, libclang-dev, pkg-config, build-essential
#                    build the Unicorn C core (unicorn-engine crate, bindgen needs libclang)
#   llvm             llvm-objdump / llvm-mc for disassembly in reports and `lab bench`'s mix
#                    (and llvm-ar, used by examples/byok/build.sh for its static archive)
#   llvm-19          llvm-mca-19: `lab bench`'s predicted cycles per block on named CPU models
#                    (LLVM 14's llvm-mca rejects Zbb on sifive-u74; Debian 12 has 19.1.7 in main)
#   libssl-dev       OpenSSL libcrypto headers for the `openssl` crate (`lab bench` compares the
#                    native x86_64 kernels with OpenSSL through EVP; found with pkg-config)
#   perl             tests/openssl_real.rs generates OpenSSL's perlasm from the openssl-src
#                    crate's tree (gcc from build-essential: GNU as, which the x86_64 perlasm
#                    probes before it emits its AVX-512 paths)
#   openjdk-17-jdk-headless
#                    `java` (17.0.x, with HotSpot's x86_64 MD5 intrinsic) for `lab capture` and
#                    `--hotspot`: the lab runs HotSpot's own stubs (tests/hotspot.rs); the JDK, not
#                    the JRE, for the single-file source launcher (jdk.compiler)
#   openjdk-17-jdk-headless:arm64
#                    (x86_64 hosts) Debian's arm64 JDK through dpkg multiarch (the arm64
#                    architecture is added here): `lab capture --java
#                    /usr/lib/jvm/java-17-openjdk-arm64/bin/java` runs it under qemu-aarch64 and
#                    takes HotSpot's aarch64 stubs (tests/hotspot_foreign.rs)
set -euo pipefail

packages=(clang lld llvm llvm-19 qemu-user cmake libclang-dev pkg-config build-essential libssl-dev perl ca-certificates openjdk-17-jdk-headless)

# A foreign-architecture JDK needs dpkg to know that architecture before apt can see it.
if [ "$(dpkg --print-architecture)" = amd64 ]; then
  packages+=(openjdk-17-jdk-headless:arm64)
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    echo "setup: adding dpkg architecture arm64 (multiarch) for openjdk-17-jdk-headless:arm64"
    if [ "$(id -u)" -ne 0 ]; then sudo dpkg --add-architecture arm64; else dpkg --add-architecture arm64; fi
  fi
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# The versions in use, for the log (the Dockerfile can pin them with a snapshot date).
versions() { dpkg-query -W -f='setup: ${Package}:${Architecture} ${Version}\n' clang lld qemu-user openjdk-17-jdk-headless; }

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present (${packages[*]})"
  versions
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
versions
