//go:build !race

package replicate_test

const raceEnabled = false
