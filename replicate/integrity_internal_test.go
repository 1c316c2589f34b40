package replicate

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// integrityCheck, which guards every restore, accepts a sound file and
// refuses a damaged one with ErrIntegrity and SQLite's findings. (A replica
// damaged so that it still restores cannot be made through Litestream: its
// files carry checksums, which Restore verifies first.)
func TestIntegrityCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA page_size = 1024; CREATE TABLE t (k TEXT, v TEXT); CREATE INDEX t_k ON t (k);
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
		INSERT INTO t SELECT printf('key-%05d', i), printf('value-%05d', i) FROM n`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := integrityCheck(t.Context(), path); err != nil {
		t.Fatalf("sound file: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Scramble the cell contents of pages in the second half of the file
	// (keeping each page's header), where the index and table pages lie.
	for p := len(b) / 1024 / 2; p < len(b)/1024-1; p += 3 {
		for i := p*1024 + 200; i < p*1024+900; i++ {
			b[i] ^= 0x5a
		}
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	err = integrityCheck(t.Context(), path)
	if !errors.Is(err, ErrIntegrity) || len(strings.TrimPrefix(err.Error(), ErrIntegrity.Error())) < 3 {
		t.Fatalf("damaged file: %v, want ErrIntegrity with SQLite's findings", err)
	}
	t.Logf("damaged file: %v", err)
}
