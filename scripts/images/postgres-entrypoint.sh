#!/bin/sh
# First start: initdb, the schema owner and the service roles (as CloudNativePG's initdb and
# managed roles do), the database and pgvector. Every start: exec postgres on 0.0.0.0:5432.
#   POSTGRES_PASSWORD        the superuser's password (scram-sha-256 over TCP)
#   KNOWLEDGE_DB_OWNER       owner of the database "knowledge" (runs the migrations); its
#   KNOWLEDGE_DB_OWNER_PASSWORD
#   KNOWLEDGE_DB_ROLES       "role=password role=password ...": the services' login roles
set -eu
: "${PGDATA:=/var/lib/postgresql/data}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
    initdb -D "$PGDATA" -U postgres --pwfile="$pwfile" -E UTF8 --no-locale \
        --auth-local=trust --auth-host=scram-sha-256
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses= -k /tmp" -w start
    {
        echo "CREATE ROLE \"$KNOWLEDGE_DB_OWNER\" LOGIN PASSWORD '$KNOWLEDGE_DB_OWNER_PASSWORD';"
        echo "CREATE DATABASE knowledge OWNER \"$KNOWLEDGE_DB_OWNER\";"
        for pair in ${KNOWLEDGE_DB_ROLES:-}; do
            echo "CREATE ROLE \"${pair%%=*}\" LOGIN PASSWORD '${pair#*=}';"
        done
        printf '%s\n' '\connect knowledge' # (printf: dash's echo reads "\c" as an escape)
        echo "CREATE EXTENSION IF NOT EXISTS vector;"
    } | psql -h /tmp -U postgres -d postgres -v ON_ERROR_STOP=1 -q
    pg_ctl -D "$PGDATA" -m fast -w stop
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -k /tmp "$@"
