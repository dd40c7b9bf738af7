# kernel-lab in a container: Debian 12 (bookworm) with Rust 1.95.0, system packages from the
# same ci/setup.sh as .ci/run and the CI workflow, crates from Cargo.lock (--locked).
#
#   docker build -t kernel-lab .                      (builds the lab and runs cargo test)
#   docker run --rm kernel-lab lab run --arch riscv64 --no-zbb
#   docker run --rm kernel-lab lab doctor
#
# Pinning: the base image is pinned by tag (Debian 12 + Rust 1.95.0; append @sha256:<digest>
# to pin it byte for byte), crates by Cargo.lock. Debian packages come from bookworm, whose
# stable updates keep the same upstream versions (clang/lld 14, qemu 7.2); to pin every package
# to one day, build with --build-arg DEBIAN_SNAPSHOT=20250601T000000Z (snapshot.debian.org).
FROM rust:1.95.0-slim-bookworm

ARG DEBIAN_SNAPSHOT=""
RUN if [ -n "$DEBIAN_SNAPSHOT" ]; then \
      sed -i \
        -e "s|http://deb.debian.org/debian-security|http://snapshot.debian.org/archive/debian-security/${DEBIAN_SNAPSHOT}|" \
        -e "s|http://deb.debian.org/debian|http://snapshot.debian.org/archive/debian/${DEBIAN_SNAPSHOT}|" \
        /etc/apt/sources.list.d/debian.sources \
      && echo 'Acquire::Check-Valid-Until "false";' > /etc/apt/apt.conf.d/99snapshot; \
    fi

WORKDIR /lab
COPY ci/setup.sh ci/setup.sh
RUN bash ci/setup.sh && rm -rf /var/lib/apt/lists/*

# .dockerignore keeps target/ and .git out of the context.
COPY . .
RUN cargo build --release --locked \
 && cargo test --release --locked \
 && install -m 755 target/release/lab /usr/local/bin/lab \
 && find target -mindepth 1 -maxdepth 1 ! -name kernel-lab -exec rm -rf {} + \
 && lab doctor

# The lab finds kernels/ and vectors/ here, and keeps its image cache in target/kernel-lab/.
ENV KERNEL_LAB_ROOT=/lab
CMD ["lab", "run"]
