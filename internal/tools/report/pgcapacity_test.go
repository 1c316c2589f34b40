package report

import "testing"

func TestNaturalLess(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"api-mixed__fleet-c50", "api-mixed__fleet-c200", true},
		{"api-mixed__fleet-c200", "api-mixed__fleet-c50", false},
		{"api-mixed__fleet-c20", "api-mixed__fleet-c50", true},
		{"scraper__c1", "scraper__c10", true},
		{"scraper__c10", "scraper__c5", false},
		{"a", "b", true},
		{"a", "a", false},
		{"a", "a1", true},
		{"c007", "c8", true},
		{"c8", "c007", false},
	} {
		if got := naturalLess(tc.a, tc.b); got != tc.want {
			t.Errorf("naturalLess(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
