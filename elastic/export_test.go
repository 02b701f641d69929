package elastic

// The in-package test helpers that the external tests (package
// elastic_test: the process tests, which run bench/recovery's ranks, and
// bench/recovery imports this package) use too.
var (
	FreePortsForTest = freePorts
	SeedListForTest  = seedList
	LoggerForTest    = testLogger
)
