# syntax=docker/dockerfile:1
# multicloud-ccm: a static binary on a distroless, non-root base.
#   docker build --build-arg VERSION=v0.1.0 -t multicloud-ccm .
# VERSION must be semantic (vMAJOR.MINOR.PATCH[-suffix]): Kubernetes'
# metrics registry parses it at start-up and panics on anything else.
# The image has no shell; the root filesystem can be mounted read-only (the
# chart does): the binary writes nothing to disk.

# Both bases are pinned by digest: the tag says what it is, the digest what
# is pulled (update with `crane digest golang:1.26-bookworm` and `crane digest
# gcr.io/distroless/static-debian12:nonroot`). Public registries cannot be
# reached on the project's CI machines, so these digests are not pulled there:
# test/e2e/chart's TestDockerfile only checks that they are pinned, and the
# image CI builds and tests is `make image` (hack/image/build.sh), which
# assembles the same layout (static binary, CA certificates, tzdata,
# nonroot 65532) from Debian packages without a container engine.
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm@sha256:b305420a68d0f229d91eb3b3ed9e519fcf2cf5461da4bef997bf927e8c0bfd2b AS build
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
FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
ARG VERSION=v0.0.0-dev
LABEL org.opencontainers.image.title="multicloud-ccm" \
      org.opencontainers.image.description="Kubernetes cloud-controller-manager for clusters spanning several clouds" \
      org.opencontainers.image.source="https://github.com/multicloud-ccm/multicloud-ccm" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/multicloud-ccm /usr/local/bin/multicloud-ccm
USER 65532:65532
EXPOSE 10258
ENTRYPOINT ["/usr/local/bin/multicloud-ccm"]
