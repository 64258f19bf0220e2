# syntax=docker/dockerfile:1
#
# Sepp's container image: docker build -t sepp --build-arg VERSION=v0.1.0 .
# See docs/deploy.md. The image runs
#
#   sepp serve --config /etc/sepp/sepp.toml
#
# as user 65532, with the embedded store in the /data volume, listening on
# 0.0.0.0:50051. Mount a config there: sepp refuses to start on 0.0.0.0
# unless the config has [[auth.tokens]] or sets [server]
# allow_unauthenticated = true (docs/security.md), and without the file it
# stops with "cannot read the config file".

FROM golang:1.26 AS build
WORKDIR /src
# The whole tree: the build runs in the workspace of go.work, whose
# go.work.sum completes go.sum. The cache mounts keep downloaded modules and
# compiled packages between builds (BuildKit).
COPY . .
ARG VERSION=dev
# The same command deploy/check.sh runs in CI.
RUN --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    sh deploy/build.sh /out/sepp "$VERSION" && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sepp /usr/local/bin/sepp
COPY --from=build --chown=65532:65532 /out/data /data
# The embedded store's data directory and the address: these variables
# override [storage] path and [server] listen of the mounted config.
ENV SEPP_STORAGE_PATH=/data \
    SEPP_LISTEN=0.0.0.0:50051
VOLUME ["/data"]
EXPOSE 50051
USER 65532:65532
# No HEALTHCHECK: the image has no shell or curl. Probe GET /healthz
# (alive) and GET /readyz (store readable) on port 50051 from the outside,
# as the Kubernetes example in deploy/kubernetes does.
ENTRYPOINT ["/usr/local/bin/sepp"]
CMD ["serve", "--config", "/etc/sepp/sepp.toml"]
