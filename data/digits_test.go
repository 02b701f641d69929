package data

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"testing"
)

// The embedded file must be the one README.md documents, byte for byte.
const digitsSHA256 = "46abec6b12486ad9e51943373abcf22bbea1b5a51a1619b361570d8893f1464a"

func TestDigitsIsTheDocumentedFile(t *testing.T) {
	f, err := OpenDigits()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	if got := hex.EncodeToString(sum[:]); got != digitsSHA256 {
		t.Fatalf("sha256 %s, want %s", got, digitsSHA256)
	}
	zr, err := gzip.NewReader(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	rows := 0
	for sc.Scan() {
		if n := strings.Count(sc.Text(), ",") + 1; n != 65 {
			t.Fatalf("row %d has %d columns, want 65", rows+1, n)
		}
		rows++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if rows != DigitsRows {
		t.Fatalf("%d rows, want %d", rows, DigitsRows)
	}
}
