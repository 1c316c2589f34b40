//go:build !unix

package replicate

// lockEngine is a no-op where the store takes no engine lock.
func lockEngine(string) (func(), error) { return func() {}, nil }
