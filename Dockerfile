# memstore server image: one static binary (pure-Go SQLite, no cgo) on a
# distroless base, running as a non-root user.
#   docker build -t memstore .
#   docker run -p 8080:8080 -e MEMSTORE_DATABASE_URL=postgres://… memstore
# Without MEMSTORE_DATABASE_URL it uses SQLite in /data (mount a volume).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/memstore ./cmd/memstore && mkdir -p /out/data

# The worker image (--target worker): the same binary beside a shell, which
# the agent's bash tool runs in, and the CA certificates the slim base lacks
# (a worker of https://api.anthropic.com, or behind a TLS load balancer).
FROM debian:bookworm-slim AS worker
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/*
RUN useradd --uid 65532 --create-home memstore && mkdir -p /mnt/memory && chown memstore /mnt/memory
COPY --from=build /out/memstore /usr/local/bin/memstore
USER memstore
WORKDIR /home/memstore
ENTRYPOINT ["/usr/local/bin/memstore"]
CMD ["worker", "poll"]

# The server image, the default target.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/memstore /usr/local/bin/memstore
# The data folder belongs to the user the server runs as.
COPY --from=build --chown=65532:65532 /out/data /data
USER nonroot:nonroot
ENV MEMSTORE_ADDR=0.0.0.0:8080 MEMSTORE_DATA=/data
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/memstore"]
CMD ["serve"]
