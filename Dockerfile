# Warren in a container: a static binary on a distroless base, run as a
# non-root user, state in the /var/lib/warren volume.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) \
#     --build-arg COMMIT=$(git rev-parse HEAD) -t warren .
#   docker run -p 5672:5672 -p 15672:15672 -p 15692:15692 -v warren-data:/var/lib/warren warren
#
# Settings are WARREN_* variables (docker run -e WARREN_DEFAULT_USER=...)
# or a config file mounted and named by WARREN_CONFIG.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/warrenmq/warren/internal/buildinfo.Version=${VERSION} -X github.com/warrenmq/warren/internal/buildinfo.Commit=${COMMIT}" \
      -o /out/warren ./cmd/warren && \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/warrenmq/warren/internal/buildinfo.Version=${VERSION} -X github.com/warrenmq/warren/internal/buildinfo.Commit=${COMMIT}" \
      -o /out/warrenctl ./cmd/warrenctl && \
    mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/warren /out/warrenctl /usr/local/bin/
COPY --from=build --chown=65532:65532 /out/data /var/lib/warren
USER 65532:65532
ENV WARREN_DATA_DIR=/var/lib/warren \
    WARREN_LOG_FORMAT=json
VOLUME ["/var/lib/warren"]
EXPOSE 5672 5671 15672 15692
# The management API's listener check, as guest from loopback; with another
# default user set WARRENCTL_USER and WARRENCTL_PASSWORD as well.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["/usr/local/bin/warrenctl", "--url", "http://127.0.0.1:15672", "health"]
# SIGTERM closes connections with 320 CONNECTION_FORCED and flushes the
# store: give it time (docker stop -t 60).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/warren"]
