# kernel-lab in a container: Debian 12 with Rust, packages from the same ci/setup.sh as CI.
#   docker build -t kernel-lab .                 (runs the tests while building)
#   docker run --rm kernel-lab lab run --arch riscv64 --no-zbb
FROM rust:1.95.0-slim-bookworm

WORKDIR /lab
COPY ci/setup.sh ci/setup.sh
RUN bash ci/setup.sh && rm -rf /var/lib/apt/lists/*

COPY . .
RUN cargo build --release --locked && cargo test --release --locked \
 && install -m 755 target/release/lab /usr/local/bin/lab

ENV KERNEL_LAB_ROOT=/lab
CMD ["lab", "run"]
