// Package trust is the trust suite: tests that make Yella's promises
// falsifiable under faults. It holds only tests, behind the "trust" build
// tag so that plain "go test ./..." stays quick:
//
//	go test -tags trust -v ./internal/tools/trust                  # short forms (what CI runs)
//	go test -tags trust -v ./internal/tools/trust -run RandomKill -long
//	TRUST_REPORT_DIR=$PWD/examples/reports/trust go test -tags trust ./internal/tools/trust -run Soak -long -timeout 3h
//
// Each test prints its invariants and figures and, when TRUST_REPORT_DIR is
// set, writes a JSON result there. Child engine processes are this test
// binary re-executed (see TestMain).
package trust
