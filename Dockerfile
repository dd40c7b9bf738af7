# kernel-lab in a container, in two stages:
#   build    Debian 12 (bookworm) with Rust 1.95.0 and the packages of ci/setup.sh (the same
#            script as .ci/run and the CI workflow); builds `lab` from Cargo.lock (--locked)
#            and, unless RUN_TESTS=0, runs the test suite.
#   runtime  Debian 12 slim with what `lab` runs: clang, lld, llvm (build and disassemble the
#            kernels), qemu-user, libssl3, openjdk-17-jdk-headless (`lab capture`), and the `lab` binary, whose kernels and vectors are
#            built into it. No Rust toolchain, no Unicorn build tree (Unicorn is linked in).
#
#   docker build -t kernel-lab .                      (RUN_TESTS=0 skips cargo test)
#   docker run --rm kernel-lab lab run --arch riscv64 --no-zbb
#   docker run --rm kernel-lab lab doctor
#
# Pinning: base images by tag (append @sha256:<digest> to pin them byte for byte), crates by
# Cargo.lock. Debian packages come from bookworm, whose stable updates keep the same upstream
# versions (clang/lld 14, qemu 7.2); to pin every package to one day, build with
# --build-arg DEBIAN_SNAPSHOT=20250601T000000Z (snapshot.debian.org).
ARG DEBIAN_SNAPSHOT=""

FROM rust:1.95.0-slim-bookworm AS build
ARG DEBIAN_SNAPSHOT
ARG RUN_TESTS=1
COPY ci/snapshot.sh /tmp/snapshot.sh
RUN sh /tmp/snapshot.sh "$DEBIAN_SNAPSHOT"
WORKDIR /lab
COPY ci/setup.sh ci/setup.sh
RUN bash ci/setup.sh && rm -rf /var/lib/apt/lists/*
# .dockerignore keeps target/, fuzz-failures/ and .git out of the context.
COPY . .
RUN cargo build --release --locked \
 && if [ "$RUN_TESTS" = 1 ]; then cargo test --release --locked; fi

FROM debian:bookworm-slim AS runtime
ARG DEBIAN_SNAPSHOT
COPY ci/snapshot.sh /tmp/snapshot.sh
RUN sh /tmp/snapshot.sh "$DEBIAN_SNAPSHOT" \
 && apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      clang lld llvm qemu-user libssl3 openjdk-17-jdk-headless \
 && rm -rf /var/lib/apt/lists/* /tmp/snapshot.sh
COPY --from=build /lab/target/release/lab /usr/local/bin/lab
# Built images and the bundled kernels and vectors are written here on first use.
ENV KERNEL_LAB_CACHE=/var/cache/kernel-lab
RUN lab doctor
CMD ["lab", "run"]
