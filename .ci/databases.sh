# shellcheck shell=bash
# Sourced by .ci/run: makes the live PostgreSQL and MariaDB/MySQL servers
# available to the tests and exports the admin DSNs they read:
#
#   TENANTMCP_TEST_POSTGRES_DSN  postgres://postgres@127.0.0.1:5432/<db>?sslmode=disable
#   TENANTMCP_TEST_MYSQL_DSN     mysql://root@tcp(127.0.0.1:3306)/<db>
#   TENANTMCP_TEST_REDIS_ADDR    127.0.0.1:6379
#
# A DSN already set in the environment is kept (and only waited for).
# Otherwise the local servers are waited for and, if they do not answer,
# started (pg_ctlcluster for the Debian PostgreSQL cluster, mariadbd through
# start-stop-daemon). The tests create their own schemas, databases and
# roles with unique names (tm_test_*, tm_app_*, tm_owner_*) and drop them
# when they finish; the benchmark's tenantmcp_bench database is only
# created when TENANTMCP_BENCH_DATASET=1.
#
# A server that cannot be reached is an error (the sourcing script stops)
# unless TENANTMCP_CI_DATABASES=optional, in which case its DSN stays unset
# and its live tests skip with a message.

_tm_db_wait() { # name, seconds, command...
	local name=$1 secs=$2 i
	shift 2
	for ((i = 0; i < secs; i++)); do
		if "$@" >/dev/null 2>&1; then
			return 0
		fi
		sleep 1
	done
	echo "databases.sh: $name did not answer within ${secs}s" >&2
	return 1
}

_tm_db_fail() {
	if [ "${TENANTMCP_CI_DATABASES:-required}" = optional ]; then
		echo "databases.sh: WARNING: $1; its live tests will skip" >&2
		return 0
	fi
	echo "databases.sh: $1 (set TENANTMCP_CI_DATABASES=optional to skip the live tests instead)" >&2
	return 1
}

_tm_pg_ready() { pg_isready -q -h 127.0.0.1 -p 5432 -t 2; }

_tm_mysql_ping() {
	local admin
	admin=$(command -v mariadb-admin || command -v mysqladmin) || return 1
	"$admin" --protocol=tcp -h 127.0.0.1 -P 3306 -uroot --connect-timeout=2 ping
}

_tm_setup_postgres() {
	if [ -n "${TENANTMCP_TEST_POSTGRES_DSN:-}" ]; then
		echo "databases.sh: PostgreSQL DSN given by the environment"
		return 0
	fi
	if ! command -v pg_isready >/dev/null 2>&1; then
		_tm_db_fail "PostgreSQL client tools not installed"
		return
	fi
	if ! _tm_db_wait PostgreSQL 3 _tm_pg_ready; then
		if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
			local v
			for v in $(ls /etc/postgresql); do
				echo "databases.sh: starting PostgreSQL cluster $v/main"
				pg_ctlcluster --skip-systemctl-redirect "$v" main start || true
			done
		fi
		if ! _tm_db_wait PostgreSQL 60 _tm_pg_ready; then
			_tm_db_fail "PostgreSQL is not reachable on 127.0.0.1:5432"
			return
		fi
	fi
	local db=postgres
	if psql -h 127.0.0.1 -U postgres -d test -Atc 'SELECT 1' >/dev/null 2>&1; then
		db=test
	fi
	export TENANTMCP_TEST_POSTGRES_DSN="postgres://postgres@127.0.0.1:5432/$db?sslmode=disable"
	echo "databases.sh: PostgreSQL ready ($TENANTMCP_TEST_POSTGRES_DSN)"
}

_tm_setup_mysql() {
	if [ -n "${TENANTMCP_TEST_MYSQL_DSN:-}" ]; then
		echo "databases.sh: MySQL DSN given by the environment"
		return 0
	fi
	if ! command -v mariadb-admin >/dev/null 2>&1 && ! command -v mysqladmin >/dev/null 2>&1; then
		_tm_db_fail "MariaDB/MySQL client tools not installed"
		return
	fi
	if ! _tm_db_wait MariaDB 3 _tm_mysql_ping; then
		if [ -x /usr/sbin/mariadbd ]; then
			echo "databases.sh: starting mariadbd"
			if [ -d /run ] && [ ! -d /run/mysqld ]; then
				mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
			fi
			start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd || true
		fi
		if ! _tm_db_wait MariaDB 60 _tm_mysql_ping; then
			_tm_db_fail "MariaDB/MySQL is not reachable on 127.0.0.1:3306"
			return
		fi
	fi
	local client db=mysql
	client=$(command -v mariadb || command -v mysql)
	if "$client" --protocol=tcp -h 127.0.0.1 -P 3306 -uroot -e 'USE test' >/dev/null 2>&1; then
		db=test
	fi
	export TENANTMCP_TEST_MYSQL_DSN="mysql://root@tcp(127.0.0.1:3306)/$db"
	echo "databases.sh: MariaDB ready ($TENANTMCP_TEST_MYSQL_DSN)"
}

# Redis backs the optional shared stores (server/redisstore: rates and
# spent consent states); the library never needs it.
_tm_redis_ping() { redis-cli -h 127.0.0.1 -p 6379 ping | grep -q PONG; }

_tm_setup_redis() {
	if [ -n "${TENANTMCP_TEST_REDIS_ADDR:-}" ]; then
		echo "databases.sh: Redis address given by the environment"
		return 0
	fi
	if ! command -v redis-cli >/dev/null 2>&1; then
		_tm_db_fail "Redis client tools not installed"
		return
	fi
	if ! _tm_db_wait Redis 3 _tm_redis_ping; then
		if command -v redis-server >/dev/null 2>&1; then
			echo "databases.sh: starting redis-server"
			redis-server --bind 127.0.0.1 --port 6379 --save '' --appendonly no --daemonize yes >/dev/null || true
		fi
		if ! _tm_db_wait Redis 30 _tm_redis_ping; then
			_tm_db_fail "Redis is not reachable on 127.0.0.1:6379"
			return
		fi
	fi
	export TENANTMCP_TEST_REDIS_ADDR=127.0.0.1:6379
	echo "databases.sh: Redis ready ($TENANTMCP_TEST_REDIS_ADDR)"
}

echo "== databases"
_tm_setup_postgres
_tm_setup_mysql
_tm_setup_redis
unset -f _tm_db_wait _tm_db_fail _tm_pg_ready _tm_mysql_ping _tm_setup_postgres _tm_setup_mysql _tm_redis_ping _tm_setup_redis
