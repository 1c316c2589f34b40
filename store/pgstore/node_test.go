package pgstore_test

// nodeMain runs the test binary as a node process when the environment
// asks for it (see the multi-process tests); it reports whether it did.
func nodeMain() bool { return false }
