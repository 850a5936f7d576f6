# syntax=docker/dockerfile:1
# multicloud-ccm: a static binary on a distroless, non-root base.
#   docker build --build-arg VERSION=v0.1.0 -t multicloud-ccm .
# VERSION must be semantic (vMAJOR.MINOR.PATCH[-suffix]): Kubernetes'
# metrics registry parses it at start-up and panics on anything else.
# The image has no shell; the root filesystem can be mounted read-only (the
# chart does): the binary writes nothing to disk.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Dependencies first, so a source change does not re-download modules.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
COPY internal/ internal/
ARG VERSION=v0.0.0-dev
ARG TARGETOS=linux
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} GOFLAGS=-buildvcs=false \
    go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=${VERSION}" \
      -o /out/multicloud-ccm ./cmd/multicloud-ccm

# distroless/static: CA certificates, tzdata, /etc/passwd with nonroot
# (65532), no shell or package manager.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=v0.0.0-dev
LABEL org.opencontainers.image.title="multicloud-ccm" \
      org.opencontainers.image.description="Kubernetes cloud-controller-manager for clusters spanning several clouds" \
      org.opencontainers.image.source="https://github.com/multicloud-ccm/multicloud-ccm" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/multicloud-ccm /usr/local/bin/multicloud-ccm
USER 65532:65532
EXPOSE 10258
ENTRYPOINT ["/usr/local/bin/multicloud-ccm"]
