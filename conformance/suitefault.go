package conformance

import "sync/atomic"

// The suite's own fixes, each switchable off by this package's tests
// alone (the mutation check, TestSuiteFixesAreLoadBearing) to show that a
// declaration mistake of the franchise fixture then goes unnoticed: the
// fix is what catches it. Nothing outside this package can reach them.
var (
	// offCatalogOracle: property 58 checks nothing.
	offCatalogOracle atomic.Bool
	// offVacuous: tool calls after a refused one are made on the closed
	// session (and fail), and no caller's failures fail a property: the
	// behaviour before the vacuous-pass rule.
	offVacuous atomic.Bool
	// offTypedSeeds: fresh unique-key values are integers or text
	// "tmconf-<n>" whatever the column's type.
	offTypedSeeds atomic.Bool
	// offNamedLevelTables: property 58's oracle gives no level to the key
	// of a table the level columns name without a foreign key
	// (tenants.record_id beside tenant_record_id).
	offNamedLevelTables atomic.Bool
	// offPolymorphicRefs: property 58's oracle follows no polymorphic
	// reference of a global table (versions.item_type, item_id).
	offPolymorphicRefs atomic.Bool
)

// switchOff sets b until the returned function is called.
func switchOff(b *atomic.Bool) (restore func()) {
	b.Store(true)
	return func() { b.Store(false) }
}
