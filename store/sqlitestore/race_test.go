//go:build race

package sqlitestore_test

// raceEnabled: the race detector slows modernc's SQLite several times, so
// the crash tests shrink under it; .ci/run also runs them full size without.
const raceEnabled = true
