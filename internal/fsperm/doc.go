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
