# syntax=docker/dockerfile:1
# LeaseQueue: one process, SQLite on a volume, two ports.
#   docker build -t leasequeue .
#   docker run --read-only -v leasequeue-data:/data -p 8080:8080 -p 9464:9464 leasequeue
# With podman, build with --format docker: the OCI format has no HEALTHCHECK.

# NODE_IMAGE: the official image by default. Any Debian-based image with Node.js 20 or newer, npm
# and a `node` user (uid 1000) also works: `npm run test:container` builds on one made from Debian's
# own nodejs and npm (docs/development.md "The container"). Where better-sqlite3's prebuilt binary
# cannot be downloaded, it compiles from source (python3 make g++ below) against the node headers:
# Debian's node-gyp takes them from /usr/include/nodejs, so nothing but npm packages is fetched.
ARG NODE_IMAGE=node:24-bookworm-slim

# ---- build: compile TypeScript, bundle the console and the API reference, build the native SQLite binding
FROM ${NODE_IMAGE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
# Sources first: `npm ci` runs the prepare script (tsc) after installing.
COPY tsconfig.json tsconfig.build.json ./
# The API reference is built from the protos (buf.yaml names the module) and tables in src/.
COPY buf.yaml ./
COPY bin ./bin
COPY gen ./gen
COPY proto ./proto
COPY scripts ./scripts
COPY src ./src
RUN npm ci \
 && npm prune --omit=dev \
 && npm cache clean --force

# ---- runtime: production dependencies and compiled code only ---------------
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    LEASEQUEUE_ENVIRONMENT=production \
    LEASEQUEUE_DATABASE_PATH=/data/leasequeue.db \
    LEASEQUEUE_HOST=0.0.0.0 \
    LEASEQUEUE_PORT=8080 \
    LEASEQUEUE_METRICS_HOST=0.0.0.0 \
    LEASEQUEUE_METRICS_PORT=9464
WORKDIR /app
COPY --from=build --chown=root:root /app/package.json ./package.json
COPY --from=build --chown=root:root /app/node_modules ./node_modules
COPY --from=build --chown=root:root /app/bin ./bin
COPY --from=build --chown=root:root /app/dist/src ./dist/src
COPY --from=build --chown=root:root /app/dist/gen ./dist/gen
# The operations console (esbuild bundle), served at / on the API port.
COPY --from=build --chown=root:root /app/dist/console ./dist/console
# The API reference at /docs: off in production unless LEASEQUEUE_DOCS=on.
COPY --from=build --chown=root:root /app/dist/docs ./dist/docs
# The database lives on a volume owned by the unprivileged `node` user (mode
# 700: job payloads and results are readable by nobody else); the rest of the
# filesystem can be mounted read-only (--read-only; compose.yaml does).
RUN mkdir -p /data && chown node:node /data && chmod 700 /data
VOLUME ["/data"]
USER node
EXPOSE 8080 9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.LEASEQUEUE_METRICS_PORT || 9464) + '/health/ready').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# SIGTERM drains in-flight calls (up to 10 s) and closes the database cleanly.
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "bin/leasequeue.js"]
CMD ["serve"]
