package fsperm

import "os"

// The modes of new files and directories.
const (
	File os.FileMode = 0o600
	Dir  os.FileMode = 0o700
)

// MkdirAll creates dir and any missing parents with mode Dir.
func MkdirAll(dir string) error { return os.MkdirAll(dir, Dir) }

// Create creates or truncates path for writing, new files with mode File.
func Create(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, File)
}

// OpenRW opens path for reading and writing, creating it with mode File.
func OpenRW(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, File)
}
