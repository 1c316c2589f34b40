package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestSignInInBrowser drives the sign-in of a "yella serve" that has a
// token, in headless Chromium: a page asks for sign-in and comes back
// after it, a wrong token is refused, the session cookie is invisible to
// scripts (HttpOnly), the live stream works with it, and Sign out ends the
// session.
func TestSignInInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: not in -short")
	}
	exe := chromium(t)
	const token = "browser-test-token-0123456789"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startServe(t, "--demo-rate", "2", "--token-file", tokenFile)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Headless, chromedp.WindowSize(1280, 900), chromedp.DisableGPU)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	// A page without a session goes to the sign-in form.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/runs?status=idle"), chromedp.WaitVisible(chromedp.CSS("#token"))); err != nil {
		t.Fatalf("sign-in form: %v", err)
	}
	signIn := func(tok string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#token"), tok), chromedp.Submit(chromedp.CSS("#token")), chromedp.WaitReady(chromedp.CSS("body"))); err != nil {
			t.Fatal(err)
		}
	}
	signIn("not-the-token-at-all")
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("[role=alert]"))); err != nil {
		t.Fatalf("a wrong token: %v", err)
	}
	if alert, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("[role=alert]"))); err != nil || !strings.Contains(alert, "not right") {
		t.Fatalf("a wrong token: %q %v", alert, err)
	}
	signIn(token)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("#signout"))); err != nil {
		t.Fatalf("after signing in: %v", err)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || !strings.HasSuffix(loc, "/runs?status=idle") {
		t.Errorf("after signing in the browser is at %s (%v), want the page it asked for", loc, err)
	}
	cookies, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`))
	if err != nil || strings.Contains(cookies, "yella_session") || strings.Contains(cookies, token) {
		t.Errorf("scripts see the session: %q %v", cookies, err)
	}
	// The live stream connects with the session.
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#live[data-state="on"]`))); err != nil {
		t.Fatalf("live updates with the session: %v", err)
	}
	// Sign out: back to the form, and the pages need signing in again.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#token"))); err != nil {
		t.Fatalf("sign out: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#token"))); err != nil {
		t.Fatalf("after signing out: %v", err)
	}
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || !strings.Contains(loc, "/login") {
		t.Errorf("after signing out, / shows %s (%v)", loc, err)
	}
}
