#!/usr/bin/env bash
# seed.sh: the issue-24 data set (10,000 stores × 100 memories × 5 versions of
# 512 bytes) written straight into a SQLite data folder and a PostgreSQL
# database through memstore's storage layer (bench --seed --direct), for
# measure.sh. SHAPE overrides the shape.
set -euo pipefail
ROOT=${ROOT:-/tmp/scale1m}
MEMSTORE=${MEMSTORE:-memstore}
SHAPE=${SHAPE:-10000x100x5}
PGADMIN=${PGADMIN:-'postgres://memstore:memstore@localhost:5432/memstore_test?sslmode=disable'}
PGURL=${PGURL:-'postgres://memstore:memstore@localhost:5432/memstore_scale?sslmode=disable&pool_max_conns=16'}
BACKENDS=("$@")
[ ${#BACKENDS[@]} -gt 0 ] || BACKENDS=(sqlite postgres)
mkdir -p "$ROOT"
for b in "${BACKENDS[@]}"; do
	echo "uptime before the $b seed: $(uptime)"
	if [ "$b" = sqlite ]; then
		rm -rf "$ROOT/sqlite"
		time "$MEMSTORE" bench --seed "$SHAPE" --direct --data "$ROOT/sqlite" --output table
	else
		psql "$PGADMIN" -c 'DROP DATABASE IF EXISTS memstore_scale' -c 'CREATE DATABASE memstore_scale'
		time "$MEMSTORE" bench --seed "$SHAPE" --direct --database "$PGURL" --concurrency 8 --output table
	fi
	echo "uptime after the $b seed: $(uptime)"
done
