package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The server record: while "yella serve" holds a database's engine lock it
// records where it listens in <db>.server (mode 0600, written atomically),
// with a random secret. The CLI reads it when the database is locked,
// connects only to that address and, before it sends a token or anything
// else, checks that the server there knows the secret: it sends a fresh
// random challenge to GET /api/identity and compares the answer with
// HMAC-SHA256(secret, challenge). A listener that merely sits on the port
// (another server, another program) cannot answer. The record is removed
// on a clean stop; one left by a crash is ignored, because the process
// that holds the lock is not the one it names.

// serverRecord is the content of <db>.server.
type serverRecord struct {
	PID    int    `json:"pid"`
	URL    string `json:"url"`
	Secret string `json:"secret"` // hex
	// CertSHA256 is the SHA-256 of the TLS certificate (DER) the server
	// presents, hex; the CLI pins it. Empty for plain HTTP.
	CertSHA256 string    `json:"certSha256,omitempty"`
	DB         string    `json:"db"`
	Started    time.Time `json:"started"`
}

const identityPath = "/api/identity"

func recordPath(db string) string {
	if abs, err := filepath.Abs(db); err == nil {
		db = abs
	}
	return db + ".server"
}

// lockPath is the engine lock file of db (see sqlitestore).
func lockPath(db string) string {
	if abs, err := filepath.Abs(db); err == nil {
		db = abs
	}
	return db + ".lock"
}

// newSecret is 32 random bytes, hex.
func newSecret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// writeRecord writes rec to <db>.server atomically (a temporary file in the
// same directory, mode 0600, synced, then renamed over it).
func writeRecord(db string, rec serverRecord) error {
	path := recordPath(db)
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*") // mode 0600
	if err != nil {
		return fmt.Errorf("server record: %w", err)
	}
	defer os.Remove(f.Name()) // after a successful rename there is nothing left to remove
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("server record: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("server record: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("server record: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("server record: %w", err)
	}
	return nil
}

// readRecord reads <db>.server; os.ErrNotExist if there is none.
func readRecord(db string) (serverRecord, error) {
	var rec serverRecord
	b, err := os.ReadFile(recordPath(db))
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("%s is not a server record: %w", recordPath(db), err)
	}
	if rec.URL == "" || len(rec.Secret) < 32 {
		return rec, fmt.Errorf("%s is not a server record: no url or secret", recordPath(db))
	}
	return rec, nil
}

// removeRecord removes <db>.server if it is still the one holding secret.
func removeRecord(db, secret string) {
	if rec, err := readRecord(db); err == nil && rec.Secret == secret {
		os.Remove(recordPath(db))
	}
}

// lockHolder is the pid recorded in db's lock file, 0 if unknown.
func lockHolder(db string) int {
	b, err := os.ReadFile(lockPath(db))
	if err != nil {
		return 0
	}
	s := strings.TrimSpace(string(b))
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	pid, _ := strconv.Atoi(s[:end])
	return pid
}

func identityMAC(secret []byte, challenge string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(challenge))
	return hex.EncodeToString(m.Sum(nil))
}

// identityHandler answers GET /api/identity?challenge=HEX with
// {"mac": HMAC-SHA256(secret, challenge)}. It needs no token: the answer
// proves who the server is and reveals nothing else.
func identityHandler(secretHex string) http.Handler {
	secret, _ := hex.DecodeString(secretHex)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		c := r.URL.Query().Get("challenge")
		if _, err := hex.DecodeString(c); err != nil || len(c) < 32 || len(c) > 128 {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"code":"INVALID_QUERY","message":"challenge must be 32 to 128 hex digits"}}`+"\n")
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"mac": identityMAC(secret, c)})
	})
}

// pinnedTLS trusts exactly the certificate whose SHA-256 is certSHA256
// (hex): the one the server recorded.
func pinnedTLS(certSHA256 string) *tls.Config {
	want, _ := hex.DecodeString(certSHA256)
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by the pin check below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server presented no certificate")
			}
			sum := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if len(want) == 0 || !hmac.Equal(sum[:], want) {
				return errors.New("the server's certificate is not the one in its server record")
			}
			return nil
		},
	}
}

// proveIdentity checks that the server at base knows secretHex, with a
// fresh challenge; hc must not carry a token.
func proveIdentity(ctx context.Context, hc *http.Client, base, secretHex string) error {
	secret, err := hex.DecodeString(secretHex)
	if err != nil {
		return errors.New("the server record's secret is not hex")
	}
	challenge := newSecret()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+identityPath+"?challenge="+url.QueryEscape(challenge), nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		MAC string `json:"mac"`
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &out) != nil {
		return fmt.Errorf("no identity answer (HTTP %d)", resp.StatusCode)
	}
	got, err := hex.DecodeString(out.MAC)
	want, _ := hex.DecodeString(identityMAC(secret, challenge))
	if err != nil || !hmac.Equal(got, want) {
		return errors.New("it answered the identity challenge wrongly")
	}
	return nil
}
