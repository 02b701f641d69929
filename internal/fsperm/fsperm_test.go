package fsperm_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/fsperm"
	"github.com/ringtail-ml/ringtail/internal/fsperm/fspermtest"
)

// The modes are compared umask-independently: the umask only takes bits
// away, so a private file has no bit outside 0600 and a private
// directory none outside 0700 (and keeps its owner's rwx, which no sane
// umask removes).

func TestNewFilesAndDirectoriesArePrivate(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b")
	if err := fsperm.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(root, "a"), dir} {
		fspermtest.CheckDir(t, d)
	}
	f, err := fsperm.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	fspermtest.CheckFile(t, filepath.Join(dir, "f"))
	g, err := fsperm.OpenRW(filepath.Join(dir, "g"))
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	fspermtest.CheckFile(t, filepath.Join(dir, "g"))
}

func TestExistingModesAreKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // what a user chose
		t.Fatal(err)
	}
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsperm.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	f, err := fsperm.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	for p, want := range map[string]os.FileMode{dir: 0o755, path: 0o644} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want %v kept", p, fi.Mode().Perm(), err, want)
		}
	}
}
