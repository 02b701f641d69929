// Package syncbuf has a bytes.Buffer that is safe for concurrent use, for
// capturing logs and child-process output that goroutines write while a
// test reads it.
package syncbuf
