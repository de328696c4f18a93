#!/bin/sh
# Entry point of the Redis base (infra/docker/Containerfile.base): `redis-server ARGS` runs with protected
# mode off, as the official image's does; anything else is executed as given (redis-cli ...).
set -eu
if [ "${1:-}" = "redis-server" ]; then
  shift
  exec redis-server --protected-mode no "$@"
fi
exec "$@"
