package data

import (
	"embed"
	"fmt"
	"io"
)

// DigitsFile is the name of the digits data set in this directory: the UCI
// optical handwritten digits, gzip-compressed CSV with 1797 rows of 64
// pixels in 0..16 and a label 0..9 (see README.md and LICENSE-digits).
const DigitsFile = "digits.csv.gz"

// DigitsRows is the number of rows of the digits data set.
const DigitsRows = 1797

// files is read-only: an embed.FS cannot be modified.
//
//go:embed digits.csv.gz
var files embed.FS

// OpenDigits returns the embedded digits data set, still gzip-compressed.
// The caller closes it.
func OpenDigits() (io.ReadCloser, error) {
	f, err := files.Open(DigitsFile)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	return f, nil
}
