//go:build race

package pgstore_test

// raceEnabled: the race detector slows the node processes several times,
// so timing bounds get more slack under it.
const raceEnabled = true
