package replicate

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/benbjohnson/litestream"
	"github.com/benbjohnson/litestream/file"
	"github.com/benbjohnson/litestream/s3"
)

// ErrInvalidURL is wrapped by every error ParseURL returns (and by Start and
// Restore for a Target that does not validate). The message names the
// problem; it never repeats credentials.
var ErrInvalidURL = errors.New("invalid replica URL")

// Target is where a database is replicated to: a directory (file) or a key
// prefix in an S3-compatible bucket (s3). Build it with ParseURL, then set
// the credential fields from configuration if they are not in the
// environment. Printing a Target (%v, %+v, %#v) never shows the secret.
type Target struct {
	// Scheme is "file" or "s3".
	Scheme string
	// Path is, for file, the absolute replica directory; for s3, the key
	// prefix inside the bucket (no leading slash; empty for the bucket root).
	Path string

	// Bucket is the S3 bucket. s3 only.
	Bucket string
	// Endpoint is the URL of an S3-compatible service (MinIO, R2, B2, ...),
	// with its scheme; empty means AWS. s3 only.
	Endpoint string
	// Region is the bucket's region; empty means us-east-1 with a custom
	// endpoint, or a lookup of the bucket's region on AWS. s3 only.
	Region string
	// ForcePathStyle addresses the bucket as endpoint/bucket rather than
	// bucket.endpoint. ParseURL sets it for a custom endpoint, as Litestream
	// does (MinIO and most S3-compatible services need it). s3 only.
	ForcePathStyle bool
	// SkipVerify disables TLS certificate verification (self-signed test
	// endpoints only). s3 only.
	SkipVerify bool
	// AccessKeyID and SecretAccessKey are the S3 credentials. Empty means
	// the environment, as Litestream reads it: AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY, else LITESTREAM_ACCESS_KEY_ID and
	// LITESTREAM_SECRET_ACCESS_KEY, else the AWS SDK's default chain
	// (~/.aws/credentials, instance and task roles). They are deliberately
	// not accepted in the URL, which ends up in logs and process lists.
	AccessKeyID     string
	SecretAccessKey string

	// query keeps Litestream's provider options from the URL (part size,
	// signing, SSE...), passed on to its S3 client unchanged.
	query url.Values
}

// s3Params are the query parameters Litestream v0.5.18's S3 client reads
// (s3/replica_client.go, NewReplicaClientFromURL); anything else is a typo
// that Litestream would silently ignore, so ParseURL refuses it.
var s3Params = map[string]string{
	"endpoint": "", "region": "",
	"forcePathStyle": "bool", "force-path-style": "bool",
	"skipVerify": "bool", "skip-verify": "bool",
	"signPayload": "bool", "sign-payload": "bool",
	"signAcceptEncoding": "bool", "sign-accept-encoding": "bool",
	"requireContentMD5": "bool", "require-content-md5": "bool",
	"putObjectContentMD5": "bool", "put-object-content-md5": "bool",
	"concurrency": "int", "partSize": "int", "part-size": "int",
	"storageClass": "", "storage-class": "",
	"sseCustomerAlgorithm": "", "sse-customer-algorithm": "",
	"sseCustomerKey": "", "sse-customer-key": "",
	"sseCustomerKeyMD5": "", "sse-customer-key-md5": "",
	"sseKmsKeyId": "", "sse-kms-key-id": "",
}

// secretParams are redacted when a Target is printed.
var secretParams = []string{"sseCustomerKey", "sse-customer-key"}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidURL, fmt.Sprintf(format, args...))
}

// ParseURL parses a replica URL:
//
//	file:///absolute/path/to/replica-dir
//	s3://bucket/key/prefix?endpoint=http://127.0.0.1:9000&region=eu-west-1
//
// A file URL must name an absolute directory (file://relative/dir and
// file:dir are refused: the host part would silently be dropped). An s3 URL
// must name a bucket; it takes Litestream's query parameters (endpoint,
// region, force-path-style, skip-verify, sign-payload, part-size, SSE, ...)
// and refuses unknown ones and credentials in the URL. Credentials come from
// the Target's fields or the environment (see Target.AccessKeyID). Every
// error wraps ErrInvalidURL and names the problem.
func ParseURL(s string) (Target, error) {
	if strings.TrimSpace(s) == "" {
		return Target{}, invalid("empty URL (want file:///absolute/dir or s3://bucket/path)")
	}
	if strings.HasPrefix(strings.ToLower(s), "s3://arn:") {
		return Target{}, invalid("S3 access point ARNs are not supported (want s3://bucket/path)")
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, which may hold secrets
		}
		return Target{}, invalid("cannot parse: %v", err)
	}
	switch u.Scheme {
	case "file":
		return parseFile(u)
	case "s3":
		return parseS3(u)
	case "":
		return Target{}, invalid("no scheme (want file:///absolute/dir or s3://bucket/path)")
	default:
		return Target{}, invalid("unsupported scheme %q (supported: file, s3)", u.Scheme)
	}
}

func parseFile(u *url.URL) (Target, error) {
	switch {
	case u.Opaque != "":
		return Target{}, invalid("file URL with a relative path %q (want file:///absolute/dir)", u.Opaque)
	case u.User != nil:
		return Target{}, invalid("file URL with user information")
	case u.Host != "" && u.Host != "localhost":
		return Target{}, invalid("file URL with host %q: a relative path? (want file:///absolute/dir, three slashes)", u.Host)
	case u.RawQuery != "" || u.ForceQuery:
		return Target{}, invalid("file URL with a query (file replicas take no parameters)")
	case u.Fragment != "":
		return Target{}, invalid("file URL with a fragment")
	}
	t := Target{Scheme: "file", Path: u.Path}
	return t, t.validate()
}

func parseS3(u *url.URL) (Target, error) {
	switch {
	case u.Opaque != "":
		return Target{}, invalid("s3 URL without // (want s3://bucket/path)")
	case u.User != nil:
		return Target{}, invalid("s3 URL with credentials: set Target.AccessKeyID and SecretAccessKey, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	case u.Host == "":
		return Target{}, invalid("s3 URL without a bucket (want s3://bucket/path)")
	case u.Fragment != "":
		return Target{}, invalid("s3 URL with a fragment")
	}
	q := u.Query()
	for k, vs := range q {
		kind, ok := s3Params[k]
		if !ok {
			return Target{}, invalid("unknown s3 URL parameter %q (known: endpoint, region, force-path-style, skip-verify, sign-payload, part-size, concurrency, storage-class, sse-*)", k)
		}
		if len(vs) != 1 {
			return Target{}, invalid("s3 URL parameter %q given %d times", k, len(vs))
		}
		if err := checkParam(k, kind, vs[0]); err != nil {
			return Target{}, err
		}
	}
	if e := q.Get("endpoint"); e != "" {
		if scheme, _, ok := strings.Cut(e, "://"); ok && scheme != "http" && scheme != "https" {
			return Target{}, invalid("s3 endpoint scheme %q (want http or https)", scheme)
		}
		e, _ = litestream.EnsureEndpointScheme(e)
		if err := checkEndpoint(e); err != nil {
			return Target{}, err
		}
		q.Set("endpoint", e)
	}
	prefix := litestream.CleanReplicaURLPath(u.Path)
	c, err := s3.NewReplicaClientFromURL("s3", u.Host, prefix, q, nil)
	if err != nil && !strings.Contains(err.Error(), "bucket required") {
		return Target{}, invalid("%v", err)
	}
	sc, _ := c.(*s3.ReplicaClient)
	if sc == nil || sc.Bucket == "" {
		return Target{}, invalid("s3 URL without a bucket: host %q names none (want s3://bucket/path?endpoint=host:port)", u.Host)
	}
	t := Target{Scheme: "s3", Path: prefix, Bucket: sc.Bucket, Endpoint: sc.Endpoint, Region: sc.Region,
		ForcePathStyle: sc.ForcePathStyle, SkipVerify: sc.SkipVerify, query: q}
	return t, t.validate()
}

func checkParam(k, kind, v string) error {
	switch kind {
	case "bool":
		switch strings.ToLower(v) {
		case "true", "1", "t", "yes", "false", "0", "f", "no":
			return nil
		}
		return invalid("s3 URL parameter %q wants a boolean, got %q", k, v)
	case "int":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return invalid("s3 URL parameter %q wants a positive integer, got %q", k, v)
		}
	default:
		if v == "" {
			return invalid("s3 URL parameter %q is empty", k)
		}
	}
	return nil
}

func checkEndpoint(e string) error {
	eu, err := url.Parse(e)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return invalid("s3 endpoint: %v", err)
	}
	switch {
	case eu.Scheme != "http" && eu.Scheme != "https":
		return invalid("s3 endpoint scheme %q (want http or https)", eu.Scheme)
	case eu.Hostname() == "":
		return invalid("s3 endpoint without a host")
	case eu.User != nil:
		return invalid("s3 endpoint with credentials")
	case eu.RawQuery != "" || eu.Fragment != "":
		return invalid("s3 endpoint with a query or fragment")
	}
	if p := eu.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return invalid("s3 endpoint port %q", p)
		}
	}
	return nil
}

// validate checks a Target, whether parsed or built by hand.
func (t Target) validate() error {
	switch t.Scheme {
	case "file":
		if t.Path == "" || !filepath.IsAbs(t.Path) {
			return invalid("file replica path %q is not absolute (want file:///absolute/dir)", t.Path)
		}
		if strings.ContainsRune(t.Path, 0) {
			return invalid("file replica path contains a NUL byte")
		}
		if filepath.Clean(t.Path) == string(filepath.Separator) {
			return invalid("file replica path is the root directory")
		}
	case "s3":
		if t.Bucket == "" {
			return invalid("s3 target without a bucket")
		}
		if strings.ContainsAny(t.Bucket, "/\x00") {
			return invalid("s3 bucket %q contains '/' or NUL", t.Bucket)
		}
		if strings.ContainsRune(t.Path, 0) {
			return invalid("s3 path contains a NUL byte")
		}
		if t.Endpoint != "" {
			if err := checkEndpoint(t.Endpoint); err != nil {
				return err
			}
		}
		if (t.AccessKeyID == "") != (t.SecretAccessKey == "") {
			return invalid("s3 credentials: set both AccessKeyID and SecretAccessKey, or neither")
		}
	case "":
		return invalid("target without a scheme (use ParseURL)")
	default:
		return invalid("unsupported scheme %q (supported: file, s3)", t.Scheme)
	}
	return nil
}

// newClient builds the Litestream replica client for t.
func (t Target) newClient() (litestream.ReplicaClient, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	if t.Scheme == "file" {
		return file.NewReplicaClient(filepath.Clean(t.Path)), nil
	}
	q := t.s3Query()
	// Litestream's constructor applies its provider defaults (signing, MD5,
	// part sizes) and reads the credentials from the environment; the
	// Target's fields then win.
	c, err := s3.NewReplicaClientFromURL("s3", t.Bucket, t.Path, q, nil)
	if err != nil {
		return nil, invalid("%v", err)
	}
	sc := c.(*s3.ReplicaClient)
	sc.Bucket, sc.Path = t.Bucket, t.Path
	sc.ForcePathStyle, sc.SkipVerify = t.ForcePathStyle, t.SkipVerify
	if t.AccessKeyID != "" {
		sc.AccessKeyID, sc.SecretAccessKey = t.AccessKeyID, t.SecretAccessKey
	}
	return sc, nil
}

// s3Query is a copy of the URL's query with the endpoint and region as
// the Target's fields hold them.
func (t Target) s3Query() url.Values {
	q := url.Values{}
	for k, v := range t.query {
		q[k] = slices.Clone(v)
	}
	q.Del("endpoint")
	q.Del("region")
	if t.Endpoint != "" {
		q.Set("endpoint", t.Endpoint)
	}
	if t.Region != "" {
		q.Set("region", t.Region)
	}
	return q
}

// String returns the target as a URL, without credentials: safe to log.
func (t Target) String() string {
	switch t.Scheme {
	case "file":
		return (&url.URL{Scheme: "file", Path: t.Path}).String()
	case "s3":
		q := t.s3Query()
		for _, k := range secretParams {
			if q.Has(k) {
				q.Set(k, "REDACTED")
			}
		}
		u := url.URL{Scheme: "s3", Host: t.Bucket, Path: path.Join("/", t.Path), RawQuery: q.Encode()}
		if t.Path == "" {
			u.Path = ""
		}
		return u.String()
	}
	return t.Scheme + ":(invalid target)"
}

// GoString keeps %#v from printing the secret key.
func (t Target) GoString() string { return "replicate.Target(" + t.String() + ")" }
