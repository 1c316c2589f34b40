package replicate_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/yella-go/yella/replicate"
)

func TestParseURL(t *testing.T) {
	t.Setenv("LITESTREAM_S3_ENDPOINT", "") // the environment must not change what a URL means here
	ok := []struct {
		in   string
		want replicate.Target
	}{
		{"file:///var/lib/yella/replica", replicate.Target{Scheme: "file", Path: "/var/lib/yella/replica"}},
		{"file://localhost/srv/r", replicate.Target{Scheme: "file", Path: "/srv/r"}},
		{"file:///a%20b/c", replicate.Target{Scheme: "file", Path: "/a b/c"}},
		{"FILE:///upper/scheme", replicate.Target{Scheme: "file", Path: "/upper/scheme"}},
		{"s3://bucket/db/prod", replicate.Target{Scheme: "s3", Bucket: "bucket", Path: "db/prod"}},
		{"s3://bucket", replicate.Target{Scheme: "s3", Bucket: "bucket"}},
		{"s3://bucket/a//b/", replicate.Target{Scheme: "s3", Bucket: "bucket", Path: "a/b"}},
		{"s3://bucket/p?region=eu-west-1", replicate.Target{Scheme: "s3", Bucket: "bucket", Path: "p", Region: "eu-west-1"}},
		{"s3://bucket/p?endpoint=http://127.0.0.1:9000&region=r1", replicate.Target{Scheme: "s3", Bucket: "bucket", Path: "p",
			Endpoint: "http://127.0.0.1:9000", Region: "r1", ForcePathStyle: true}},
		{"s3://bucket/p?endpoint=minio.local:9000", replicate.Target{Scheme: "s3", Bucket: "bucket", Path: "p",
			Endpoint: "http://minio.local:9000", ForcePathStyle: true}}, // local host: http, as Litestream does
		{"s3://bucket/p?endpoint=s3.example.com&force-path-style=false", replicate.Target{Scheme: "s3", Bucket: "bucket", Path: "p",
			Endpoint: "https://s3.example.com"}},
		{"s3://bucket/p?endpoint=https://x.r2.cloudflarestorage.com&skip-verify=true&part-size=5242880", replicate.Target{Scheme: "s3",
			Bucket: "bucket", Path: "p", Endpoint: "https://x.r2.cloudflarestorage.com", SkipVerify: true, ForcePathStyle: true}},
	}
	for _, c := range ok {
		t.Run(c.in, func(t *testing.T) {
			got, err := replicate.ParseURL(c.in)
			if err != nil {
				t.Fatalf("ParseURL(%q): %v", c.in, err)
			}
			if got.String() == "" || got.Scheme != c.want.Scheme || got.Path != c.want.Path || got.Bucket != c.want.Bucket ||
				got.Endpoint != c.want.Endpoint || got.SkipVerify != c.want.SkipVerify || got.ForcePathStyle != c.want.ForcePathStyle ||
				(c.want.Region != "" && got.Region != c.want.Region) {
				t.Errorf("ParseURL(%q) = %+v (%s), want %+v", c.in, got, fmt.Sprintf("%#v", got), c.want.String())
			}
			again, err := replicate.ParseURL(got.String())
			if err != nil || again.String() != got.String() {
				t.Errorf("String() %q does not parse back to itself: %v %q", got.String(), err, again.String())
			}
		})
	}

	bad := []struct{ in, why string }{
		{"", "empty URL"},
		{"   ", "empty URL"},
		{"/var/lib/replica", "no scheme"},
		{"replica-dir", "no scheme"},
		{"file://relative/dir", `host "relative"`},
		{"file:relative/dir", "relative path"},
		{"file:", "not absolute"},
		{"file://", "not absolute"},
		{"file:///", "root directory"},
		{"file:///a?x=1", "query"},
		{"file:///a#frag", "fragment"},
		{"file://user@/a", "user information"},
		{"file:///a%00b", "NUL"},
		{"gs://bucket/path", `unsupported scheme "gs"`},
		{"http://example.com/x", `unsupported scheme "http"`},
		{"s3:///path", "without a bucket"},
		{"s3://", "without a bucket"},
		{"s3:bucket/path", "without //"},
		{"s3://AKIA:secret@bucket/path", "credentials"},
		{"s3://bucket/p?endpont=http://x:9000", `unknown s3 URL parameter "endpont"`},
		{"s3://bucket/p?region=a&region=b", "given 2 times"},
		{"s3://bucket/p?skip-verify=maybe", "wants a boolean"},
		{"s3://bucket/p?part-size=-1", "positive integer"},
		{"s3://bucket/p?region=", "is empty"},
		{"s3://bucket/p?endpoint=ftp://host:21", `endpoint scheme "ftp"`},
		{"s3://bucket/p?endpoint=http://:9000", "without a host"},
		{"s3://bucket/p?endpoint=http://u:p@h:9000", "credentials"},
		{"s3://bucket/p?endpoint=http://h:99999", "port"},
		{"s3://localhost:9000/path", "names none"},
		{"s3://bucket/p#x", "fragment"},
		{"s3://arn:aws:s3:us-east-1:1:accesspoint/ap/p", "ARNs are not supported"},
		{"::::", "cannot parse"},
		{"s3://bu cket/p", "cannot parse"},
		{"\x7f", "cannot parse"},
	}
	for _, c := range bad {
		t.Run(c.in, func(t *testing.T) {
			got, err := replicate.ParseURL(c.in)
			if err == nil {
				t.Fatalf("ParseURL(%q) = %v, want an error about %s", c.in, got, c.why)
			}
			if !errors.Is(err, replicate.ErrInvalidURL) || !strings.Contains(err.Error(), c.why) {
				t.Errorf("ParseURL(%q) error %q: want ErrInvalidURL naming %q", c.in, err, c.why)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q repeats the secret", err)
			}
		})
	}
}

// A Target prints without its secret key, in every verb.
func TestTargetRedactsSecrets(t *testing.T) {
	tg, err := replicate.ParseURL("s3://bucket/p?endpoint=http://127.0.0.1:9000&sse-customer-key=c2VjcmV0LWtleQ")
	if err != nil {
		t.Fatal(err)
	}
	tg.AccessKeyID, tg.SecretAccessKey = "AKIAEXAMPLE", "very-secret-value"
	for _, s := range []string{tg.String(), fmt.Sprint(tg), fmt.Sprintf("%v %+v %#v %s", tg, tg, tg, tg), fmt.Sprint(&tg)} {
		if strings.Contains(s, "very-secret-value") || strings.Contains(s, "c2VjcmV0LWtleQ") {
			t.Errorf("printed target shows a secret: %s", s)
		}
		if !strings.Contains(s, "s3://bucket/p") {
			t.Errorf("printed target %q does not name the replica", s)
		}
	}
}

// Credentials come from the Target's fields, and the fields must come in
// pairs; a hand-built Target is validated like a parsed one.
func TestTargetValidation(t *testing.T) {
	for _, tg := range []replicate.Target{
		{},
		{Scheme: "file", Path: "relative"},
		{Scheme: "ftp", Path: "/x"},
		{Scheme: "s3", Path: "p"},
		{Scheme: "s3", Bucket: "b/c"},
		{Scheme: "s3", Bucket: "b", AccessKeyID: "only-the-id"},
		{Scheme: "s3", Bucket: "b", Endpoint: "gopher://x"},
	} {
		_, err := replicate.Start(t.Context(), "/nonexistent.db", tg, replicate.Options{})
		if err == nil || (!errors.Is(err, replicate.ErrInvalidURL) && !errors.Is(err, replicate.ErrNotWAL)) {
			t.Errorf("Start with %#v: %v, want a clear error", tg, err)
		}
		if err := replicate.Restore(t.Context(), tg, t.TempDir()+"/x.db", replicate.RestoreOptions{}); !errors.Is(err, replicate.ErrInvalidURL) {
			t.Errorf("Restore from %#v: %v, want ErrInvalidURL", tg, err)
		}
	}
}

// FuzzParseURL: ParseURL never panics, every error wraps ErrInvalidURL,
// and a parsed Target prints a URL that parses back to the same Target.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"file:///var/lib/replica", "file://localhost/x", "file://rel/x", "file:rel", "file:///",
		"s3://bucket/path", "s3://bucket/p?endpoint=http://127.0.0.1:9000&region=r",
		"s3://bucket/p?endpoint=minio:9000&force-path-style=false", "s3://b.c:9000/p", "s3://u:p@b/p",
		"s3://bucket/p?sse-customer-key=abc&part-size=10", "s3://arn:aws:s3:r:1:accesspoint/a/p", "s3:///x",
		"", " ", "%", "::", "s3://[::1]:9000/p", "file:///a%00b", "s3://bucket/p?endpoint=http://h:0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := replicate.ParseURL(s)
		if err != nil {
			if !errors.Is(err, replicate.ErrInvalidURL) {
				t.Fatalf("ParseURL(%q): error %v does not wrap ErrInvalidURL", s, err)
			}
			return
		}
		if tg.Scheme != "file" && tg.Scheme != "s3" {
			t.Fatalf("ParseURL(%q) gave scheme %q", s, tg.Scheme)
		}
		again, err := replicate.ParseURL(tg.String())
		if err != nil {
			t.Fatalf("ParseURL(%q) = %s, which does not parse: %v", s, tg, err)
		}
		if again.String() != tg.String() || again.Path != tg.Path || again.Bucket != tg.Bucket || again.Endpoint != tg.Endpoint {
			t.Fatalf("round trip of %q: %s then %s", s, tg, again)
		}
	})
}
