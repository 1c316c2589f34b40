//go:build race

package replicate_test

// raceEnabled: the race detector makes modernc SQLite many times slower, so
// the heaviest loops shrink or skip under it.
const raceEnabled = true
