# syntax=docker/dockerfile:1
# Builds the GithubBinding controller (examples/githubbinding), the image
# config/700-deployment.yaml runs:
#
#   docker build -t ghcr.io/bindkit/githubbinding-controller:latest .
#
# The build needs no network beyond the Go module proxy.

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a source change reuses the download layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/controller ./examples/githubbinding/cmd/controller

# Static binary, no shell, UID 65532: runAsNonRoot holds without a numeric
# runAsUser in the Deployment.
FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/controller /controller
USER 65532:65532
ENTRYPOINT ["/controller"]
