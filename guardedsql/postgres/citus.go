package postgres

import pgdialect "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres"

// ErrRLSPlacement is the start-up and periodic check's error on a Citus
// cluster (a database where the citus extension is installed): a shard
// placement of a distributed tenant-bound table does not carry exactly
// the coordinator's row-level security (enabled, forced, the same owner,
// the same policies with the same expressions), the verifying function or
// the key table on the node holding it differs from the coordinator's,
// or the placement could not be read through the coordinator as the
// application role. The error names the table, the shard id and the node
// (host:port). It matches [ErrRLSUnsafe].
//
// Citus runs a distributed table's statements on its shards, where only
// the shards' own policies apply: policies created on the coordinator
// alone (DDL propagation off) would leave every tenant's rows readable
// while the coordinator's catalogs show them in force. See docs/citus.md.
var ErrRLSPlacement = pgdialect.ErrRLSPlacement
