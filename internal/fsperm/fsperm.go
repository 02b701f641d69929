// Package fsperm creates the files that hold a job's state: write-ahead
// logs, flight-recorder dumps, timelines, rank logs. They can carry host
// names, addresses, data-set layout and values derived from the job's
// secret, so they are private to the user: files 0600 in directories
// 0700 (before the umask, which can only take bits away).
//
// Only what is created gets these modes: an existing directory or file
// keeps the mode it has (MkdirAll and O_CREATE do not chmod), so a
// directory a user opened up on purpose stays as it is.
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
