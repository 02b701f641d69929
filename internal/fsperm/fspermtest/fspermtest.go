package fspermtest

import (
	"os"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/fsperm"
)

// CheckFile fails t unless path is a regular file with no permission
// bit outside fsperm.File (umask-independent).
func CheckFile(t testing.TB, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&^fsperm.File != 0 {
		t.Errorf("%s: mode %v, want a file with nothing beyond %v", path, fi.Mode(), fsperm.File)
	}
}

// CheckDir fails t unless path is a directory with its owner's rwx and
// no permission bit outside fsperm.Dir.
func CheckDir(t testing.TB, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != fsperm.Dir {
		t.Errorf("%s: mode %v, want a directory with %v", path, fi.Mode(), fsperm.Dir)
	}
}
