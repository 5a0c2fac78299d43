# servelab in a small image, for `servelab scale k8s` (docs/scale.md).
#   docker build -t servelab:0.1.0 .
# Stage 1 builds a static binary: Rust on Alpine targets musl, which links statically; the C
# in the tree (SQLite, bundled; ring) needs only a C compiler.
FROM rust:1-alpine AS build
RUN apk add --no-cache build-base
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p servelab \
 && strip target/release/servelab \
 && ./target/release/servelab --version

# Stage 2: the binary on busybox, whose shell the merge Job's wait loop uses. Shards write to
# the mounted results volume; run as a user that may write there (securityContext).
FROM busybox:1.37-musl
COPY --from=build /src/target/release/servelab /usr/local/bin/servelab
ENTRYPOINT ["servelab"]
